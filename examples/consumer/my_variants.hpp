#pragma once
// This project's attention variant: per-head causal attention with ALiBi's distance penalty and
// a softcap of 30 on the scores.
#include "dsl/dsl.hpp"

// [snippet: expression]
namespace my {

using namespace attn::dsl;

inline constexpr auto T = dim<"T">;
inline constexpr auto Dh = dim<"Dh">;
inline constexpr auto H = head_dim<"H", 4>;
inline constexpr auto q = input<"q">(H, T, Dh);
inline constexpr auto k = input<"k">(H, T, Dh);
inline constexpr auto v = input<"v">(H, T, Dh);
inline constexpr auto causal_alibi = combine(softmax(causal(softcap(alibi(scaled_scores(q, k), H), 30.0f))), v);

}  // namespace my
// [end snippet]
