// One causal attention, run by the fused kernel (the default for attention) and by the generic
// lowering; the kernel says which path and schedule it runs, and both give the same result.
#include <cmath>
#include <cstdio>
#include "example_data.hpp"
#include "runtime/jit.hpp"

using namespace attn::dsl;

constexpr auto T = dim<"T">;
constexpr auto H = head_dim<"H", 4>;
constexpr auto Dh = dim<"Dh", 16>;
constexpr auto q = input<"q">(H, T, Dh);
constexpr auto k = input<"k">(H, T, Dh);
constexpr auto v = input<"v">(H, T, Dh);
constexpr auto y = combine(softmax(causal(scaled_scores(q, k))), v);

int main() {
  const auto Q = examples::random_tensor({4, 300, 16}, 1), K = examples::random_tensor({4, 300, 16}, 2),
             V = examples::random_tensor({4, 300, 16}, 3);
  // [snippet: paths]
  auto k = attn::jit(y);                                         // fused if y is attention
  std::puts(k.compiled().describe().c_str());
  // path=fused attention=softmax(mask(score))·V schedule=[q_tile=24 kv_tile=256 partial_tile=64 q_unroll=6 kv_vectors=4 vector=16 stage_kv=0 pv_keys=0 row_block=6 pv_rows=0 pack_state=1] source=default
  auto g = attn::jit(y, {.path = attn::lowering::generic});     // materialises scores and weights
  auto t = attn::jit(y, {.schedule = "q_tile=32 kv_tile=128 q_unroll=4"});  // these; the rest as default
  // [end snippet]
  std::puts(g.compiled().describe().c_str());
  std::puts(t.compiled().describe().c_str());
  const auto a = k(Q, K, V), b = g(Q, K, V), c = t(Q, K, V);
  double diff = 0;
  for (std::size_t i = 0; i < a.values().size(); ++i)
    diff = std::max({diff, double(std::fabs(a.values()[i] - b.values()[i])), double(std::fabs(a.values()[i] - c.values()[i]))});
  std::printf("largest difference between the three: %.2e\n", diff);
  return diff < 1e-5 ? 0 : 1;
}
