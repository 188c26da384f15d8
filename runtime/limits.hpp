#pragma once
// Process-wide limits of the JIT runtime. Each setter is thread-safe and takes effect at once.
#include <cstddef>
#include <cstdint>

namespace attn {

// Most compiled kernels the JIT cache keeps; the least recently used one is dropped first. A kernel
// a caller still holds stays alive (and usable) after it is dropped from the cache.
// Default: 128, or the environment variable ATTN_KERNEL_CACHE_LIMIT. 0 caches nothing.
void set_kernel_cache_limit(std::size_t kernels);
std::size_t kernel_cache_limit();

// Most bytes one call may allocate: the outputs run() allocates plus the intermediates the kernel
// materialises. A call that would need more throws attn::memory_error before anything runs.
// Default: half of the machine's physical memory, or the environment variable ATTN_MEMORY_BUDGET
// (bytes). 0 restores the default.
void set_memory_budget(std::int64_t bytes);
std::int64_t memory_budget();

// Most bytes of freed kernel intermediates (blocks of 1 MiB and more) kept for reuse by later calls,
// instead of being returned to the system and faulted in again (runtime/scratch_memory.hpp).
// Default: 512 MiB, or the environment variable ATTN_SCRATCH_CACHE (bytes). 0 keeps nothing.
void set_scratch_cache_limit(std::size_t bytes);
std::size_t scratch_cache_limit();

}  // namespace attn
