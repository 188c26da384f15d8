// The README's guide, built and tested: a new variant in a few lines (multi-head self-attention
// with a causal sliding window and ALiBi position biases, written from q_idx, kv_idx and head),
// compiled for this CPU, run, and drawn.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include "example_data.hpp"
#include "lesson_output.hpp"
#include "runtime/jit.hpp"

using namespace attn::dsl;

// [snippet: declare]
constexpr auto T = dim<"T">;             // tokens, bound at run time
constexpr auto D = dim<"D", 32>;         // model width
constexpr auto H = head_dim<"H", 4>;     // 4 heads of D/H = 8
constexpr auto x = input<"x">(T, D);
constexpr auto wq = weight<"wq">(D, D);
constexpr auto wk = weight<"wk">(D, D);
constexpr auto wv = weight<"wv">(D, D);
// [end snippet]

// [snippet: variant]
constexpr auto q = split_heads(project(x, wq), H);
constexpr auto k = split_heads(project(x, wk), H);
constexpr auto v = split_heads(project(x, wv), H);
constexpr int window = 4;
constexpr auto local = mask(scaled_scores(q, k), kv_idx <= q_idx && q_idx - kv_idx < window);
constexpr auto slope = exp((head + 1) * (-8 * 0.6931472f / 4));        // ALiBi: m_h = 2^(-8(h+1)/H), H = 4
// (that formula is ALiBi's for a power-of-two H only; alibi(s, H) has the paper's slopes for any H)
constexpr auto biased = modify(local, score - slope * (q_idx - kv_idx));
constexpr auto y = concat_heads(combine(softmax(biased), v));
static_assert(shape_of(y) == shape(T, D));                              // checked while compiling
// [end snippet]

// The library's own spelling of the same variant: one line.
constexpr auto y_library = concat_heads(combine(softmax(alibi(sliding_window(scaled_scores(q, k), window), H)), v));

int main(int argc, char** argv) {
  examples::lesson_output out("guide_sliding_window_alibi", argc, argv);
  // [snippet: run]
  std::printf("y = %s\n%s\n", to_string(y).c_str(), big_o(cost(y)).c_str());
  auto kernel = attn::jit(y, {.with_weights = true});    // compiled once for this CPU, then cached
  const auto X = examples::random_tensor({12, 32}, 1);   // 12 tokens
  const auto WQ = examples::random_tensor({32, 32}, 2, 0.3f), WK = examples::random_tensor({32, 32}, 3, 0.3f),
             WV = examples::random_tensor({32, 32}, 4, 0.3f);
  const attn::outputs r = kernel.run(X, WQ, WK, WV);    // r.output: (12, 32); r.weights: (4, 12, 12)
  // [end snippet]
  const attn::tensor<float> same = attn::jit(y_library)(X, WQ, WK, WV);
  float largest_difference = 0;
  for (std::size_t i = 0; i < same.values().size(); ++i)
    largest_difference = std::max(largest_difference, std::abs(same.values()[i] - r.output.values()[i]));
  std::printf("written by hand vs alibi(sliding_window(...)): largest difference %g\n", largest_difference);

  std::vector<std::string> tokens;
  for (int t = 0; t < 12; ++t) tokens.push_back("t" + std::to_string(t));
  for (int h : {0, 3}) {
    attn::tensor<float> w({12, 12});
    for (int i = 0; i < 12; ++i)
      for (int j = 0; j < 12; ++j) w(i, j) = r.weights(h, i, j);
    out.heatmap("sliding_window_alibi_head" + std::to_string(h) + ".png", w,
                {.title = "window 4 + ALiBi, head " + std::to_string(h), .row_labels = tokens, .col_labels = tokens,
                 .lo = 0.0, .hi = 1.0});
  }
  out.record = {{"inputs", {{"x", examples::to_json(X)}, {"wq", examples::to_json(WQ)}, {"wk", examples::to_json(WK)},
                            {"wv", examples::to_json(WV)}}},
                {"output", examples::to_json(r.output)}, {"weights", examples::to_json(r.weights)},
                {"library_spelling_difference", largest_difference}};
  out.save();
  return 0;
}
