// The simplified attention layer y = softmax(q·Xᵀ/√D)·X needs the query width D_Q to equal
// the input width D_X; here q is (DQ = 64) and X is (NX, DX = 32).
// expect: matmul: inner dims differ: DQ (64) vs DX (32)
#include "dsl/dsl.hpp"
using namespace attn::dsl;

constexpr auto NX = dim<"NX">;
constexpr auto DQ = dim<"DQ", 64>;
constexpr auto DX = dim<"DX", 32>;

int main() {
  constexpr auto q = input<"q">(DQ);
  constexpr auto x = input<"x">(NX, DX);
  auto y = variants::simplified(q, x);
  (void)shape_of(y);
}
