// The generator's view of test_aot's user kernels: registrations, as in a user's project.
#include "registered_kernel.hpp"

#include "generators/aot/registry.hpp"

ATTN_REGISTER_KERNEL(aot_test::causal_alibi_softcap);
ATTN_REGISTER_KERNEL(aot_test::causal_16_bit_cache);
