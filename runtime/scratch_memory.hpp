#pragma once
// Memory for a kernel's intermediates, handed to Halide as its malloc and free. Large blocks are
// kept when freed and reused by a later call that needs one of about that size: a fresh large
// block comes from mmap, and the page faults of touching it cost more than the work done on it
// (multi-head attention with projections at T = 2048: 15-25% of the call, four 4 MiB products).
// At most scratch_cache_limit() bytes are kept (limits.hpp); small blocks go straight to malloc.
// A kernel built ahead of time keeps its blocks by the same rules, in the C of its entry point
// (generators/aot/checked_call.c): its library carries no attnforge runtime.
#include <cstddef>

namespace attn::detail {

// 128-byte aligned (what Halide asks of halide_malloc); nullptr when out of memory.
void* scratch_malloc(std::size_t bytes);
void scratch_free(void* p);

// Bytes held by freed blocks kept for reuse (tests).
std::size_t scratch_cached_bytes();

}  // namespace attn::detail
