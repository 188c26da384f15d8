// Kernels of the GPU tests beyond attnforge's named variants: per-head attention over q, k, v of
// shape (H = 8, T, Dh) whose first rows keep no key at all (query i sees keys 0..i-5), so that a
// block holds rows without a kept key beside rows with some.
#include "generators/aot/named_variants.hpp"
#include "generators/aot/registry.hpp"

namespace gpu_test {
using namespace attn::named;
inline constexpr auto delayed_causal_attention = combine(softmax(mask(scaled_scores(q, k), kv_idx + 5 <= q_idx)), v);
}  // namespace gpu_test

ATTN_REGISTER_KERNEL_AS("delayed_causal_attention", gpu_test::delayed_causal_attention,
                        "query i sees keys 0..i-5: rows 0..4 keep none; q, k, v (H = 8, T, Dh)");
