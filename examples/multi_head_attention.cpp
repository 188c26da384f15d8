// Multi-head self-attention as in the seeds: d = 512 split into h = 8 heads of 64, concatenated
// and projected by W_O; with the per-step cost table for n = 5 from the cost model.
#include <cstdio>
#include "example_data.hpp"
#include "runtime/jit.hpp"

using namespace attn::dsl;

constexpr auto T = dim<"T">;
constexpr auto D = dim<"D", 512>;
constexpr auto H = head_dim<"H", 8>;

constexpr auto x = input<"x">(T, D);
constexpr auto wq = weight<"wq">(D, D);
constexpr auto wk = weight<"wk">(D, D);
constexpr auto wv = weight<"wv">(D, D);
constexpr auto wo = weight<"wo">(D, D);
constexpr auto mha = variants::multi_head_self_attention(x, wq, wk, wv, wo, H);
static_assert(shape_of(mha) == shape(T, D));

int main() {
  std::printf("y = %s\n\n", to_string(mha).c_str());
  const auto c = cost(mha);
  std::printf("%-10s %14s %14s\n", "step", "per head", "all heads");
  for (const auto& s : c.at(T = 5).steps) std::printf("%-10.*s %14.0f %14.0f\n", int(s.label.size()), s.label.data(), s.per_head_work, s.work);
  std::printf("total work %s = %s\n\n", to_string(c.work()).c_str(), big_o(c).c_str());
  for (int n : {5, 50, 500, 5000}) {
    const auto v = c.at(T = n);
    double quadratic = 0;  // Q·Kᵀ and A·V: the n²·d terms
    for (const auto& st : v.steps)
      if (st.label == "matmul" || st.label == "combine") quadratic += st.work;
    std::printf("n = %5d: %.3g multiply-adds, %4.1f%% of them in Q·Kᵀ and A·V (n²·d)\n", n, v.work, 100 * quadratic / v.work);
  }
  const auto X = examples::random_tensor({5, 512}, 1);
  const float s = 0.044f;  // ≈ 1/√512 keeps activations O(1)
  const auto y = attn::jit(mha)(X, examples::random_tensor({512, 512}, 2, s), examples::random_tensor({512, 512}, 3, s),
                                examples::random_tensor({512, 512}, 4, s), examples::random_tensor({512, 512}, 5, s));
  std::printf("\noutput (5 x 512), first 6 columns:\n");
  for (int i = 0; i < 5; ++i) {
    for (int j = 0; j < 6; ++j) std::printf("%9.4f", y(i, j));
    std::printf("\n");
  }
  return 0;
}
