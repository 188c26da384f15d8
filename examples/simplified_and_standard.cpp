// The simplified attention layer (no projections) and the standard layer with W_Q, W_K, W_V,
// where the query set (N_Q rows) differs from the input set (N_X rows).
#include <cmath>
#include <cstdio>
#include "example_data.hpp"
#include "runtime/jit.hpp"

using namespace attn::dsl;

constexpr auto NQ = dim<"NQ">;
constexpr auto NX = dim<"NX">;
constexpr auto DX = dim<"DX", 6>;
constexpr auto DQ = dim<"DQ", 5>;
constexpr auto Dk = dim<"dk", 4>;
constexpr auto Dv = dim<"dv", 3>;

int main() {
  // y = softmax(q·Xᵀ/√D)·X for one query vector q.
  constexpr auto q = input<"q">(DX);
  constexpr auto X = input<"X">(NX, DX);
  constexpr auto simple = variants::simplified(q, X);
  static_assert(shape_of(simple) == shape(DX));
  std::printf("simplified:  y = %s\n", to_string(simple).c_str());
  const auto qv = examples::random_tensor({6}, 1), Xv = examples::random_tensor({4, 6}, 2);
  examples::print_matrix("y", attn::jit(simple)(qv, Xv));

  // Standard: Q (NQ, DQ) against X (NX, DX): Y = softmax(QW_Q·(XW_K)ᵀ/√dk)·XW_V, (NQ, dv).
  constexpr auto Q = input<"Q">(NQ, DQ);
  constexpr auto wq = weight<"wq">(DQ, Dk);
  constexpr auto wk = weight<"wk">(DX, Dk);
  constexpr auto wv = weight<"wv">(DX, Dv);
  constexpr auto standard = variants::standard(Q, X, wq, wk, wv);
  static_assert(shape_of(standard) == shape(NQ, Dv));
  std::printf("\nstandard:    Y = %s\n", to_string(standard).c_str());
  auto kernel = attn::jit(standard, {.with_weights = true});
  const auto out = kernel.run(examples::random_tensor({2, 5}, 3), Xv, examples::random_tensor({5, 4}, 4),
                              examples::random_tensor({6, 4}, 5), examples::random_tensor({6, 3}, 6));
  examples::print_matrix("A (NQ = 2 queries over NX = 4 inputs)", out.weights);
  examples::print_matrix("Y", out.output);
  for (int i = 0; i < 2; ++i) {  // each row of A is a distribution
    float sum = 0;
    for (int j = 0; j < 4; ++j) sum += out.weights(i, j);
    if (std::fabs(sum - 1.0f) > 1e-5f) return 1;
  }
  return 0;
}
