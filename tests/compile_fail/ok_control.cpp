// Control case: must COMPILE, so the compile-fail harness is not passing trivially
// (same flags and include paths as the failing cases).
#include "dsl/dsl.hpp"
using namespace attn::dsl;

constexpr auto T = dim<"T">;
constexpr auto D = dim<"D", 512>;
constexpr auto Dk = dim<"Dk", 64>;

int main() {
  constexpr auto x = input<"x">(T, D);
  constexpr auto wq = weight<"wq">(D, Dk);
  constexpr auto wk = weight<"wk">(D, Dk);
  constexpr auto wv = weight<"wv">(D, Dk);
  auto y = variants::causal_self_attention(x, wq, wk, wv);
  static_assert(shape_of(y) == shape(T, Dk));
  auto s = matmul(project(x, wq), transpose(project(x, wk)));
  auto m = mask(s, q_idx - kv_idx < 4);
  static_assert(shape_of(m) == shape(T, T));
  return to_ir(y).terminals.size() == 4 && to_ir(m).terminals.size() == 3 ? 0 : 1;
}
