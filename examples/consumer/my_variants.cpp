// Registers this project's expression for its generator (attn_add_kernel SOURCES).
#include "my_variants.hpp"

#include "generators/aot/registry.hpp"

// [snippet: register]
ATTN_REGISTER_KERNEL(my::causal_alibi);
// [end snippet]
