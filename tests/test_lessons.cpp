// The seeds' lessons (examples/lesson_*.cpp) and the README's guide: each program is run into a
// fresh directory; its recorded numbers are checked against independent double references and
// the claims the lesson makes; its pictures must be real PNG files.
#define BOOST_TEST_MODULE lessons
#include <boost/test/unit_test.hpp>
#include <algorithm>
#include <cmath>
#include "support/lesson_runner.hpp"

using attn::ref::mat;
using lessons::matrix;
using lessons::max_difference;
namespace ref = attn::ref;

namespace {

constexpr double tolerance = 1e-4;  // float kernels on inputs of size ~1, against double

void require_picture(const lessons::run_result& r, const std::string& file) {
  const auto [w, h] = lessons::png_size(r.dir / file);
  BOOST_TEST_CONTEXT(file) {
    BOOST_TEST(w > 100u);
    BOOST_TEST(h > 100u);
    BOOST_TEST(r.printed.find("wrote " + (r.dir / file).string()) != std::string::npos);  // says where it wrote
  }
}

mat<double> identity(std::int64_t n) {
  mat<double> m(n, n);
  for (std::int64_t i = 0; i < n; ++i) m(i, i) = 1;
  return m;
}

double row_sum(const mat<double>& m, std::int64_t i) {
  double s = 0;
  for (std::int64_t j = 0; j < m.cols; ++j) s += m(i, j);
  return s;
}

}  // namespace

BOOST_AUTO_TEST_CASE(soft_dictionary_lookup) {
  const auto r = lessons::run("lesson_soft_lookup", "soft_lookup");
  const auto& j = r.record;
  const mat<double> q = matrix(j["query"]), K = matrix(j["key_vectors"]), V = matrix(j["value_vectors"]);
  const mat<double> w = matrix(j["weights"]), blended = matrix(j["blended"]);
  const mat<double> want = ref::softmax_rows(ref::matmul(q, ref::transpose(K)));
  BOOST_TEST(max_difference(w, want) < tolerance);
  BOOST_TEST(max_difference(blended, ref::matmul(want, V)) < tolerance);
  BOOST_TEST(j["keys"] == nlohmann::json({"apple", "banana", "cherry"}));
  // "red fruit" gets high weights for apple and cherry.
  BOOST_TEST(std::abs(w(0, 0) - w(0, 2)) < 1e-6);
  BOOST_TEST(w(0, 0) > 2 * w(0, 1));
  BOOST_TEST(std::abs(row_sum(w, 0) - 1) < 1e-6);
  require_picture(r, "soft_lookup_weights.png");
}

BOOST_AUTO_TEST_CASE(contextual_embeddings_money_bank_grows) {
  const auto r = lessons::run("lesson_contextual_embeddings", "contextual_embeddings");
  const auto& j = r.record;
  BOOST_TEST(j["words"] == nlohmann::json({"money", "bank", "grows"}));
  const mat<double> E = matrix(j["embeddings"]);
  mat<double> S = ref::matmul(E, ref::transpose(E)), scaled = S;
  for (double& s : scaled.a) s /= std::sqrt(static_cast<double>(E.cols));
  const mat<double> w = ref::softmax_rows(scaled), Y = ref::matmul(w, E);
  const std::vector<std::pair<std::string, const mat<double>*>> want = {
      {"S", &S}, {"S_scaled", &scaled}, {"weights", &w}, {"Y", &Y}};
  BOOST_REQUIRE_EQUAL(j["steps"].size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const auto& step = j["steps"][i];
    BOOST_TEST_CONTEXT(want[i].first) {
      BOOST_TEST(step["name"] == want[i].first);
      BOOST_TEST(max_difference(matrix(step["matrix"]), *want[i].second) < tolerance);
      BOOST_TEST(step["shape"] == (want[i].first == "Y" ? "(T, D)" : "(T, T)"));
    }
  }
  for (std::int64_t i = 0; i < 3; ++i) BOOST_TEST(std::abs(row_sum(matrix(j["steps"][2]["matrix"]), i) - 1) < 1e-6);
  require_picture(r, "money_bank_grows_weights.png");
}

BOOST_AUTO_TEST_CASE(apple_leans_toward_its_context) {
  const auto r = lessons::run("lesson_apple_in_context", "apple_in_context");
  const auto& sentences = r.record["sentences"];
  BOOST_REQUIRE_EQUAL(sentences.size(), 2u);
  for (const auto& s : sentences) {
    const mat<double> X = matrix(s["embeddings"]);
    const ref::result<double> want = ref::simplified(X, X);
    BOOST_TEST(max_difference(matrix(s["weights"]), want.weights) < tolerance);
    BOOST_TEST(max_difference(matrix(s["output"]), want.output) < tolerance);
  }
  // Same static vector, food and technology equal; the outputs lean apart.
  BOOST_TEST(sentences[0]["apple_food"].get<double>() > 2 * sentences[0]["apple_technology"].get<double>());
  BOOST_TEST(sentences[1]["apple_technology"].get<double>() > 2 * sentences[1]["apple_food"].get<double>());
  require_picture(r, "apple_in_context_1.png");
  require_picture(r, "apple_in_context_2.png");
}

BOOST_AUTO_TEST_CASE(the_cat_sat_on_the_mat) {
  const auto r = lessons::run("lesson_cat_sat_heatmap", "cat_sat_heatmap");
  const auto& j = r.record;
  const mat<double> X = matrix(j["x"]), WQ = matrix(j["wq"]), w = matrix(j["weights"]);
  const ref::result<double> want = ref::self_attention(X, WQ, identity(6), identity(6));
  BOOST_TEST(max_difference(w, want.weights) < tolerance);
  BOOST_TEST(max_difference(matrix(j["output"]), want.output) < tolerance);
  // "sat" (row 2) attends most to "cat" (1) and "mat" (5); "on" (3) most to "mat".
  for (std::int64_t other : {0, 2, 3, 4}) {
    BOOST_TEST(w(2, 1) > w(2, other));
    BOOST_TEST(w(2, 5) > w(2, other));
  }
  for (std::int64_t other : {0, 1, 2, 3, 4}) BOOST_TEST(w(3, 5) > w(3, other));
  require_picture(r, "cat_sat_on_the_mat.png");
  // "it" attends most to "cat", then "mat" (seed 003 §6: 0.35 and 0.30 in its illustration).
  const mat<double> it = matrix(j["it_weights"]), keys = matrix(j["it_keys"]);
  BOOST_TEST(max_difference(it, ref::scaled_dot_product(matrix(j["it_query"]), keys, keys, ref::inv_sqrt(6)).weights) < tolerance);
  for (std::int64_t other : {0, 2, 3, 4, 6}) BOOST_TEST(it(0, 5) > it(0, other));
  BOOST_TEST(it(0, 1) > it(0, 5));
  require_picture(r, "it_refers_to.png");
}

BOOST_AUTO_TEST_CASE(shapes_T4_d8) {
  const auto r = lessons::run("lesson_shapes", "shapes");
  const auto& s = r.record["shapes"];
  const std::vector<std::tuple<std::string, std::string, std::vector<std::int64_t>>> want = {
      {"Q", "(T=4, d_k=8)", {4, 8}}, {"K", "(T=4, d_k=8)", {4, 8}}, {"V", "(T=4, d_v=8)", {4, 8}},
      {"S", "(T=4, T=4)", {4, 4}},   {"alpha", "(T=4, T=4)", {4, 4}}, {"Z", "(T=4, d_v=8)", {4, 8}}};
  for (const auto& [name, dsl, computed] : want) {
    BOOST_TEST_CONTEXT(name) {
      BOOST_TEST(s[name]["dsl"] == dsl);
      BOOST_TEST(s[name]["computed"].get<std::vector<std::int64_t>>() == computed, boost::test_tools::per_element());
    }
  }
}

BOOST_AUTO_TEST_CASE(training_vs_autoregressive_inference) {
  // Seed 001 §5: step t of inference (one query, a growing key/value cache) reproduces row t of
  // the causal training output; the cache holds t + 1 rows after step t.
  const auto r = lessons::run("lesson_training_vs_inference", "training_vs_inference");
  const auto& j = r.record;
  const mat<double> X = matrix(j["x"]), WQ = matrix(j["wq"]), WK = matrix(j["wk"]), WV = matrix(j["wv"]);
  const ref::mask_pred causal = [](ref::index i, ref::index k, ref::index) { return k <= i; };
  const mat<double> want = ref::scaled_dot_product(ref::matmul(X, WQ), ref::matmul(X, WK), ref::matmul(X, WV),
                                                   ref::inv_sqrt(8), causal, {}, 0)
                               .output;
  BOOST_TEST(max_difference(matrix(j["training_output"]), want) < 1e-5);
  const std::int64_t n = j["tokens"].get<std::int64_t>();
  BOOST_REQUIRE_EQUAL(j["steps"].size(), static_cast<std::size_t>(n));
  double with_cache = 0;
  for (std::int64_t t = 0; t < n; ++t) {
    const auto& step = j["steps"][static_cast<std::size_t>(t)];
    BOOST_TEST_CONTEXT("step " << t) {
      BOOST_TEST(step["cache_rows"].get<std::int64_t>() == t + 1);
      const mat<double> y = matrix(step["output"]);
      double d = 0;
      for (ref::index c = 0; c < 8; ++c) d = std::max(d, std::abs(y.a[static_cast<std::size_t>(c)] - want.a[static_cast<std::size_t>(t * 8 + c)]));
      BOOST_TEST(d < 1e-5);
      // The newest key is the token's projection x_t·W_K.
      const mat<double> k = matrix(step["newest_key"]), k_want = ref::matmul(X, WK);
      for (ref::index c = 0; c < 8; ++c)
        BOOST_TEST(std::abs(k.a[static_cast<std::size_t>(c)] - k_want.a[static_cast<std::size_t>(t * 8 + c)]) < 1e-5);
      // One step's work with S = t + 1 cached keys: three projections of one token (3·d²), scores and
      // α·V (2·S·d), scale and softmax (2·S).
      const double s = static_cast<double>(t + 1), d_model = 8;
      BOOST_TEST(step["work"].get<double>() == 3 * d_model * d_model + 2 * s * d_model + 2 * s);
      with_cache += step["work"].get<double>();
    }
  }
  BOOST_TEST(j["work_with_cache"].get<double>() == with_cache);
  // Without a cache every step redoes the whole prefix: several times the work.
  BOOST_TEST(j["work_without_cache"].get<double>() > 3 * with_cache);
  BOOST_TEST(j["work_at_once"].get<double>() > 0.0);
  require_picture(r, "training_weights.png");
  require_picture(r, "inference_cost.png");
}

namespace {

// The lesson_training_attention layer in double: logits = softmax(causal(q·kᵀ/√d + bias[i - j]))·v·W_O.
struct copy_model {
  mat<double> wq, wk, bias, wv, wo;
  explicit copy_model(const nlohmann::json& w)
      : wq(matrix(w["wq"])), wk(matrix(w["wk"])), bias(matrix(w["bias"])), wv(matrix(w["wv"])), wo(matrix(w["wo"])) {}
  std::vector<std::pair<std::string, mat<double>*>> named() {
    return {{"wq", &wq}, {"wk", &wk}, {"bias", &bias}, {"wv", &wv}, {"wo", &wo}};
  }
};

// One sequence of token ids (one-hot rows of width `vocabulary`) through the layer.
ref::result<double> copy_layer(const std::vector<int>& ids, std::int64_t vocabulary, const copy_model& m) {
  mat<double> x(static_cast<std::int64_t>(ids.size()), vocabulary);
  for (std::size_t i = 0; i < ids.size(); ++i) x(static_cast<std::int64_t>(i), ids[i]) = 1;
  const ref::mask_pred causal = [](ref::index i, ref::index j, ref::index) { return j <= i; };
  const ref::score_mod<double> by_distance = [&](double s, ref::index i, ref::index j, ref::index) {
    return j <= i ? s + m.bias.a[static_cast<std::size_t>(i - j)] : s;
  };
  ref::result<double> r = ref::scaled_dot_product(ref::matmul(x, m.wq), ref::matmul(x, m.wk), ref::matmul(x, m.wv),
                                                  ref::inv_sqrt(m.wk.cols), causal, by_distance);
  r.output = ref::matmul(r.output, m.wo);
  return r;
}

// The lesson's loss: cross-entropy against the token `distance` back, averaged over the positions
// that have one, over a batch of sequences laid end to end in `ids`.
double copy_loss(const std::vector<int>& ids, const nlohmann::json& task, const copy_model& m) {
  const auto tokens = task["tokens"].get<std::size_t>(), distance = task["distance"].get<std::size_t>();
  const auto vocabulary = task["vocabulary"].get<std::int64_t>();
  double loss = 0, count = 0;
  for (std::size_t b = 0; b < ids.size() / tokens; ++b) {
    const auto begin = ids.begin() + static_cast<std::ptrdiff_t>(b * tokens);
    const std::vector<int> seq(begin, begin + static_cast<std::ptrdiff_t>(tokens));
    const mat<double> y = copy_layer(seq, vocabulary, m).output;
    for (std::size_t i = distance; i < tokens; ++i, ++count) {
      const auto row = static_cast<std::int64_t>(i);
      double top = y(row, 0), sum = 0;
      for (std::int64_t c = 0; c < vocabulary; ++c) top = std::max(top, y(row, c));
      for (std::int64_t c = 0; c < vocabulary; ++c) sum += std::exp(y(row, c) - top);
      loss -= y(row, seq[i - distance]) - top - std::log(sum);
    }
  }
  return loss / count;
}

}  // namespace

BOOST_AUTO_TEST_CASE(training_an_attention_layer) {
  // Seed 001 §5: training processes all queries at once. Trained with attnforge's gradients, the
  // layer learns to copy the token 3 back: its bias table peaks at distance 3.
  const auto r = lessons::run("lesson_training_attention", "training_attention");
  const auto& j = r.record;
  const auto& task = j["task"];
  const int distance = task["distance"].get<int>(), tokens = task["tokens"].get<int>();

  // The first step's loss and gradients are the double reference's, by central differences.
  const auto& first = j["first_step"];
  const auto first_ids = first["ids"].get<std::vector<int>>();
  copy_model m(first["weights"]);
  BOOST_TEST(std::abs(copy_loss(first_ids, task, m) - first["loss"].get<double>()) < 1e-5);
  for (auto& [name, weight] : m.named()) {
    mat<double>& p = *weight;
    const mat<double> got = matrix(first["gradients"][name]);
    BOOST_REQUIRE_EQUAL(got.a.size(), p.a.size());
    double worst = 0, largest = 0;
    for (std::size_t k = 0; k < p.a.size(); ++k) {
      largest = std::max(largest, std::abs(got.a[k]));
      const double h = 1e-5, keep = p.a[k];
      p.a[k] = keep + h;
      const double up = copy_loss(first_ids, task, m);
      p.a[k] = keep - h;
      const double down = copy_loss(first_ids, task, m);
      p.a[k] = keep;
      worst = std::max(worst, std::abs(got.a[k] - (up - down) / (2 * h)));
    }
    BOOST_TEST_CONTEXT("d loss / d " << name) {
      BOOST_TEST(largest > 1e-3);  // a gradient to check, not noise
      BOOST_TEST(worst < 1e-4 * largest);
    }
  }

  // The loss falls below 0.05 within 100 steps; the step recorded is the first.
  const auto losses = j["losses"].get<std::vector<double>>();
  const double threshold = j["threshold"].get<double>();
  const int first_below = j["first_below"].get<int>();
  BOOST_TEST(threshold == 0.05);
  BOOST_TEST(j["within"].get<int>() == 100);
  BOOST_REQUIRE_EQUAL(losses.size(), j["steps"].get<std::size_t>());
  BOOST_TEST(losses.front() > 1.5);  // near chance, ln 8 ≈ 2.08
  BOOST_REQUIRE(first_below >= 1);
  BOOST_TEST(first_below <= 100);
  BOOST_TEST(losses[static_cast<std::size_t>(first_below - 1)] < threshold);
  for (int s = 0; s + 1 < first_below; ++s) BOOST_TEST(losses[static_cast<std::size_t>(s)] >= threshold);

  // The learned bias peaks at the copy distance, well above every other distance.
  const copy_model learned(j["learned"]);
  BOOST_TEST(j["bias_peak"].get<int>() == distance);
  for (int d = 0; d < tokens; ++d)
    if (d != distance) BOOST_TEST(learned.bias.a[static_cast<std::size_t>(distance)] > learned.bias.a[static_cast<std::size_t>(d)] + 2);

  // On fresh sequences the loss, the first sequence's logits and attention weights are the
  // reference's for the learned weights; every prediction is right, and each query past the first
  // 3 puts most of its weight 3 back.
  const auto& test = j["test"];
  const auto test_ids = test["ids"].get<std::vector<int>>();
  const std::vector<int> seq0(test_ids.begin(), test_ids.begin() + tokens);
  const ref::result<double> want = copy_layer(seq0, task["vocabulary"].get<std::int64_t>(), learned);
  const mat<double> logits = matrix(test["logits"]), w = matrix(test["weights"]);
  double worst = 0;
  for (std::int64_t i = 0; i < want.output.rows; ++i)
    for (std::int64_t c = 0; c < want.output.cols; ++c)
      worst = std::max(worst, std::abs(logits(i, c) - want.output(i, c)) / std::max(1.0, std::abs(want.output(i, c))));
  BOOST_TEST(worst < 1e-4);
  BOOST_TEST(max_difference(w, want.weights) < tolerance);
  BOOST_TEST(std::abs(copy_loss(test_ids, task, learned) - test["loss"].get<double>()) < 1e-4);
  BOOST_TEST(test["loss"].get<double>() < threshold);
  BOOST_TEST(test["accuracy"].get<double>() == 1.0);
  for (std::int64_t i = distance; i < tokens; ++i) BOOST_TEST(w(i, i - distance) > 0.5);
  require_picture(r, "training_loss.png");
  require_picture(r, "learned_bias.png");
  require_picture(r, "trained_weights.png");
}

BOOST_AUTO_TEST_CASE(cost_of_the_seeds_worked_example) {
  const auto r = lessons::run("lesson_cost", "cost");
  const auto& j = r.record;
  const double n = 5, d = 512, h = 8, dk = 64;
  // Seed 002: projections n·d² each, Q·Kᵀ and α·V n²·d_k per head (n²·d in all), softmax n² per head.
  const std::vector<std::tuple<std::string, double, double>> want = {
      {"project", n * d * d, n * d * d}, {"project", n * d * d, n * d * d}, {"matmul", n * n * dk, n * n * d},
      {"scale", n * n, n * n * h},       {"softmax", n * n, n * n * h},     {"project", n * d * d, n * d * d},
      {"combine", n * n * dk, n * n * d}, {"project", n * d * d, n * d * d}};
  BOOST_REQUIRE_EQUAL(j["steps"].size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const auto& [label, per_head, total] = want[i];
    BOOST_TEST_CONTEXT("step " << i) {
      BOOST_TEST(j["steps"][i]["step"] == label);
      BOOST_TEST(j["steps"][i]["per_head_work"].get<double>() == per_head);
      BOOST_TEST(j["steps"][i]["work"].get<double>() == total);
    }
  }
  BOOST_TEST(j["steps"][0]["work"].get<double>() == 1'310'720.0);  // the seed's "1.3 × 10⁶ per projection"
  BOOST_TEST(j["steps"][2]["work"].get<double>() == 12'800.0);
  BOOST_TEST(j["total_work"].get<double>() == 4 * n * d * d + 2 * n * n * d + 2 * n * n * h);
  BOOST_TEST(j["big_o"] == "O(T²·D + T·D²)");
  // Growth: the n·d² part is linear in n, the n² part quadratic and dominant past n ≈ 2d.
  for (const auto& g : j["growth"]) {
    const double m = g["n"].get<double>();
    BOOST_TEST(g["linear"].get<double>() == 4 * m * d * d);
    BOOST_TEST(g["quadratic"].get<double>() == 2 * m * m * d + 2 * m * m * h);
    BOOST_TEST((g["quadratic"].get<double>() > g["linear"].get<double>()) == (m >= 1024));
  }
  require_picture(r, "cost_growth.png");
}

BOOST_AUTO_TEST_CASE(why_divide_by_sqrt_dk) {
  const auto r = lessons::run("lesson_why_scale", "why_scale");
  const auto& worked = r.record["worked"];
  BOOST_TEST(worked["dots_2d"].get<std::vector<double>>() == std::vector<double>({3, 4, 6}), boost::test_tools::per_element());
  BOOST_TEST(worked["dots_3d"].get<std::vector<double>>() == std::vector<double>({6, 13, 12}), boost::test_tools::per_element());
  const mat<double> s1 = matrix(worked["softmax_1_10"]), s2 = matrix(worked["softmax_100_0_0"]);
  BOOST_TEST(std::abs(s1(0, 0) - 1 / (1 + std::exp(9.0))) < 1e-6);   // the seed's 0.0001
  BOOST_TEST(std::abs(s1(0, 1) - 1 / (1 + std::exp(-9.0))) < 1e-6);  // the seed's 0.99987
  BOOST_TEST(s2(0, 0) == 1.0);
  BOOST_TEST(s2(0, 1) < 1e-40);

  const auto& m = r.record["measured"];
  BOOST_REQUIRE_EQUAL(m.size(), 10u);  // d_k = 2 … 1024
  double sx = 0, sy = 0, sxx = 0, sxy = 0, scaled_lo = 1e9, scaled_hi = 0;
  for (const auto& row : m) {
    const double dk = row["d_k"].get<double>(), unscaled = row["var_unscaled"].get<double>(), scaled = row["var_scaled"].get<double>();
    BOOST_TEST_CONTEXT("d_k = " << dk) {
      BOOST_TEST(unscaled / dk > 0.85);  // Var(q·k) = d_k
      BOOST_TEST(unscaled / dk < 1.15);
      BOOST_TEST(scaled > 0.85);         // Var(q·k/√d_k) = 1
      BOOST_TEST(scaled < 1.15);
    }
    const double x = std::log(dk), y = std::log(unscaled);
    sx += x, sy += y, sxx += x * x, sxy += x * y;
    scaled_lo = std::min(scaled_lo, row["gradient_norm_scaled"].get<double>());
    scaled_hi = std::max(scaled_hi, row["gradient_norm_scaled"].get<double>());
  }
  const double slope = (10 * sxy - sx * sy) / (10 * sxx - sx * sx);
  BOOST_TEST(std::abs(slope - 1) < 0.05);  // linear growth: slope 1 on log-log axes
  // Saturation without scaling: one weight takes nearly everything, the gradient collapses.
  const auto& last = m.back();
  BOOST_TEST(last["max_weight_unscaled"].get<double>() > 0.9);
  BOOST_TEST(last["max_weight_scaled"].get<double>() < 0.5);
  BOOST_TEST(last["gradient_norm_unscaled"].get<double>() < 0.3 * last["gradient_norm_scaled"].get<double>());
  BOOST_TEST(scaled_hi < 1.5 * scaled_lo);  // with scaling the softmax stays in the same regime
  require_picture(r, "why_scale_variance.png");
  require_picture(r, "why_scale_saturation.png");
}

BOOST_AUTO_TEST_CASE(additive_vs_dot_product) {
  const auto r = lessons::run("lesson_additive_vs_dot", "additive_vs_dot");
  const auto& in = r.record["inputs"];
  const mat<double> s = matrix(in["s"]), h = matrix(in["h"]);
  const std::vector<std::pair<std::string, ref::result<double>>> want = {
      {"luong_dot", ref::luong_dot(s, h)},
      {"luong_general", ref::luong_general(s, h, matrix(in["W"]))},
      {"scaled_dot", ref::simplified(s, h)},
      {"bahdanau", ref::bahdanau(s, h, matrix(in["W1"]), matrix(in["W2"]), matrix(in["b"]), matrix(in["v"]))}};
  for (const auto& [name, result] : want) {
    BOOST_TEST_CONTEXT(name) {
      BOOST_TEST(max_difference(matrix(r.record[name]["weights"]), result.weights) < tolerance);
      BOOST_TEST(max_difference(matrix(r.record[name]["context"]), result.output) < tolerance);
      require_picture(r, "weights_" + name + ".png");
    }
  }
  // Scaling flattens: the largest weight of each row is no larger than unscaled.
  const mat<double> dot = want[0].second.weights, scaled = want[2].second.weights;
  for (std::int64_t i = 0; i < dot.rows; ++i)
    BOOST_TEST(*std::max_element(&scaled(i, 0), &scaled(i, 0) + scaled.cols) <= *std::max_element(&dot(i, 0), &dot(i, 0) + dot.cols));
  BOOST_TEST(r.record["bahdanau"]["flops"].get<double>() > r.record["luong_general"]["flops"].get<double>());
}

BOOST_AUTO_TEST_CASE(inspect_a_kernel) {
  const auto r = lessons::run("inspect_kernel", "inspect_kernel");
  auto read = [&](const std::string& f) {
    std::ifstream in(r.dir / f);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  BOOST_TEST(r.record["expression"] == "softmax(mask(x·wq·(x·wk)ᵀ/√Dk | kv_idx ≤ q_idx))·(x·wv)");
  BOOST_TEST(r.record["parameters"] == nlohmann::json({"x", "wq", "wk", "wv"}));
  BOOST_TEST(read("causal_self_attention.dot").starts_with("digraph attn {"));
  const std::string stmt = read("causal_self_attention.stmt"), html = read("causal_self_attention.html");
  // The fused pipeline: per task, the online-softmax state folds in full and partial key tiles.
  BOOST_TEST(r.record["describe"].get<std::string>().starts_with("path=fused attention=softmax(mask(score))·V"));
  BOOST_TEST(stmt.find("produce flash_state") != std::string::npos);
  BOOST_TEST(stmt.find("full_tile") != std::string::npos);
  BOOST_TEST(stmt.find("partial_tile") != std::string::npos);
  BOOST_TEST(stmt.find("parallel") != std::string::npos);
  BOOST_TEST(html.find("<html") != std::string::npos);
  BOOST_TEST(r.printed.find("parallel (") != std::string::npos);  // the printed skeleton
  BOOST_TEST(r.printed.find("produce flash_state") != std::string::npos);
  require_picture(r, "causal_self_attention.png");
}

BOOST_AUTO_TEST_CASE(guide_sliding_window_with_alibi) {
  const auto r = lessons::run("guide_sliding_window_alibi", "guide_sliding_window_alibi");
  const auto& in = r.record["inputs"];
  const mat<double> x = matrix(in["x"]);
  const mat<double> q = ref::matmul(x, matrix(in["wq"])), k = ref::matmul(x, matrix(in["wk"])), v = ref::matmul(x, matrix(in["wv"]));
  const ref::mask_pred keep = [](ref::index i, ref::index j, ref::index) { return j <= i && i - j < 4; };
  const ref::score_mod<double> alibi = [](double s, ref::index i, ref::index j, ref::index head) {
    return s - ref::alibi_slope(head, 4) * static_cast<double>(i - j);
  };
  const ref::result<double> want = ref::multi_head(q, k, v, 4, keep, alibi);
  const mat<double> w = matrix(r.record["weights"]);
  BOOST_TEST(max_difference(matrix(r.record["output"]), want.output) < tolerance);
  BOOST_TEST(max_difference(w, want.weights) < tolerance);
  for (std::int64_t row = 0; row < w.rows; ++row)  // nothing outside the window of 4
    for (std::int64_t j = 0; j < w.cols; ++j)
      if (!keep(row % 12, j, 0)) BOOST_TEST(w(row, j) == 0.0);
  BOOST_TEST(r.record["library_spelling_difference"].get<double>() < 1e-6);
  require_picture(r, "sliding_window_alibi_head0.png");
  require_picture(r, "sliding_window_alibi_head3.png");
}
