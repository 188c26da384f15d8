// concat_heads expects (..., H, T, D/H); a plain (B, T, D) tensor has no heads dim.
// expect: concat_heads: expected a heads dim, got B (4)
#include "dsl/dsl.hpp"
using namespace attn::dsl;

constexpr auto B = dim<"B", 4>;
constexpr auto T = dim<"T">;
constexpr auto D = dim<"D", 512>;

int main() {
  constexpr auto x = input<"x">(B, T, D);
  auto y = concat_heads(x);
  (void)shape_of(y);
}
