#pragma once
// attnforge's named variants as concrete expressions, the ones attn-gen builds by name and the
// benchmarks compare (bench/attention_bench.cpp): per-head attention over q, k, v of shape
// (H, T, Dh) with H = 8 heads, and two layers with projections. T, Dh, D and Dk are run-time
// dims: fix them at build time with --bind (BIND in attn_add_kernel) or leave them to the caller.
#include "dsl/dsl.hpp"

namespace attn::named {

using namespace attn::dsl;

inline constexpr auto T = dim<"T">;
inline constexpr auto Dh = dim<"Dh">;
inline constexpr auto H = head_dim<"H", 8>;
inline constexpr auto q = input<"q">(H, T, Dh);
inline constexpr auto k = input<"k">(H, T, Dh);
inline constexpr auto v = input<"v">(H, T, Dh);
inline constexpr int window = 256;
inline constexpr float cap = 20.0f;

inline constexpr auto attention = combine(softmax(scaled_scores(q, k)), v);
inline constexpr auto causal_attention = combine(softmax(causal(scaled_scores(q, k))), v);
inline constexpr auto sliding_window_attention = combine(softmax(sliding_window(scaled_scores(q, k), window)), v);
inline constexpr auto alibi_causal_attention = combine(softmax(causal(alibi(scaled_scores(q, k), H))), v);
inline constexpr auto softcap_causal_attention = combine(softmax(causal(softcap(scaled_scores(q, k), cap))), v);
// Softmax-free: weights σ(s - log T), causal, summed with v unnormalised.
inline constexpr auto sigmoid_causal_attention = variants::sigmoid_attention(causal(scaled_scores(q, k)), v);

// The main example's layer: x (T, D) projected by wq, wk, wv (D, Dk).
inline constexpr auto D = dim<"D">;
inline constexpr auto Dk = dim<"Dk">;
inline constexpr auto causal_self_attention =
    variants::causal_self_attention(input<"x">(T, D), weight<"wq">(D, Dk), weight<"wk">(D, Dk), weight<"wv">(D, Dk));

// Multi-head self-attention with W_O at the benchmarks' width: D = 512, 8 heads of 64.
inline constexpr auto D512 = dim<"D", 512>;
inline constexpr auto multi_head_self_attention =
    variants::multi_head_self_attention(input<"x">(T, D512), weight<"wq">(D512, D512), weight<"wk">(D512, D512),
                                        weight<"wv">(D512, D512), weight<"wo">(D512, D512), H);

}  // namespace attn::named
