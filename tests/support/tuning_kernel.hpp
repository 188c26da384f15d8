#pragma once
// The kernel the tuner and tuning database tests tune, look up and compile: causal attention over
// 2 heads of 16 features, the sequence length T a run-time dim (so that records apply per bucket).
#include "dsl/dsl.hpp"

namespace tuning_test {

using namespace attn::dsl;

constexpr auto T = dim<"T">;
constexpr auto H = head_dim<"H", 2>;
constexpr auto Dh = dim<"Dh", 16>;
constexpr auto q = input<"q">(H, T, Dh);
constexpr auto k = input<"k">(H, T, Dh);
constexpr auto v = input<"v">(H, T, Dh);
constexpr auto causal_attention = combine(softmax(causal(scaled_scores(q, k))), v);

}  // namespace tuning_test
