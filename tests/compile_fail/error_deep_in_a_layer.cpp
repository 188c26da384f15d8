// A shape error deep inside a whole layer (projections, causal softmax, a wrong product): the
// report names the dims in lines of ordinary length, never the layer's type (thousands of characters).
// expect: matmul: inner dims differ: Dk (64) vs D (512)
#include "dsl/dsl.hpp"
using namespace attn::dsl;

constexpr auto T = dim<"T">;
constexpr auto D = dim<"D", 512>;
constexpr auto Dk = dim<"Dk", 64>;

int main() {
  constexpr auto x = input<"x">(T, D);
  auto q = project(x, weight<"wq">(D, Dk));
  auto k = project(x, weight<"wk">(D, Dk));
  auto v = project(x, weight<"wv">(D, Dk));
  auto y = combine(softmax(causal(scaled_scores(q, k))), matmul(v, weight<"w">(D, Dk)));
  (void)shape_of(y);
}
