// Lesson: the shapes of every matrix (seed 000, self-assessment): T = 4 tokens, d = 8,
// d_k = d_v = 8. The DSL knows each shape at compile time; the run confirms them.
#include <cstdio>
#include "example_data.hpp"
#include "lesson_output.hpp"
#include "runtime/jit.hpp"

using namespace attn::dsl;

constexpr auto T = dim<"T">;       // tokens, bound at run time
constexpr auto D = dim<"d", 8>;
constexpr auto Dk = dim<"d_k", 8>;
constexpr auto Dv = dim<"d_v", 8>;

constexpr auto x = input<"X">(T, D);
constexpr auto wq = weight<"W_Q">(D, Dk);
constexpr auto wk = weight<"W_K">(D, Dk);
constexpr auto wv = weight<"W_V">(D, Dv);

constexpr auto Q = project(x, wq);
constexpr auto K = project(x, wk);
constexpr auto V = project(x, wv);
constexpr auto S = matmul(Q, transpose(K));
constexpr auto alpha = softmax(scale(S, rsqrt(Dk)));
constexpr auto Z = combine(alpha, V);

// Checked by the compiler: a wrong shape here does not build.
static_assert(shape_of(Q) == shape(T, Dk) && shape_of(K) == shape(T, Dk) && shape_of(V) == shape(T, Dv));
static_assert(shape_of(S) == shape(T, T) && shape_of(alpha) == shape(T, T) && shape_of(Z) == shape(T, Dv));

int main(int argc, char** argv) {
  examples::lesson_output out("shapes", argc, argv);
  const auto X = examples::random_tensor({4, 8}, 1);
  const auto WQ = examples::random_tensor({8, 8}, 2, 0.3f), WK = examples::random_tensor({8, 8}, 3, 0.3f),
             WV = examples::random_tensor({8, 8}, 4, 0.3f);

  nlohmann::json shapes = nlohmann::json::object();
  auto show = [&](const char* name, const auto& e, const attn::tensor<float>& computed) {
    std::printf("%-6s %-14s computed %lld x %lld   %s = %s\n", name, shape_text(e, T = 4).c_str(),
                static_cast<long long>(computed.size(0)), static_cast<long long>(computed.size(1)), name, to_string(e).c_str());
    shapes[name] = {{"dsl", shape_text(e, T = 4)}, {"computed", computed.sizes()}};
  };
  show("Q", Q, attn::jit(Q)(X, WQ));
  show("K", K, attn::jit(K)(X, WK));
  show("V", V, attn::jit(V)(X, WV));
  show("S", S, attn::jit(S)(X, WQ, WK));
  show("alpha", alpha, attn::jit(alpha)(X, WQ, WK));
  show("Z", Z, attn::jit(Z)(X, WQ, WK, WV));
  out.record = {{"shapes", shapes}};
  out.save();
  return 0;
}
