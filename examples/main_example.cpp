// The main example: causal self-attention written as an expression, checked at compile time,
// printed, costed, JIT-compiled for this CPU and run.
#include <cstdio>
#include "example_data.hpp"
#include "runtime/jit.hpp"

using namespace attn::dsl;

// [snippet: expression]
constexpr auto T = dim<"T">;          // sequence length, bound at run time
constexpr auto D = dim<"D", 16>;      // model width, fixed at compile time
constexpr auto Dk = dim<"Dk", 8>;     // query/key/value width

constexpr auto x = input<"x">(T, D);
constexpr auto wq = weight<"wq">(D, Dk);
constexpr auto wk = weight<"wk">(D, Dk);
constexpr auto wv = weight<"wv">(D, Dk);

constexpr auto scores = scale(matmul(project(x, wq), transpose(project(x, wk))), rsqrt(Dk));
constexpr auto weights = softmax(causal(scores));   // over the key axis
constexpr auto y = combine(weights, project(x, wv)); // Y = A·V

static_assert(shape_of(y) == shape(T, Dk));          // a mismatch is a compile error naming both dims
// [end snippet]
static_assert(cost(y).at(T = 6).flops == 2 * (3 * 6 * 16 * 8 + 2 * 6 * 6 * 8) + 6 * 6 * (1 + 2 + 5));

int main() {
  std::printf("expression:  y = %s\n", to_string(y).c_str());
  const auto c = cost(y);
  std::printf("work:        %s  (%s)\n", to_string(c.work()).c_str(), big_o(c).c_str());
  std::printf("FLOPs:       %s; at T = 6: %.0f\n", to_string(c.flops()).c_str(), c.at(T = 6).flops);
  std::printf("bytes:       %s; at T = 6: %.0f\n\n", to_string(c.bytes()).c_str(), c.at(T = 6).bytes);

  // [snippet: run]
  auto kernel = attn::jit(y, {.with_weights = true});  // compiled once for this CPU, then cached
  const auto X = examples::random_tensor({6, 16}, 1);
  const auto WQ = examples::random_tensor({16, 8}, 2, 0.5f);
  const auto WK = examples::random_tensor({16, 8}, 3, 0.5f);
  const auto WV = examples::random_tensor({16, 8}, 4, 0.5f);
  const attn::outputs out = kernel.run(X, WQ, WK, WV);  // inputs, then weights, then lengths
  // [end snippet]

  examples::print_matrix("attention weights (causal: zero above the diagonal)", out.weights);
  examples::print_matrix("y = A·V", out.output);
  return 0;
}
