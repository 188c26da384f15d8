// project(X, W) needs W's rows to match X's width: X is (T, D = 512), W is (Dk = 64, Dk).
// expect: project: inner dims differ: D (512) vs Dk (64)
#include "dsl/dsl.hpp"
using namespace attn::dsl;

constexpr auto T = dim<"T">;
constexpr auto D = dim<"D", 512>;
constexpr auto Dk = dim<"Dk", 64>;

int main() {
  constexpr auto x = input<"x">(T, D);
  constexpr auto w = weight<"w">(Dk, Dk);
  auto y = project(x, w);
  (void)shape_of(y);
}
