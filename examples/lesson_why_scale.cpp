// Lesson: why divide by √d_k (seeds 002, 003, 004). For q, k with N(0, 1) entries,
// Var(q·k) = d_k: it grows linearly with the width, softmax saturates (one weight near 1, the
// gradient vanishes). Dividing by √d_k keeps the variance at 1. Measured here with attnforge
// kernels for d_k = 2 … 1024, plus the seeds' small worked examples.
#include <cmath>
#include <cstdio>
#include "example_data.hpp"
#include "lesson_output.hpp"
#include "runtime/jit.hpp"

using namespace attn::dsl;

constexpr auto T = dim<"T">;    // queries
constexpr auto N = dim<"N">;    // keys
constexpr auto Dk = dim<"Dk">;  // key width, bound at run time: one kernel serves every d_k
constexpr auto q = input<"q">(T, Dk);
constexpr auto k = input<"k">(N, Dk);
constexpr auto raw = matmul(q, transpose(k));   // q·k
constexpr auto scaled = scale(raw, rsqrt(Dk));  // q·k / √d_k

constexpr auto C = dim<"C">;
constexpr auto logits = input<"logits">(T, C);

double variance(const attn::tensor<float>& scores) {
  double mean = 0, m2 = 0;
  for (float s : scores.values()) mean += s;
  mean /= static_cast<double>(scores.values().size());
  for (float s : scores.values()) m2 += (s - mean) * (s - mean);
  return m2 / static_cast<double>(scores.values().size() - 1);
}

struct saturation {
  double max_weight, gradient_norm;
};

// Per softmax row: the largest weight, and the Frobenius norm of the softmax Jacobian
// diag(p) - p·pᵀ, ‖J‖² = Σp² - 2Σp³ + (Σp²)²; both averaged over the rows.
saturation measure(const attn::tensor<float>& weights) {
  const std::int64_t rows = weights.size(0), cols = weights.size(1);
  double max_w = 0, grad = 0;
  for (std::int64_t i = 0; i < rows; ++i) {
    double mx = 0, p2 = 0, p3 = 0;
    for (std::int64_t j = 0; j < cols; ++j) {
      const double p = weights(i, j);
      mx = std::max(mx, p), p2 += p * p, p3 += p * p * p;
    }
    max_w += mx, grad += std::sqrt(std::max(0.0, p2 - 2 * p3 + p2 * p2));
  }
  return {max_w / static_cast<double>(rows), grad / static_cast<double>(rows)};
}

int main(int argc, char** argv) {
  examples::lesson_output out("why_scale", argc, argv);

  // The seeds' worked examples: wider vectors give larger dot products ...
  const auto raw_k = attn::jit(raw);  // all q·k; the worked pairs are its diagonal
  const auto d2 = raw_k(examples::matrix({{1, 2}, {2, 1}, {2, 2}}), examples::matrix({{1, 1}, {1, 2}, {1, 2}}));
  const auto d3 = raw_k(examples::matrix({{1, 2, 3}, {2, 1, 3}, {2, 2, 2}}), examples::matrix({{1, 1, 1}, {1, 2, 3}, {1, 2, 3}}));
  std::printf("dot products in 2-D: %g %g %g; in 3-D: %g %g %g\n", d2(0, 0), d2(1, 1), d2(2, 2), d3(0, 0), d3(1, 1), d3(2, 2));
  // ... and softmax of large, spread-out inputs is nearly one-hot.
  const auto sm = attn::jit(softmax(logits));
  const auto s1 = sm(examples::matrix({{1, 10}})), s2 = sm(examples::matrix({{100, 0, 0}}));
  std::printf("softmax([1, 10]) = [%.5f, %.5f];  softmax([100, 0, 0]) = [%.3g, %.3g, %.3g]\n\n", s1(0, 0), s1(0, 1), s2(0, 0),
              s2(0, 1), s2(0, 2));
  out.record["worked"] = {{"dots_2d", {d2(0, 0), d2(1, 1), d2(2, 2)}}, {"dots_3d", {d3(0, 0), d3(1, 1), d3(2, 2)}},
                          {"softmax_1_10", examples::to_json(s1)}, {"softmax_100_0_0", examples::to_json(s2)}};

  // Per d_k: 1024 queries with N(0, 1) entries against 256 keys for the variance (262,144
  // scores) and against 16 keys for the softmax.
  const auto scaled_k = attn::jit(scaled);
  const auto softmax_raw = attn::jit(softmax(raw));
  const auto softmax_scaled = attn::jit(softmax(scaled));
  pictures::series var_raw{"Var(q·k), unscaled", {}, {}}, var_scaled{"Var(q·k / √d_k)", {}, {}},
      theory{"d_k (theory)", {}, {}, true};
  pictures::series max_raw{"largest weight, unscaled", {}, {}}, max_scaled{"largest weight, scaled", {}, {}},
      grad_raw{"‖softmax Jacobian‖, unscaled", {}, {}, true}, grad_scaled{"‖softmax Jacobian‖, scaled", {}, {}, true};
  std::printf("%6s %12s %12s %12s %12s %12s %12s\n", "d_k", "Var unscaled", "Var scaled", "max w unsc.", "max w scaled",
              "‖J‖ unsc.", "‖J‖ scaled");
  out.record["measured"] = nlohmann::json::array();
  for (std::int64_t dk = 2; dk <= 1024; dk *= 2) {
    const auto Q = examples::random_tensor({1024, dk}, 1000 + static_cast<unsigned>(dk));
    const auto K = examples::random_tensor({256, dk}, 2000 + static_cast<unsigned>(dk));
    const auto K16 = examples::random_tensor({16, dk}, 3000 + static_cast<unsigned>(dk));
    const double var_a = variance(raw_k(Q, K)), var_b = variance(scaled_k(Q, K));
    const saturation a = measure(softmax_raw(Q, K16)), b = measure(softmax_scaled(Q, K16));
    std::printf("%6lld %12.2f %12.3f %12.3f %12.3f %12.4f %12.4f\n", static_cast<long long>(dk), var_a, var_b,
                a.max_weight, b.max_weight, a.gradient_norm, b.gradient_norm);
    const double d = static_cast<double>(dk);
    var_raw.x.push_back(d), var_raw.y.push_back(var_a), var_scaled.x.push_back(d), var_scaled.y.push_back(var_b);
    theory.x.push_back(d), theory.y.push_back(d);
    for (auto* s : {&max_raw, &max_scaled, &grad_raw, &grad_scaled}) s->x.push_back(d);
    max_raw.y.push_back(a.max_weight), max_scaled.y.push_back(b.max_weight);
    grad_raw.y.push_back(a.gradient_norm), grad_scaled.y.push_back(b.gradient_norm);
    out.record["measured"].push_back({{"d_k", dk}, {"var_unscaled", var_a}, {"var_scaled", var_b},
                                      {"max_weight_unscaled", a.max_weight}, {"max_weight_scaled", b.max_weight},
                                      {"gradient_norm_unscaled", a.gradient_norm}, {"gradient_norm_scaled", b.gradient_norm}});
  }
  std::printf("\n");
  out.line_plot("why_scale_variance.png",
                {.title = "Variance of q·k for N(0, 1) entries (1024 queries × 256 keys)", .x_label = "d_k",
                 .y_label = "variance", .log_x = true, .log_y = true},
                {var_raw, var_scaled, theory});
  out.line_plot("why_scale_saturation.png",
                {.title = "Softmax over 16 keys: saturation without scaling", .x_label = "d_k", .y_label = "mean over rows",
                 .log_x = true},
                {max_raw, max_scaled, grad_raw, grad_scaled});
  out.save();
  return 0;
}
