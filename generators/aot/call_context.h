/* The user_context of a call into an attnforge kernel built ahead of time. Halide hands it to
 * the error handler with each error; the handler every attnforge kernel installs
 * (checked_call.c) recognises it by its magic and keeps the first message in it, instead of
 * printing and aborting. Its layout and magic are the same in every attnforge kernel, so any
 * of their handlers fills any of their calls'. attn::aot::kernel_buffer passes one to the
 * device copies it makes (runtime/kernel_buffer.hpp). Valid C and C++. */
#ifndef ATTN_CALL_CONTEXT_H
#define ATTN_CALL_CONTEXT_H

#include <stdint.h>

#define ATTN_CALL_MAGIC 0x31677266616e7461ull /* "atnafrg1" */

enum { attn_message_size = 1024 };

struct attn_call {
  uint64_t magic; /* ATTN_CALL_MAGIC */
  int reported;   /* set by the first error: calls running in parallel may report several */
  char message[attn_message_size];
};

#endif
