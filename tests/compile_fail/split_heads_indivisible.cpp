// split_heads needs the width to be a multiple of the number of heads: 512 % 7 != 0.
// expect: split_heads: D (512) is not divisible by H (7)
#include "dsl/dsl.hpp"
using namespace attn::dsl;

constexpr auto T = dim<"T">;
constexpr auto D = dim<"D", 512>;
constexpr auto H = head_dim<"H", 7>;

int main() {
  constexpr auto x = input<"x">(T, D);
  auto y = split_heads(x, H);
  (void)shape_of(y);
}
