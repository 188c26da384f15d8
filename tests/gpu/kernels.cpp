// Kernels of the GPU tests beyond attnforge's named variants, per-head attention over q, k, v of
// shape (H = 8, T, Dh): one whose first rows keep no key at all (query i sees keys 0..i-5), so that a
// block holds rows without a kept key beside rows with some; one with a learned bias per distance
// and head (its gradients: a gather's adjoint into the table).
#include "generators/aot/named_variants.hpp"
#include "generators/aot/registry.hpp"

namespace gpu_test {
using namespace attn::named;
inline constexpr auto delayed_causal_attention = combine(softmax(mask(scaled_scores(q, k), kv_idx + 5 <= q_idx)), v);
inline constexpr auto R = dim<"R", 16>;  // distances 0 .. 15 back; farther ones read the last
inline constexpr auto relative_bias_attention =
    combine(softmax(causal(modify(scaled_scores(q, k), score + gather(weight<"bias">(R, H), q_idx - kv_idx, head)))), v);
}  // namespace gpu_test

ATTN_REGISTER_KERNEL_AS("delayed_causal_attention", gpu_test::delayed_causal_attention,
                        "query i sees keys 0..i-5: rows 0..4 keep none; q, k, v (H = 8, T, Dh)");
ATTN_REGISTER_KERNEL_AS("relative_bias_attention", gpu_test::relative_bias_attention,
                        "causal, a learned bias per distance and head; q, k, v (H = 8, T, Dh), bias (R = 16, H)");
