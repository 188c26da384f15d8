// combine(A, V) sums over the keys: A is (Nq, Nk) but V has Nv rows.
// expect: combine: key dims differ: Nk (run time) vs Nv (run time)
#include "dsl/dsl.hpp"
using namespace attn::dsl;

constexpr auto Nq = dim<"Nq">;
constexpr auto Nk = dim<"Nk">;
constexpr auto Nv = dim<"Nv">;
constexpr auto Dv = dim<"Dv", 64>;

int main() {
  constexpr auto a = input<"a">(Nq, Nk);
  constexpr auto v = input<"v">(Nv, Dv);
  auto y = combine(a, v);
  (void)shape_of(y);
}
