// The GPU benchmark's kernels: per-head attention with H = 16 heads (the named variants have 8),
// full and causal, over q, k, v of shape (B, H, T, Dh); Dh is bound per kernel (CMakeLists.txt).
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
}  // namespace gpu_bench

ATTN_REGISTER_KERNEL_AS("full16", gpu_bench::full_attention, "softmax(q·kᵀ/√Dh)·v, 16 heads");
ATTN_REGISTER_KERNEL_AS("causal16", gpu_bench::causal_attention, "causal, 16 heads");
