// What knowing V's width when compiling is worth: the same causal attention (T = 2048, H = 8,
// Dh = 64) with the width static (dim<"Dh", 64>), bound (jit_options::bind, as attn-gen --bind
// Dh=64), and free (known only at the call); best of 7 calls each, the three kernels in turn.
//   build/bench/known_widths
#include <cstdio>
#include <vector>
#include "interleaved.hpp"
#include "runtime/jit.hpp"
using namespace attn::dsl;
constexpr auto T = dim<"T">;
constexpr auto H = head_dim<"H", 8>;
template <class D> constexpr auto causal_attention(D width) {
  return combine(softmax(causal(scaled_scores(input<"q">(H, T, width), input<"k">(H, T, width)))), input<"v">(H, T, width));
}

int main() {
  const std::int64_t t = 2048, dh = 64;
  const auto Q = bench::random_tensor({1, 8, t, dh}, 1), K = bench::random_tensor({1, 8, t, dh}, 2),
             V = bench::random_tensor({1, 8, t, dh}, 3);
  const auto fixed = attn::jit(causal_attention(dim<"Dh", 64>));
  const auto bound = attn::jit(causal_attention(dim<"Dh">), {.bind = {{"Dh", dh}}});
  const auto free_ = attn::jit(causal_attention(dim<"Dh">));
  auto out = fixed(Q, K, V);
  const std::vector<double> b = bench::best_of_rounds(
      7, [&] { fixed.into(out.view(), Q, K, V); }, [&] { bound.into(out.view(), Q, K, V); },
      [&] { free_.into(out.view(), Q, K, V); });
  const double gflop = 2.0 * 8 * t * t * dh * 1e-9;  // causal: half of 4·H·T²·Dh
  std::printf("causal T=2048 H=8 Dh=64 fused, best of 7, GFLOP/s: Dh static %.1f, bound %.1f (%.2fx static), free %.1f (%.2fx)\n",
              gflop / b[0], gflop / b[1], b[0] / b[1], gflop / b[2], b[0] / b[2]);
}
