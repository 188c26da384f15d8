// A shape error deep inside an expression is reported where the expression is used (here shape_of):
// building on it and comparing its shape add no second error, nor a trace of the library.
// expect: matmul: inner dims differ: Dk (64) vs D (512)
#include "dsl/dsl.hpp"
using namespace attn::dsl;

constexpr auto T = dim<"T">;
constexpr auto D = dim<"D", 512>;
constexpr auto Dk = dim<"Dk", 64>;
constexpr auto Dv = dim<"Dv", 32>;

int main() {
  constexpr auto q = input<"q">(T, Dk);
  constexpr auto k = input<"k">(T, D);
  constexpr auto v = input<"v">(T, Dv);
  auto y = combine(softmax(causal(matmul(q, transpose(k)))), v);  // Dk against D
  auto z = project(y, weight<"wo">(Dv, D)) + 1.0f;
  static_assert(shape_of(z) == shape(T, D));
}
