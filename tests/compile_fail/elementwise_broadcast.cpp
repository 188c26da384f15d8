// (T, A) + (B) does not broadcast: the trailing dims A and B are different dims.
// expect: elementwise: dims differ: A (16) vs B (32)
#include "dsl/dsl.hpp"
using namespace attn::dsl;

constexpr auto T = dim<"T">;
constexpr auto A = dim<"A", 16>;
constexpr auto B = dim<"B", 32>;

int main() {
  constexpr auto x = input<"x">(T, A);
  constexpr auto b = weight<"b">(B);
  auto y = x + b;
  (void)shape_of(y);
}
