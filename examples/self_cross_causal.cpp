// Self-attention, cross-attention (decoder queries, encoder keys and values) and causal
// self-attention: one set of building blocks, three wirings.
#include <cstdio>
#include "example_data.hpp"
#include "runtime/jit.hpp"

using namespace attn::dsl;

constexpr auto T = dim<"T">;        // decoder length
constexpr auto S = dim<"S">;        // encoder length
constexpr auto D = dim<"D", 8>;
constexpr auto Dk = dim<"Dk", 4>;

constexpr auto x = input<"x">(T, D);
constexpr auto enc = input<"enc">(S, D);
constexpr auto wq = weight<"wq">(D, Dk);
constexpr auto wk = weight<"wk">(D, Dk);
constexpr auto wv = weight<"wv">(D, Dk);

int main() {
  constexpr auto self = variants::self_attention(x, wq, wk, wv);
  constexpr auto cross = variants::cross_attention(x, enc, wq, wk, wv);
  constexpr auto causal = variants::causal_self_attention(x, wq, wk, wv);
  static_assert(shape_of(self) == shape(T, Dk) && shape_of(cross) == shape(T, Dk) && shape_of(causal) == shape(T, Dk));

  const auto X = examples::random_tensor({5, 8}, 1), E = examples::random_tensor({7, 8}, 2);
  const auto WQ = examples::random_tensor({8, 4}, 3), WK = examples::random_tensor({8, 4}, 4), WV = examples::random_tensor({8, 4}, 5);
  std::printf("self:   %s\n", to_string(self).c_str());
  examples::print_matrix("  weights", attn::jit(self, {.with_weights = true}).run(X, WQ, WK, WV).weights);
  std::printf("cross:  %s\n", to_string(cross).c_str());
  examples::print_matrix("  weights (5 decoder rows over 7 encoder columns)",
                         attn::jit(cross, {.with_weights = true}).run(X, E, WQ, WK, WV).weights);
  std::printf("causal: %s\n", to_string(causal).c_str());
  const auto w = attn::jit(causal, {.with_weights = true}).run(X, WQ, WK, WV).weights;
  examples::print_matrix("  weights", w);
  for (int i = 0; i < 5; ++i)
    for (int j = i + 1; j < 5; ++j)
      if (w(i, j) != 0.0f) return 1;  // the future is invisible
  return 0;
}
