// The reference gradients (support/reference_gradient.hpp: ad::var through the templates of
// support/reference.hpp) against central differences of the double reference, on small random
// inputs: softmax and log-sum-exp rows with -inf entries, scaled dot-product attention with a causal
// mask, a softcap modifier, ALiBi slopes read from a table that is itself differentiated, two heads,
// grouped-query heads, named variants; and where masking makes the gradient exactly 0: a -inf score,
// a fully masked query, a masked key whose V row holds NaN. Also the conventions at points without a
// derivative, that the forward values are the double reference's bit for bit, and that the float
// tape (ad::basic_var<float>) is the naive float reference.
//
// Tolerance: |ad - fd| ≤ 1e-8 + 1e-7 · |fd| per entry. The AD gradient is exact up to double
// rounding (~1e-15 relative); the central difference with eps = 1e-6 is off by its truncation,
// eps² · f''' / 6 ≈ 1e-12 for these O(1) inputs, plus its rounding, ~1e-16 · |y| / eps ≈ 1e-10 per
// output entry with |y| ≲ 1, summed over at most 72 entries: ~1e-9 at worst. Measured: at most
// 3e-10. The bound is 10x that estimate and 30x the measurement; a mistake in a gradient (a lost
// factor, a wrong sign, a missing path) is off by far more.
#define BOOST_TEST_MODULE reference_gradient
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "support/reference.hpp"
#include "support/reference_gradient.hpp"

namespace {

namespace ref = attn::ref;
namespace ad = attn::ref::ad;
using ref::index;
using ref::mat;

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double nan = std::numeric_limits<double>::quiet_NaN();
constexpr double abs_tolerance = 1e-8, rel_tolerance = 1e-7;

// The arithmetic type of a generic f's inputs: double or ad::var.
template <class Inputs>
using acc_of = typename decltype(std::remove_cvref_t<Inputs>::value_type::a)::value_type;

mat<double> random_mat(index rows, index cols, std::mt19937& rng, double scale = 1.0) {
  std::uniform_real_distribution<double> u(-scale, scale);
  mat<double> m(rows, cols);
  for (double& x : m.a) x = u(rng);
  return m;
}

bool all_finite(const std::vector<mat<double>>& ms) {
  for (const mat<double>& m : ms)
    for (double x : m.a)
      if (!std::isfinite(x)) return false;
  return true;
}

bool row_is_zero(const mat<double>& m, index row) {
  for (index j = 0; j < m.cols; ++j)
    if (m(row, j) != 0) return false;
  return true;
}

bool same(const std::vector<mat<double>>& x, const std::vector<mat<double>>& y) {
  if (x.size() != y.size()) return false;
  for (std::size_t k = 0; k < x.size(); ++k)
    if (x[k].a != y[k].a) return false;
  return true;
}

// The AD gradients of Σ dy ∘ f(inputs), checked against central differences entry by entry.
template <class F>
std::vector<mat<double>> checked_gradients(const std::string& what, F f, const std::vector<mat<double>>& inputs,
                                           const mat<double>& dy) {
  const std::vector<mat<double>> got = ref::reference_gradients(f, inputs, dy);
  const std::vector<mat<double>> want = ref::finite_differences(f, inputs, dy);
  BOOST_REQUIRE_EQUAL(got.size(), inputs.size());
  double worst = 0;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    BOOST_REQUIRE_EQUAL(got[k].size(), inputs[k].size());
    for (std::size_t i = 0; i < got[k].a.size(); ++i) {
      const double g = got[k].a[i], w = want[k].a[i], e = std::abs(g - w);
      BOOST_CHECK_MESSAGE(e <= abs_tolerance + rel_tolerance * std::abs(w),
                          what << ": input " << k << " entry " << i << ": AD " << g << ", differences " << w);
      if (!(e <= worst)) worst = e;
    }
  }
  BOOST_TEST_MESSAGE(what << ": largest |AD - differences| " << worst);
  return got;
}

mat<double> ones(index rows, index cols) { return mat<double>(rows, cols, 1.0); }

// ---------------------------------------------------------------- scalars

BOOST_AUTO_TEST_CASE(conventions_at_points_without_a_derivative) {
  ad::tape t;
  const ad::var zero = ad::var::variable(0), other_zero = ad::var::variable(0);
  const auto derivative = [&](const ad::var& y, const ad::var& x) { return t.backward(y)(x); };

  const ad::var minus_two = ad::var::variable(-2);
  BOOST_TEST(derivative(abs(zero), zero) == 0);
  BOOST_TEST(derivative(abs(minus_two), minus_two) == -1);
  BOOST_TEST(derivative(ref::relu(zero), zero) == 0);                       // torch.relu
  BOOST_TEST(derivative(ref::relu(zero + 0.5), zero) == 1);
  BOOST_TEST(derivative(max(zero, other_zero), zero) == 0.5);  // torch.maximum at a tie
  BOOST_TEST(derivative(max(zero, other_zero), other_zero) == 0.5);
  BOOST_TEST(derivative(min(zero, other_zero), other_zero) == 0.5);
  BOOST_TEST(derivative(max(zero, 0), zero) == 0.5);
  BOOST_TEST(derivative(max(zero, -1), zero) == 1);
  BOOST_TEST(derivative(min(zero, -1), zero) == 0);
  BOOST_TEST(derivative(sqrt(zero), zero) == inf);

  // exp(-inf) = 0 passes no gradient, and no NaN from 0 · inf.
  const ad::var minus_inf = ad::var::variable(-inf);
  BOOST_TEST(derivative(exp(minus_inf - max(minus_inf, zero)), minus_inf) == 0);
  // A factor of exactly 0 passes nothing to a NaN: the masking rule.
  const ad::var not_a_number = ad::var::variable(nan);
  BOOST_TEST(derivative(zero * not_a_number, not_a_number) == 0);
  // A node that does not reach the output passes nothing, even through sqrt'(0) = inf.
  const ad::var x = ad::var::variable(3);
  const ad::var unused = sqrt(zero) * x;
  BOOST_TEST(unused.value() == 0);
  BOOST_TEST(derivative(2 * x, zero) == 0);
  BOOST_TEST(derivative(2 * x, x) == 2);

  // Mixed with doubles and integers on either side.
  const ad::var y = ad::var::variable(1.5);
  BOOST_TEST(std::abs(derivative(2 * y + y * 3.0 - 1 / y + y / 2 - (-y), y) - (2 + 3 + 1 / (1.5 * 1.5) + 0.5 + 1)) <= 1e-15);
  BOOST_TEST((y > 1 && 2 > y && y == 1.5 && y != 0));
}

BOOST_AUTO_TEST_CASE(outside_a_tape_only_constants) {
  const ad::var c = ad::var(2.0) * 3 + 1;  // constants need no tape
  BOOST_TEST(c.value() == 7);
  BOOST_CHECK_THROW(ad::var::variable(1), std::logic_error);
  ad::var x;
  {
    ad::tape t;
    x = ad::var::variable(1);
  }
  ad::tape other;
  BOOST_CHECK_THROW(x * 2, std::logic_error);  // x belongs to a tape that is gone
}

// ---------------------------------------------------------------- forward values

BOOST_AUTO_TEST_CASE(forward_values_are_the_double_references) {
  std::mt19937 rng(1);
  const mat<double> q = random_mat(7, 8, rng, 2), k = random_mat(9, 8, rng, 2), v = random_mat(9, 8, rng);
  const auto f = [](const auto& in) {
    using Acc = acc_of<decltype(in)>;
    using std::tanh;
    const ref::score_mod<Acc> softcap = [](Acc s, index, index, index) { return 1.5 * tanh(s / 1.5); };
    return ref::multi_head(in[0], in[1], in[2], 2, ref::causal_keep, softcap);
  };
  ad::tape t;
  const ref::result<ad::var> got = f(std::vector{ad::variables(q), ad::variables(k), ad::variables(v)});
  const ref::result<double> want = f(std::vector{q, k, v});
  BOOST_TEST(ad::values(got.output).a == want.output.a);
  BOOST_TEST(ad::values(got.weights).a == want.weights.a);
  BOOST_TEST(ad::values(got.lse).a == want.lse.a);
}

BOOST_AUTO_TEST_CASE(float_tape_is_the_naive_float_reference) {
  std::mt19937 rng(11);
  const std::vector<mat<double>> inputs = {random_mat(7, 8, rng, 2), random_mat(9, 8, rng, 2), random_mat(9, 8, rng)};
  const mat<double> dy = random_mat(7, 8, rng);
  const auto f = [](const auto& in) { return ref::multi_head(in[0], in[1], in[2], 2, ref::causal_keep); };
  // Values: the float reference's (on the inputs rounded to float), bit for bit.
  std::vector<mat<float>> rounded;
  for (const mat<double>& x : inputs) {
    mat<float> r(x.rows, x.cols);
    for (std::size_t i = 0; i < x.a.size(); ++i) r.a[i] = static_cast<float>(x.a[i]);
    rounded.push_back(r);
  }
  {
    ad::basic_tape<float> t;
    std::vector<mat<ad::basic_var<float>>> x;
    for (const mat<double>& in : inputs) x.push_back(ad::variables<float>(in));
    const ref::result<ad::basic_var<float>> got = f(x);
    const ref::result<float> want = f(rounded);
    BOOST_TEST(ad::values(got.output).a == want.output.a);
    BOOST_TEST(ad::values(got.lse).a == want.lse.a);
  }
  // Gradients: within float rounding of the double ones, and not all equal to them (the sweep ran in float).
  const auto output = [&f](const auto& in) { return f(in).output; };
  const std::vector<mat<float>> g32 = ref::reference_gradients<float>(output, inputs, dy);
  const std::vector<mat<double>> g64 = ref::reference_gradients(output, inputs, dy);
  bool differs = false;
  for (std::size_t k = 0; k < g64.size(); ++k)
    for (std::size_t i = 0; i < g64[k].a.size(); ++i) {
      const double e = std::abs(static_cast<double>(g32[k].a[i]) - g64[k].a[i]);
      BOOST_TEST(e <= 1e-5 * (1 + std::abs(g64[k].a[i])), "input " << k << " entry " << i << ": float " << g32[k].a[i] << ", double " << g64[k].a[i]);
      differs = differs || e != 0;
    }
  BOOST_TEST(differs);
}

// ---------------------------------------------------------------- softmax rows

BOOST_AUTO_TEST_CASE(softmax_and_log_sum_exp_rows_with_minus_inf) {
  std::mt19937 rng(2);
  // Row 0: one -inf entry; row 1: all -inf (fully masked); row 2: finite.
  mat<double> s = random_mat(3, 7, rng, 2);
  s(0, 3) = -inf;
  for (index j = 0; j < s.cols; ++j) s(1, j) = -inf;

  const auto softmax = [](const auto& in) { return ref::softmax_rows(in[0]); };
  const mat<double> ds = checked_gradients("softmax rows", softmax, {s}, random_mat(3, 7, rng))[0];
  BOOST_TEST(ds(0, 3) == 0);
  BOOST_TEST(row_is_zero(ds, 1));

  const auto lse = [](const auto& in) { return ref::log_sum_exp_rows(in[0]); };
  const mat<double> dl = checked_gradients("log-sum-exp rows", lse, {s}, ones(3, 1))[0];
  BOOST_TEST(dl(0, 3) == 0);
  BOOST_TEST(row_is_zero(dl, 1));
  // ∂ lse / ∂s = softmax(s).
  const mat<double> w = ref::softmax_rows(s);
  for (std::size_t i = 0; i < w.a.size(); ++i) BOOST_TEST(std::abs(dl.a[i] - w.a[i]) <= 1e-15);
}

// ---------------------------------------------------------------- attention

BOOST_AUTO_TEST_CASE(causal_mask) {
  std::mt19937 rng(3);
  const auto f = [](const auto& in) {
    return ref::scaled_dot_product(in[0], in[1], in[2], ref::inv_sqrt(8), ref::causal_keep).output;
  };
  checked_gradients("causal", f, {random_mat(7, 8, rng), random_mat(7, 8, rng), random_mat(7, 8, rng)},
                    random_mat(7, 8, rng));
}

BOOST_AUTO_TEST_CASE(softcap_modifier) {
  std::mt19937 rng(4);
  const auto f = [](const auto& in) {
    using Acc = acc_of<decltype(in)>;
    using std::tanh;
    const double cap = 1.5;
    const ref::score_mod<Acc> softcap = [cap](Acc s, index, index, index) { return cap * tanh(s / cap); };
    return ref::scaled_dot_product(in[0], in[1], in[2], ref::inv_sqrt(8), {}, softcap).output;
  };
  // Inputs of scale 2: scores of several units, where the cap bends them.
  checked_gradients("softcap", f, {random_mat(6, 8, rng, 2), random_mat(8, 8, rng, 2), random_mat(8, 8, rng)},
                    random_mat(6, 8, rng));
}

BOOST_AUTO_TEST_CASE(alibi_slopes_from_a_differentiated_table) {
  std::mt19937 rng(5);
  // in[3]: the slope of each of the 2 heads, read by the modifier and differentiated like Q, K, V.
  const auto f = [](const auto& in) {
    using Acc = acc_of<decltype(in)>;
    const mat<Acc>& slopes = in[3];
    const ref::score_mod<Acc> alibi = [&slopes](Acc s, index q, index kv, index h) { return s - slopes(0, h) * (q - kv); };
    return ref::multi_head(in[0], in[1], in[2], 2, ref::causal_keep, alibi).output;
  };
  mat<double> slopes(1, 2);
  slopes(0, 0) = 0.25;
  slopes(0, 1) = 0.0625;
  const std::vector<mat<double>> g = checked_gradients(
      "ALiBi", f, {random_mat(6, 8, rng), random_mat(6, 8, rng), random_mat(6, 8, rng), slopes}, random_mat(6, 8, rng));
  BOOST_TEST(std::abs(g[3](0, 0)) > 1e-3);
  BOOST_TEST(std::abs(g[3](0, 1)) > 1e-3);
}

BOOST_AUTO_TEST_CASE(multi_head_two_heads) {
  std::mt19937 rng(6);
  const auto f = [](const auto& in) { return ref::multi_head(in[0], in[1], in[2], 2).output; };
  checked_gradients("2 heads", f, {random_mat(5, 8, rng), random_mat(7, 8, rng), random_mat(7, 6, rng)},
                    random_mat(5, 6, rng));
}

BOOST_AUTO_TEST_CASE(grouped_query_four_heads_two_groups) {
  std::mt19937 rng(7);
  // Q: 4 heads of 2 columns; K, V: 2 groups of 2 columns, each shared by 2 heads.
  const auto f = [](const auto& in) { return ref::grouped_query(in[0], in[1], in[2], 4, 2, ref::causal_keep).output; };
  checked_gradients("grouped-query", f, {random_mat(6, 8, rng), random_mat(6, 4, rng), random_mat(6, 4, rng)},
                    random_mat(6, 8, rng));
}

BOOST_AUTO_TEST_CASE(named_variants) {
  std::mt19937 rng(8);
  const auto causal_self = [](const auto& in) { return ref::causal_self_attention(in[0], in[1], in[2], in[3]).output; };
  checked_gradients("causal self-attention",
                    causal_self, {random_mat(5, 4, rng), random_mat(4, 4, rng), random_mat(4, 4, rng), random_mat(4, 3, rng)},
                    random_mat(5, 3, rng));

  const auto bahdanau = [](const auto& in) { return ref::bahdanau(in[0], in[1], in[2], in[3], in[4], in[5]).output; };
  checked_gradients("Bahdanau",
                    bahdanau,
                    {random_mat(3, 4, rng), random_mat(5, 4, rng), random_mat(4, 3, rng), random_mat(4, 3, rng),
                     random_mat(1, 3, rng), random_mat(1, 3, rng)},
                    random_mat(3, 4, rng));

  const auto sigmoid_attention = [](const auto& in) {
    using Acc = acc_of<decltype(in)>;
    return ref::attend_unnormalised<Acc>(ref::matmul(in[0], ref::transpose(in[1])), in[2], ref::sigmoid<Acc>,
                                         ref::causal_keep)
        .output;
  };
  checked_gradients("sigmoid attention", sigmoid_attention,
                    {random_mat(5, 4, rng), random_mat(5, 4, rng), random_mat(5, 4, rng)}, random_mat(5, 4, rng));
}

// ---------------------------------------------------------------- exact zeros from masking

BOOST_AUTO_TEST_CASE(fully_masked_query_gets_no_gradient) {
  std::mt19937 rng(9);
  constexpr index masked_query = 2;
  const auto f = [](const auto& in) {
    const ref::mask_pred keep = [](index q, index kv, index) { return kv <= q && q != masked_query; };
    return ref::scaled_dot_product(in[0], in[1], in[2], ref::inv_sqrt(8), keep).output;
  };
  const std::vector<mat<double>> inputs = {random_mat(6, 8, rng), random_mat(6, 8, rng), random_mat(6, 8, rng)};
  mat<double> dy = random_mat(6, 8, rng);
  const std::vector<mat<double>> g = checked_gradients("fully masked query", f, inputs, dy);
  BOOST_TEST(all_finite(g));
  BOOST_TEST(row_is_zero(g[0], masked_query));
  // Its output row (all 0) passes nothing to K and V: another dy there changes no gradient.
  for (index j = 0; j < dy.cols; ++j) dy(masked_query, j) = 100 + static_cast<double>(j);
  BOOST_TEST(same(ref::reference_gradients(f, inputs, dy), g));
}

BOOST_AUTO_TEST_CASE(masked_key_with_nan_values) {
  std::mt19937 rng(10);
  constexpr index masked_key = 3;
  const auto f = [](const auto& in) {
    const ref::mask_pred keep = [](index, index kv, index) { return kv != masked_key; };
    return ref::scaled_dot_product(in[0], in[1], in[2], ref::inv_sqrt(8), keep).output;
  };
  std::vector<mat<double>> inputs = {random_mat(5, 8, rng), random_mat(7, 8, rng), random_mat(7, 8, rng)};
  const mat<double> dy = random_mat(5, 8, rng);
  // With a finite V row for the masked key: the gradients, checked against differences.
  const std::vector<mat<double>> finite = checked_gradients("masked key", f, inputs, dy);
  BOOST_TEST(row_is_zero(finite[1], masked_key));
  BOOST_TEST(row_is_zero(finite[2], masked_key));
  // With NaN there: the forward output is NaN (0 · NaN), but the masked key contributes nothing to
  // the gradients: the same ones, finite, 0 for its K and V rows.
  for (index j = 0; j < inputs[2].cols; ++j) inputs[2](masked_key, j) = nan;
  const std::vector<mat<double>> with_nan = ref::reference_gradients(f, inputs, dy);
  BOOST_TEST(all_finite(with_nan));
  BOOST_TEST(same(with_nan, finite));
}

}  // namespace
