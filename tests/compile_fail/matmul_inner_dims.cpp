// A matmul whose inner dims disagree: (T, Dk)·(D, Dk) contracts Dk against D.
// expect: matmul: inner dims differ: Dk (64) vs D (512)
#include "dsl/dsl.hpp"
using namespace attn::dsl;

constexpr auto T = dim<"T">;
constexpr auto D = dim<"D", 512>;
constexpr auto Dk = dim<"Dk", 64>;

int main() {
  constexpr auto q = input<"q">(T, Dk);
  constexpr auto w = weight<"w">(D, Dk);
  auto y = matmul(q, w);
  (void)shape_of(y);
}
