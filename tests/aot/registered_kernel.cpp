// The generator's view of test_aot's user kernel: one registration, as in a user's project.
#include "registered_kernel.hpp"

#include "generators/aot/registry.hpp"

ATTN_REGISTER_KERNEL(aot_test::causal_alibi_softcap);
