/* The fields of Halide's halide_buffer_t (HalideRuntime.h) that an attnforge kernel's checking
 * entry point (checked_call.c) reads, under names of their own: that file is compiled for the
 * kernel's target with no header but <stdint.h>, so it cannot include HalideRuntime.h (which
 * includes the C library's). Same types in the same order, hence the same layout on every
 * target; runtime/aot_entry.cpp asserts it against Halide's own declarations. Valid C and C++. */
#ifndef ATTN_HALIDE_BUFFER_LAYOUT_H
#define ATTN_HALIDE_BUFFER_LAYOUT_H

#include <stdint.h>

struct attn_halide_type {
  uint8_t code; /* halide_type_code_t: 0 int, 1 uint, 2 float, 3 handle, 4 bfloat */
  uint8_t bits;
  uint16_t lanes;
};

struct attn_halide_dimension {
  int32_t min, extent, stride;
  uint32_t flags;
};

struct attn_halide_buffer {
  uint64_t device;
  const void *device_interface;
  uint8_t *host;
  uint64_t flags;
  struct attn_halide_type type;
  int32_t dimensions;
  struct attn_halide_dimension *dim;
  void *padding;
};

#endif
