// split_heads(x, H, Dh) needs the width to be exactly H heads of Dh: 48 != 4 · 16.
// expect: split_heads: D (48) is not H (4) heads of Dh (16)
#include "dsl/dsl.hpp"
using namespace attn::dsl;

constexpr auto T = dim<"T">;
constexpr auto D = dim<"D", 48>;
constexpr auto H = head_dim<"H", 4>;
constexpr auto Dh = dim<"Dh", 16>;

int main() {
  constexpr auto x = input<"x">(T, D);
  auto q = split_heads(x, H, Dh);
  (void)shape_of(q);
}
