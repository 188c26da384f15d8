// RNN-era attention: Luong dot-product (unscaled), Luong general (sᵀ·W·h) and Bahdanau additive
// (vᵀ·tanh(W₁·s + W₂·h + b)), a score that is not a dot product, on the same decoder/encoder states.
#include <cstdio>
#include "example_data.hpp"
#include "runtime/jit.hpp"

using namespace attn::dsl;

constexpr auto Nq = dim<"Nq">;
constexpr auto Nk = dim<"Nk">;
constexpr auto Dh = dim<"Dh", 6>;
constexpr auto A = dim<"A", 5>;

constexpr auto s = input<"s">(Nq, Dh);   // decoder states
constexpr auto h = input<"h">(Nk, Dh);   // encoder annotations
constexpr auto W = weight<"W">(Dh, Dh);
constexpr auto W1 = weight<"W1">(Dh, A);
constexpr auto W2 = weight<"W2">(Dh, A);
constexpr auto b = weight<"b">(A);
constexpr auto v = weight<"v">(A);

int main() {
  constexpr auto dot = variants::luong_dot(s, h);
  constexpr auto general = variants::luong_general(s, h, W);
  constexpr auto additive = variants::bahdanau(s, h, W1, W2, b, v);
  static_assert(shape_of(additive) == shape(Nq, Dh));

  const auto S = examples::random_tensor({3, 6}, 1), Hs = examples::random_tensor({4, 6}, 2);
  std::printf("Luong dot:     %s\n", to_string(dot).c_str());
  examples::print_matrix("  α", attn::jit(dot, {.with_weights = true}).run(S, Hs).weights);
  std::printf("Luong general: %s\n", to_string(general).c_str());
  examples::print_matrix("  α", attn::jit(general, {.with_weights = true}).run(S, Hs, examples::random_tensor({6, 6}, 3)).weights);
  std::printf("Bahdanau:      %s\n", to_string(additive).c_str());
  const auto out = attn::jit(additive, {.with_weights = true})
                       .run(S, Hs, examples::random_tensor({6, 5}, 4), examples::random_tensor({6, 5}, 5),
                            examples::random_tensor({5}, 6), examples::random_tensor({5}, 7));
  examples::print_matrix("  α", out.weights);
  examples::print_matrix("  context c = α·h", out.output);
  return 0;
}
