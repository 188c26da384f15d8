// The GPU benchmark's kernels: per-head attention with H = 16 heads (the named variants have 8),
// full, causal and three variants (ALiBi and softcap with causal, a sliding window of 256 keys),
// over q, k, v of shape (B, H, T, Dh); Dh is bound per kernel (CMakeLists.txt).
#include "generators/aot/registry.hpp"

namespace gpu_bench {
using namespace attn::dsl;
inline constexpr auto T = dim<"T">;
inline constexpr auto Dh = dim<"Dh">;
inline constexpr auto H = head_dim<"H", 16>;
inline constexpr auto q = input<"q">(H, T, Dh);
inline constexpr auto k = input<"k">(H, T, Dh);
inline constexpr auto v = input<"v">(H, T, Dh);
inline constexpr auto full_attention = combine(softmax(scaled_scores(q, k)), v);
inline constexpr auto causal_attention = combine(softmax(causal(scaled_scores(q, k))), v);
inline constexpr auto alibi_attention = combine(softmax(causal(alibi(scaled_scores(q, k), H))), v);
inline constexpr auto softcap_attention = combine(softmax(causal(softcap(scaled_scores(q, k), 20.0f))), v);
inline constexpr auto window_attention = combine(softmax(sliding_window(scaled_scores(q, k), 256)), v);
}  // namespace gpu_bench

ATTN_REGISTER_KERNEL_AS("full16", gpu_bench::full_attention, "softmax(q·kᵀ/√Dh)·v, 16 heads");
ATTN_REGISTER_KERNEL_AS("causal16", gpu_bench::causal_attention, "causal, 16 heads");
ATTN_REGISTER_KERNEL_AS("alibi16", gpu_bench::alibi_attention, "ALiBi + causal, 16 heads");
ATTN_REGISTER_KERNEL_AS("softcap16", gpu_bench::softcap_attention, "softcap 20 + causal, 16 heads");
ATTN_REGISTER_KERNEL_AS("window16", gpu_bench::window_attention, "sliding window of 256 keys (causal), 16 heads");
