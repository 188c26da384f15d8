// Grouped-query attention: the query heads must be a whole number of heads per group: 8 % 3 != 0.
// expect: repeat_heads: H (8) is not a multiple of G (3)
#include "dsl/dsl.hpp"
using namespace attn::dsl;

constexpr auto T = dim<"T">;
constexpr auto D = dim<"D", 48>;
constexpr auto H = head_dim<"H", 8>;
constexpr auto G = head_dim<"G", 3>;
constexpr auto Dh = dim<"Dh", 16>;

int main() {
  constexpr auto x = input<"x">(T, D);
  auto kv = repeat_heads(split_heads(x, G, Dh), H);
  (void)shape_of(kv);
}
