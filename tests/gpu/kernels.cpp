// Kernels of the GPU tests beyond attnforge's named variants, per-head attention over q, k, v of
// shape (H = 8, T, Dh): one whose first rows keep no key at all (query i sees keys 0..i-5), so that a
// block holds rows without a kept key beside rows with some; one with a learned bias per distance
// and head (its gradients: a gather's adjoint into the table); one over bfloat16 keys and float16
// values (16-bit storage, float32 arithmetic).
#include "generators/aot/named_variants.hpp"
#include "generators/aot/registry.hpp"

namespace gpu_test {
using namespace attn::named;
inline constexpr auto delayed_causal_attention = combine(softmax(mask(scaled_scores(q, k), kv_idx + 5 <= q_idx)), v);
inline constexpr auto R = dim<"R", 16>;  // distances 0 .. 15 back; farther ones read the last
inline constexpr auto relative_bias_attention =
    combine(softmax(causal(modify(scaled_scores(q, k), score + gather(weight<"bias">(R, H), q_idx - kv_idx, head)))), v);
inline constexpr auto causal_16_bit_cache =
    combine(softmax(causal(scaled_scores(q, input<"k", bf16>(H, T, Dh)))), input<"v", f16>(H, T, Dh));
}  // namespace gpu_test

ATTN_REGISTER_KERNEL_AS("delayed_causal_attention", gpu_test::delayed_causal_attention,
                        "query i sees keys 0..i-5: rows 0..4 keep none; q, k, v (H = 8, T, Dh)");
ATTN_REGISTER_KERNEL_AS("causal_16_bit_cache", gpu_test::causal_16_bit_cache,
                        "causal over bfloat16 keys and float16 values; q, k, v (H = 8, T, Dh)");
ATTN_REGISTER_KERNEL_AS("relative_bias_attention", gpu_test::relative_bias_attention,
                        "causal, a learned bias per distance and head; q, k, v (H = 8, T, Dh), bias (R = 16, H)");
