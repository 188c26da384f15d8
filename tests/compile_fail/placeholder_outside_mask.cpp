// q_idx is a free variable of mask(...) / modify(...); outside them it has no meaning.
// expect: may only appear inside mask
#include "dsl/dsl.hpp"
using namespace attn::dsl;

constexpr auto T = dim<"T">;

int main() {
  constexpr auto s = input<"s">(T, T);
  auto y = s + q_idx;  // not inside mask/modify
  (void)to_ir(y);
}
