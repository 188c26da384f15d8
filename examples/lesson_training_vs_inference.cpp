// Lesson: training vs autoregressive inference (seed 001, "Deep Dive: Training vs. Inference").
// One causal self-attention layer, run two ways on the same 6 tokens:
//   training:  all queries at once, a causal mask keeps each from looking ahead;
//   inference: one new query per step, attending to a key/value cache that grows by one row.
// Step t of inference reproduces row t of the training output; the cost model says what each
// way costs (all at once, summed over steps, and summed over steps without a cache).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include "example_data.hpp"
#include "lesson_output.hpp"
#include "runtime/jit.hpp"

using namespace attn::dsl;

constexpr auto T = dim<"T">;
constexpr auto S = dim<"S">;  // keys in the cache
constexpr auto D = dim<"D", 8>;
constexpr auto x = input<"x">(T, D);
constexpr auto wq = weight<"wq">(D, D);
constexpr auto wk = weight<"wk">(D, D);
constexpr auto wv = weight<"wv">(D, D);

// Training: softmax(causal(XW_Q·(XW_K)ᵀ/√D))·XW_V over all tokens at once.
constexpr auto training = combine(softmax(causal(scaled_scores(project(x, wq), project(x, wk)))), project(x, wv));

// Inference step: the newest token's query against the cached keys and values (no mask: the cache
// holds only the past and the token itself).
constexpr auto token = input<"token">(dim<"one", 1>, D);
constexpr auto k_cache = input<"k_cache">(S, D);
constexpr auto v_cache = input<"v_cache">(S, D);
constexpr auto step = combine(softmax(scaled_scores(project(token, wq), k_cache)), v_cache);
// What the step adds to the cache: the token's key and value rows.
constexpr auto new_key = project(token, wk);
constexpr auto new_value = project(token, wv);

double work_of_step(std::int64_t keys) {
  return cost(step).at(S = keys).work + cost(new_key).at().work + cost(new_value).at().work;
}

int main(int argc, char** argv) {
  examples::lesson_output out("training_vs_inference", argc, argv);
  const std::int64_t n = 6;
  const attn::tensor<float> X = examples::random_tensor({n, 8}, 1), WQ = examples::random_tensor({8, 8}, 2, 0.5f),
                            WK = examples::random_tensor({8, 8}, 3, 0.5f), WV = examples::random_tensor({8, 8}, 4);
  std::printf("training  = %s\ninference = %s\n\n", to_string(training).c_str(), to_string(step).c_str());

  // Training: one call, every row at once; the weights show the causal triangle.
  const attn::outputs all = attn::jit(training, {.with_weights = true}).run({{"x", X}, {"wq", WQ}, {"wk", WK}, {"wv", WV}});
  examples::print_matrix("training output (one row per token)", all.output);

  // Inference: one call per token; the cache grows by the token's key and value rows.
  const auto step_kernel = attn::jit(step);
  const auto key_kernel = attn::jit(new_key);
  const auto value_kernel = attn::jit(new_value);
  attn::tensor<float> keys({0, 8}), values({0, 8});
  nlohmann::json steps = nlohmann::json::array();
  double worst = 0;
  for (std::int64_t t = 0; t < n; ++t) {
    attn::tensor<float> x_t({1, 8});
    std::copy_n(X.data() + t * 8, 8, x_t.data());
    const attn::tensor<float> k_t = key_kernel.run({{"token", x_t}, {"wk", WK}}).output;
    const attn::tensor<float> v_t = value_kernel.run({{"token", x_t}, {"wv", WV}}).output;
    attn::tensor<float> grown_k({t + 1, 8}), grown_v({t + 1, 8});
    std::copy_n(keys.data(), t * 8, grown_k.data()), std::copy_n(k_t.data(), 8, grown_k.data() + t * 8);
    std::copy_n(values.data(), t * 8, grown_v.data()), std::copy_n(v_t.data(), 8, grown_v.data() + t * 8);
    keys = grown_k, values = grown_v;
    const attn::tensor<float> y_t = step_kernel.run({{"token", x_t}, {"wq", WQ}, {"k_cache", keys}, {"v_cache", values}}).output;
    double diff = 0;
    for (int j = 0; j < 8; ++j) diff = std::max(diff, std::abs(double(y_t.data()[j]) - all.output.data()[t * 8 + j]));
    worst = std::max(worst, diff);
    std::printf("step %lld: cache holds %lld key and value rows (newest key %+.3f %+.3f ...); output vs training row %lld: "
                "max difference %.2g\n",
                static_cast<long long>(t), static_cast<long long>(t + 1), k_t.data()[0], k_t.data()[1],
                static_cast<long long>(t), diff);
    steps.push_back({{"step", t}, {"cache_rows", t + 1}, {"output", examples::to_json(y_t)}, {"newest_key", examples::to_json(k_t)},
                     {"max_difference", diff}, {"work", work_of_step(t + 1)}});
  }

  // Cost (multiply-adds, from the cost model of the expressions above).
  const double at_once = cost(training).at(T = n).work;
  double with_cache = 0, without_cache = 0;
  pictures::series cached{"inference step, with the cache", {}, {}}, recomputed{"inference step, recomputing K, V", {}, {}, true};
  for (std::int64_t t = 1; t <= n; ++t) {
    with_cache += work_of_step(t);
    without_cache += cost(training).at(T = t).work;  // no cache: the whole prefix again, every step
    cached.x.push_back(double(t)), cached.y.push_back(work_of_step(t));
    recomputed.x.push_back(double(t)), recomputed.y.push_back(cost(training).at(T = t).work);
  }
  std::printf("\nwork: training, all %lld tokens at once: %.0f\n", static_cast<long long>(n), at_once);
  std::printf("      inference, summed over %lld steps with a cache: %.0f (the same products, one query at a time)\n",
              static_cast<long long>(n), with_cache);
  std::printf("      inference without a cache (K, V and all queries recomputed each step): %.0f\n", without_cache);
  std::printf("every inference step matches its training row: max difference %.2g\n", worst);

  std::vector<std::string> labels;
  for (std::int64_t t = 0; t < n; ++t) labels.push_back("token " + std::to_string(t));
  out.heatmap("training_weights.png", all.weights,
              {.title = "Training: causal attention weights, all queries at once", .row_labels = labels, .col_labels = labels,
               .lo = 0.0, .hi = 1.0});
  out.line_plot("inference_cost.png",
                {.title = "Work per inference step (d = 8)", .x_label = "step (keys in the cache)", .y_label = "multiply-adds"},
                {cached, recomputed});
  out.record = {{"tokens", n},
                {"x", examples::to_json(X)},
                {"wq", examples::to_json(WQ)},
                {"wk", examples::to_json(WK)},
                {"wv", examples::to_json(WV)},
                {"training_output", examples::to_json(all.output)},
                {"steps", steps},
                {"work_at_once", at_once},
                {"work_with_cache", with_cache},
                {"work_without_cache", without_cache},
                {"max_difference", worst}};
  out.save();
  return 0;
}
