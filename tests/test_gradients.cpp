// The backward pass (attn::jit_gradients, runtime/gradients.hpp) against the double reference's
// exact gradients (support/reference_gradient.hpp: reverse-mode AD through support/reference.hpp),
// for every float tensor an expression reads: inputs, weights (summed over the batch), an input
// given without the batch dim (summed too), a bias table read by gather, a slope vector.
//
// Variants, each compiled once and run at every size (run-time dims): plain, causal, ALiBi +
// causal, key padding with a length-0 item (sequence lengths 1, 7, 33, 257; 2 heads of width 8,
// batch 2, 3 for key padding), and on smaller sizes softcap, sliding window, a T5-like learned bias
// table, learned per-head slopes (also at 257), GQA (4 query heads, 2 groups) and MQA through repeat_heads,
// cross-attention with projections (N_Q != N_K), multi-head self-attention with W_O, sigmoid and
// ReLU attention, Bahdanau, queries that see no key. On sizes up to 7, central differences of the
// double reference confirm the reference itself and attnforge. Also: a masked key's K and V rows
// get exactly 0, NaN there changes no gradient bit, a fully masked query gets exactly 0; the same
// call twice gives the same bits; the errors of jit_gradients and of a gradient call. The variants
// the fused backward covers run it here (the default on a CPU); it is also compared with the
// generic backward (sweep and two passes, sizes up to 1000).
//
// Tolerance, per gradient tensor (all batch items together), with ref64 the double AD gradient and
// naive32 the same AD in float (ad::basic_var<float>: the reference's float forward, swept back in
// float):
//   max |attnforge - ref64| ≤ 4 · max |naive32 - ref64| + 2e-6 · max |ref64|.
// Both terms are twice the forward's rule (support/reference.hpp: 2x the naive float's error, a
// 1e-6 floor): a backward pass sums longer and in other orders than the naive sweep (dK and dV over
// the queries, a weight's gradient over the rows and the batch, a table's over every pair that reads
// an entry). The floor, ~17 float ulps of the largest entry, covers tensors the naive float gets
// (nearly) exactly while the kernel sums in another order; where the exact gradient is identically
// 0 (dQ and dK with one key) the reference and the naive float give exactly 0, and so must attnforge.
// Measured: at most 0.55 of the tolerance (the learned slopes' gradient at 257 in the generic
// backward, a compensated sum over every pair); where the naive float's term dominates, at most
// 2.4x its error (that gradient; run with --log_level=message for every tensor's numbers). A 0.1%
// error in the ALiBi slopes already fails by 15x to 100x.
//
// Central differences (ref::finite_differences, eps = 1e-6, double) on every variant's sizes up to 7:
// |ref64 - fd| ≤ 1e-8 + 1e-7 · |fd| per entry (test_reference_gradient.cpp's bound; measured at most
// 1.3e-9), and max |attnforge - fd| within the tolerance above plus that bound.
#define BOOST_TEST_MODULE gradients
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "runtime/jit.hpp"
#include "support/reference.hpp"
#include "support/reference_gradient.hpp"

namespace {

using namespace attn::dsl;
namespace ref = attn::ref;
using attn::tensor;
using idx_t = ref::index;
using ref::mat;

constexpr float not_a_number = std::numeric_limits<float>::quiet_NaN();

// ---------------------------------------------------------------- the expressions' dims

constexpr auto NQ = dim<"NQ">;
constexpr auto NK = dim<"NK">;
constexpr auto H = head_dim<"H", 2>;
constexpr auto Dh = dim<"Dh", 8>;
constexpr idx_t heads = 2, width = 8;

constexpr auto q = input<"q">(H, NQ, Dh);
constexpr auto k = input<"k">(H, NK, Dh);
constexpr auto v = input<"v">(H, NK, Dh);
constexpr auto s = scaled_scores(q, k);

template <class S>
constexpr auto attention(const S& scores) { return combine(softmax(scores), v); }

constexpr auto plain = attention(s);
constexpr auto causal_attention = attention(causal(s));
constexpr auto alibi_causal = attention(causal(alibi(s, H)));
constexpr auto padded = attention(key_padding(s, lengths<"len">));

// ---------------------------------------------------------------- the reference, per batch item

// The arithmetic type of a generic reference's inputs: double, ad::var or ad::basic_var<float>.
template <class Inputs>
using acc_of = typename decltype(std::remove_cvref_t<Inputs>::value_type::a)::value_type;

// Rows [first, first + count) of m.
template <class Acc>
mat<Acc> rows_of(const mat<Acc>& m, idx_t first, idx_t count) {
  mat<Acc> r(count, m.cols);
  std::copy(m.a.begin() + static_cast<std::ptrdiff_t>(first * m.cols),
            m.a.begin() + static_cast<std::ptrdiff_t>((first + count) * m.cols), r.a.begin());
  return r;
}

// Writes m into `into` from row `first` on.
template <class Acc>
void put_rows(mat<Acc>& into, idx_t first, const mat<Acc>& m) {
  std::copy(m.a.begin(), m.a.end(), into.a.begin() + static_cast<std::ptrdiff_t>(first * into.cols));
}

// One batch item of per-head attention: q (Hq·N_Q, D), k and v (G·N_K, D), heads stacked along the
// rows (the layout of a (B, H, N, D) tensor's item); query head h reads key/value head h / (Hq / G).
// The result is stacked the same way: (Hq·N_Q, D).
template <class Acc>
mat<Acc> per_head(const mat<Acc>& qm, const mat<Acc>& km, const mat<Acc>& vm, idx_t query_heads, idx_t groups,
                  const ref::mask_pred& keep = {}, const ref::score_mod<Acc>& mod = {}) {
  const idx_t nq = qm.rows / query_heads, nk = km.rows / groups;
  mat<Acc> out(qm.rows, vm.cols);
  for (idx_t h = 0; h < query_heads; ++h) {
    const idx_t g = h / (query_heads / groups);
    put_rows(out, h * nq,
             ref::scaled_dot_product(rows_of(qm, h * nq, nq), rows_of(km, g * nk, nk), rows_of(vm, g * nk, nk),
                                     ref::inv_sqrt(qm.cols), keep, mod, h)
                 .output);
  }
  return out;
}

// The same with softmax-free weights f(score) (sigmoid, ReLU attention), 0 where keep fails.
template <class Acc>
mat<Acc> per_head_unnormalised(const mat<Acc>& qm, const mat<Acc>& km, const mat<Acc>& vm,
                               const std::function<Acc(Acc)>& f, const ref::mask_pred& keep = {}) {
  const idx_t nq = qm.rows / heads, nk = km.rows / heads;
  mat<Acc> out(qm.rows, vm.cols);
  for (idx_t h = 0; h < heads; ++h) {
    mat<Acc> scores = ref::matmul(rows_of(qm, h * nq, nq), ref::transpose(rows_of(km, h * nk, nk)));
    for (Acc& x : scores.a) x *= static_cast<Acc>(ref::inv_sqrt(qm.cols));
    put_rows(out, h * nq, ref::attend_unnormalised(scores, rows_of(vm, h * nk, nk), f, keep, {}, h).output);
  }
  return out;
}

bool keep_all(idx_t, idx_t, idx_t) { return true; }

// The key padding's predicate for a key length.
ref::mask_pred keys_below(idx_t len) {
  return [len](idx_t, idx_t j, idx_t) { return j < len; };
}

// ---------------------------------------------------------------- tensors of a call

// One tensor of a gradient call, in the forward's call order.
struct param {
  std::string name;
  std::vector<idx_t> shape;  // one batch item's shape (a weight's whole shape)
  bool batched = true;       // given with the leading batch dim
  float scale = 1.0f;        // values uniform in [-scale, scale]
  bool lengths = false;      // an int32 key length per batch item (no gradient)
};

// A variant's tensors at sizes (n_q, n_k), and its output's shape (one batch item's).
struct layout {
  std::vector<param> params;
  std::vector<idx_t> output;
};
using layout_fn = std::function<layout(idx_t nq, idx_t nk)>;

// q, k, v per head: (H, N_Q, Dh), (H, N_K, Dh), (H, N_K, Dh); scores of a few units.
layout qkv_layout(idx_t nq, idx_t nk) {
  return {{{"q", {heads, nq, width}, true, 2.0f}, {"k", {heads, nk, width}, true, 2.0f}, {"v", {heads, nk, width}}},
          {heads, nq, width}};
}

// Key lengths per item cycle through about half the keys, none (every query fully masked), all.
tensor<std::int32_t> key_lengths(idx_t batch, idx_t nk) {
  const std::vector<idx_t> cycle = {(nk + 1) / 2, 0, nk};
  tensor<std::int32_t> l(batch > 0 ? std::vector<idx_t>{batch} : std::vector<idx_t>{});
  for (idx_t b = 0; b < std::max<idx_t>(batch, 1); ++b) l.data()[b] = static_cast<std::int32_t>(cycle[static_cast<std::size_t>(b) % 3]);
  return l;
}

// The tensors of one call, drawn in call order, then dY. batch 0: no batch dim anywhere.
struct problem {
  idx_t batch = 0, nk = 0;
  layout shapes;
  std::vector<tensor<float>> floats;  // the float tensors, in call order
  tensor<std::int32_t> lengths;       // the key lengths, where the expression reads them
  tensor<float> dy;

  problem(const layout& l, idx_t batch_, idx_t nk_, std::mt19937& rng) : batch(batch_), nk(nk_), shapes(l) {
    for (const param& p : l.params) {
      if (p.lengths) lengths = key_lengths(batch, nk);
      else floats.push_back(ref::random_tensor(p.batched ? ref::with_batch(batch, p.shape) : p.shape, rng, p.scale));
    }
    dy = ref::random_tensor(ref::with_batch(batch, l.output), rng);
  }
  idx_t items() const { return std::max<idx_t>(batch, 1); }
  // Item b's key length (N_K where the expression reads none).
  idx_t length(idx_t b) const { return lengths.values().empty() ? nk : ref::length_at(lengths, b); }
  std::vector<std::string> float_names() const {
    std::vector<std::string> names;
    for (const param& p : shapes.params)
      if (!p.lengths) names.push_back(p.name);
    return names;
  }
  // The forward's tensors in call order.
  std::vector<attn::tensor_view> views() const {
    std::vector<attn::tensor_view> r;
    std::size_t f = 0;
    for (const param& p : shapes.params) r.push_back(p.lengths ? lengths.view() : floats[f++].view());
    return r;
  }
};

template <class K, std::size_t... I>
attn::gradients call_with(const K& grad, const tensor<float>& dy, const std::vector<attn::tensor_view>& in,
                          std::index_sequence<I...>) {
  return grad(dy, in[I]...);
}

// grad(dY, the forward's tensors in call order).
template <class K>
attn::gradients call(const K& grad, const tensor<float>& dy, const std::vector<attn::tensor_view>& in) {
  if (in.size() != K::arity) throw std::invalid_argument("call: " + std::to_string(in.size()) + " tensors for arity " + std::to_string(K::arity));
  return call_with(grad, dy, in, std::make_index_sequence<K::arity>{});
}

template <class K>
attn::gradients call(const K& grad, const problem& p) { return call(grad, p.dy, p.views()); }

mat<double> item_of(const tensor<float>& t, idx_t b, std::size_t item_rank) {
  return ref::item<double>(t, b, static_cast<int>(item_rank));
}

template <class Acc>
mat<Acc> flattened(mat<Acc> m) {
  m.cols = m.rows * m.cols;
  m.rows = 1;
  return m;
}

// The gradients of every float tensor laid out as attnforge's: a batched tensor's item b at item b's
// place, an unbatched one's summed over the items. Item b's come from gradients_of(f, inputs, dY),
// with f(inputs) = reference(inputs, key length) flattened, inputs and dY item b's. The key length
// is the item's where the expression reads lengths, else N_K.
template <class Reference, class GradientsOf>
std::vector<std::vector<double>> per_item(const problem& p, const Reference& reference, GradientsOf gradients_of) {
  std::vector<std::vector<double>> g;
  for (const tensor<float>& t : p.floats) g.emplace_back(t.values().size(), 0.0);
  std::vector<param> floats;
  for (const param& pa : p.shapes.params)
    if (!pa.lengths) floats.push_back(pa);
  for (idx_t b = 0; b < p.items(); ++b) {
    std::vector<mat<double>> inputs;
    for (std::size_t i = 0; i < floats.size(); ++i) inputs.push_back(item_of(p.floats[i], b, floats[i].shape.size()));
    const mat<double> dy = flattened(item_of(p.dy, b, p.shapes.output.size()));
    const idx_t len = p.length(b);
    const auto gb = gradients_of([&](const auto& in) { return flattened(reference(in, len)); }, inputs, dy);
    for (std::size_t i = 0; i < floats.size(); ++i) {
      const std::size_t n = gb[i].a.size();
      const std::size_t at = floats[i].batched && p.batch > 0 ? static_cast<std::size_t>(b) * n : 0;
      for (std::size_t j = 0; j < n; ++j) g[i][at + j] += static_cast<double>(gb[i].a[j]);
    }
  }
  return g;
}

// By AD in T: double (the reference), float (the naive float backward pass).
template <class T, class Reference>
std::vector<std::vector<double>> ad_gradients(const problem& p, const Reference& reference) {
  return per_item(p, reference, [](const auto& f, const auto& inputs, const auto& dy) { return ref::reference_gradients<T>(f, inputs, dy); });
}

// By central differences of the double reference.
template <class Reference>
std::vector<std::vector<double>> difference_gradients(const problem& p, const Reference& reference) {
  return per_item(p, reference, [](const auto& f, const auto& inputs, const auto& dy) { return ref::finite_differences(f, inputs, dy); });
}

// ---------------------------------------------------------------- the tolerance rule

constexpr double naive_factor = 4, floor_rel = 2e-6;
constexpr double differences_abs = 1e-8, differences_rel = 1e-7;

// Largest |x - y|; NaN or inf gives +inf.
double max_error(const std::vector<double>& x, const std::vector<double>& y, std::size_t* worst = nullptr) {
  double e = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    double d = std::abs(x[i] - y[i]);
    if (!std::isfinite(d)) d = std::numeric_limits<double>::infinity();
    if (d > e) {
      e = d;
      if (worst) *worst = i;
    }
  }
  return e;
}

double max_abs(const std::vector<double>& x) {
  double m = 0;
  for (double e : x) m = std::max(m, std::abs(e));
  return m;
}

std::vector<double> as_doubles(const tensor<float>& t) { return {t.values().begin(), t.values().end()}; }

std::string joined(const std::vector<std::string>& names) {
  std::string r;
  for (const std::string& n : names) r += (r.empty() ? "" : ", ") + n;
  return r;
}

struct judged {
  double kernel = 0, naive = 0, scale = 0, tolerance = 0;
  std::size_t worst = 0;
  bool ok = false;
  std::string describe() const {
    std::ostringstream o;
    o << "error " << kernel << " (at flat index " << worst << "), naive float " << naive << ", max |ref| " << scale
      << ", tolerance " << tolerance;
    if (tolerance > 0) o << " (" << kernel / tolerance << " of it)";
    else o << " (the reference and the naive float are exactly 0: so must the kernel be)";
    return o.str();
  }
};

judged judge(const std::vector<double>& got, const std::vector<double>& ref64, const std::vector<double>& naive32) {
  judged j;
  j.kernel = max_error(got, ref64, &j.worst);
  j.naive = max_error(naive32, ref64);
  j.scale = max_abs(ref64);
  j.tolerance = naive_factor * j.naive + floor_rel * j.scale;
  j.ok = j.kernel <= j.tolerance;
  return j;
}

// The worst ratios over every check, reported at the end (the header's "measured").
struct worst_seen {
  double of_tolerance = 0;
  double of_naive = 0;  // over the tensors where 4 · naive error ≥ the floor
};
worst_seen worst;

struct report_worst {
  ~report_worst() {
    BOOST_TEST_MESSAGE("worst kernel error: " << worst.of_tolerance << " of the tolerance; " << worst.of_naive
                                              << "x the naive float's where its term dominates the tolerance");
  }
};

// ---------------------------------------------------------------- the check

struct sizes {
  idx_t nq, nk;
};

// Runs the compiled gradients of one variant at every size on random tensors (batch 0: no batch
// dim), checks each gradient against the double reference by the tolerance rule, and on sizes up
// to 7 against central differences.
template <class K, class Reference>
void expect_gradients(const std::string& what, const K& grad, idx_t batch, const std::vector<sizes>& at,
                      const layout_fn& layout_of, const Reference& reference) {
  std::mt19937 rng(1);
  for (const auto [nq, nk] : at) {
    const problem p(layout_of(nq, nk), batch, nk, rng);
    const attn::gradients d = call(grad, p);
    const std::string where = what + " N_Q=" + std::to_string(nq) + " N_K=" + std::to_string(nk) + " B=" + std::to_string(batch);
    BOOST_REQUIRE_MESSAGE(d.names == p.float_names(), where << ": gradients of " << joined(d.names) << ", want "
                                                            << joined(p.float_names()));
    const auto ref64 = ad_gradients<double>(p, reference);
    const auto naive32 = ad_gradients<float>(p, reference);
    const bool differences = std::max(nq, nk) <= 7;
    std::vector<std::vector<double>> fd;
    if (differences) fd = difference_gradients(p, reference);
    for (std::size_t i = 0; i < p.floats.size(); ++i) {
      const std::string tensor_at = where + " d" + d.names[i];
      BOOST_REQUIRE_MESSAGE(d.values[i].as<float>().sizes() == p.floats[i].sizes(), tensor_at << ": shape " << ref::to_string(d.values[i].as<float>().sizes())
                                                                                 << ", want " << ref::to_string(p.floats[i].sizes()));
      const std::vector<double> got = as_doubles(d.values[i].as<float>());
      const judged j = judge(got, ref64[i], naive32[i]);
      BOOST_CHECK_MESSAGE(j.ok, tensor_at << ": " << j.describe());
      BOOST_TEST_MESSAGE(tensor_at << ": " << j.describe());
      if (j.tolerance > 0) worst.of_tolerance = std::max(worst.of_tolerance, j.kernel / j.tolerance);
      if (j.naive > 0 && naive_factor * j.naive >= floor_rel * j.scale) worst.of_naive = std::max(worst.of_naive, j.kernel / j.naive);
      if (!differences) continue;
      // The reference against central differences, then attnforge against them.
      std::size_t bad = 0;
      double reference_vs_fd = 0, fd_bound = 0;
      for (std::size_t e = 0; e < fd[i].size(); ++e) {
        const double bound = differences_abs + differences_rel * std::abs(fd[i][e]);
        const double diff = std::abs(ref64[i][e] - fd[i][e]);
        if (!(diff <= bound)) ++bad;
        reference_vs_fd = std::max(reference_vs_fd, diff);
        fd_bound = std::max(fd_bound, bound);
      }
      BOOST_CHECK_MESSAGE(bad == 0, tensor_at << ": the reference disagrees with central differences at " << bad
                                              << " entries, largest |ref - fd| " << reference_vs_fd);
      BOOST_TEST_MESSAGE(tensor_at << ": largest |ref - fd| " << reference_vs_fd);
      const double kernel_vs_fd = max_error(got, fd[i]);
      BOOST_CHECK_MESSAGE(kernel_vs_fd <= j.tolerance + fd_bound,
                          tensor_at << ": |attnforge - fd| " << kernel_vs_fd << " > " << j.tolerance + fd_bound);
    }
  }
}

const std::vector<sizes> core_sizes = {{1, 1}, {7, 7}, {33, 33}, {257, 257}};
const std::vector<sizes> small_sizes = {{1, 1}, {7, 7}, {33, 33}};

// A reference over q, k, v per head (2 heads) with a predicate and a modifier per item.
template <class Keep, class Mod>
auto heads_reference(Keep keep_of, Mod mod) {
  return [keep_of, mod](const auto& in, idx_t len) {
    using Acc = acc_of<decltype(in)>;
    return per_head<Acc>(in[0], in[1], in[2], heads, heads, keep_of(len), ref::score_mod<Acc>(mod));
  };
}
const auto no_mod = [](auto x, idx_t, idx_t, idx_t) { return x; };
const auto keep_everything = [](idx_t) { return ref::mask_pred(keep_all); };
const auto keep_causal = [](idx_t) { return ref::mask_pred(ref::causal_keep); };

}  // namespace

BOOST_TEST_GLOBAL_FIXTURE(report_worst);

// ---------------------------------------------------------------- the core variants

BOOST_AUTO_TEST_CASE(plain_softmax_attention) {
  const auto grad = attn::jit_gradients(plain);
  BOOST_TEST(grad.parameters() == (std::vector<std::string>{"q", "k", "v"}), boost::test_tools::per_element());
  const auto reference = heads_reference(keep_everything, no_mod);
  std::vector<sizes> at = core_sizes;
  at.insert(at.end(), {{5, 33}, {33, 5}});  // cross-attention shapes, N_Q != N_K
  expect_gradients("plain", grad, 2, at, qkv_layout, reference);
  // Without a batch dim; and K, V given without it beside a batched Q: their gradients are summed
  // over the batch.
  expect_gradients("plain, no batch dim", grad, 0, {{7, 7}, {33, 33}}, qkv_layout, reference);
  const layout_fn shared_kv = [](idx_t nq, idx_t nk) {
    layout l = qkv_layout(nq, nk);
    l.params[1].batched = l.params[2].batched = false;
    return l;
  };
  expect_gradients("plain, K and V shared by the batch", grad, 2, {{7, 7}, {33, 33}}, shared_kv, reference);
}

BOOST_AUTO_TEST_CASE(causal_mask) {
  expect_gradients("causal", attn::jit_gradients(causal_attention), 2, core_sizes, qkv_layout,
                   heads_reference(keep_causal, no_mod));
}

BOOST_AUTO_TEST_CASE(alibi_and_causal) {
  const auto alibi_mod = [](auto x, idx_t i, idx_t j, idx_t h) {
    using Acc = decltype(x);
    return x - static_cast<Acc>(ref::alibi_slope(h, heads)) * static_cast<Acc>(i - j);
  };
  expect_gradients("ALiBi + causal", attn::jit_gradients(alibi_causal), 2, core_sizes, qkv_layout,
                   heads_reference(keep_causal, alibi_mod));
}

// Batch 3: item 0 keeps about half the keys, item 1 none (all its queries fully masked), item 2 all.
layout padded_layout(idx_t nq, idx_t nk) {
  layout l = qkv_layout(nq, nk);
  l.params.push_back({"len", {}, true, 1.0f, true});
  return l;
}

BOOST_AUTO_TEST_CASE(key_padding_with_an_empty_sequence) {
  const auto grad = attn::jit_gradients(padded);
  BOOST_TEST(grad.parameters() == (std::vector<std::string>{"q", "k", "v", "len"}), boost::test_tools::per_element());
  expect_gradients("key padding", grad, 3, core_sizes, padded_layout, heads_reference(keys_below, no_mod));
}

// ---------------------------------------------------------------- masks and score modifiers

BOOST_AUTO_TEST_CASE(softcap_modifier) {
  const auto softcap_mod = [](auto x, idx_t, idx_t, idx_t) {
    using Acc = decltype(x);
    using std::tanh;
    return static_cast<Acc>(2.0) * tanh(x / static_cast<Acc>(2.0));
  };
  expect_gradients("softcap 2", attn::jit_gradients(attention(softcap(s, 2.0f))), 2, small_sizes, qkv_layout,
                   heads_reference(keep_everything, softcap_mod));
}

BOOST_AUTO_TEST_CASE(sliding_window_mask) {
  const auto window = [](idx_t) { return ref::mask_pred([](idx_t i, idx_t j, idx_t) { return j <= i && i - j < 5; }); };
  expect_gradients("sliding window 5", attn::jit_gradients(attention(sliding_window(s, 5))), 2, small_sizes, qkv_layout,
                   heads_reference(window, no_mod));
}

BOOST_AUTO_TEST_CASE(queries_that_see_no_key) {
  // Queries 0 and 1 see no key (kv + 2 <= q fails for every kv): fully masked rows inside a batch.
  const auto grad = attn::jit_gradients(attention(mask(s, kv_idx + 2 <= q_idx)));
  const auto later = [](idx_t) { return ref::mask_pred([](idx_t i, idx_t j, idx_t) { return j + 2 <= i; }); };
  expect_gradients("kv + 2 <= q", grad, 2, small_sizes, qkv_layout, heads_reference(later, no_mod));
  std::mt19937 rng(3);
  const problem p(qkv_layout(9, 9), 2, 9, rng);
  const attn::gradients d = call(grad, p);
  for (idx_t b = 0; b < 2; ++b)
    for (idx_t h = 0; h < heads; ++h)
      for (idx_t i = 0; i < 2; ++i)
        for (idx_t c = 0; c < width; ++c) BOOST_TEST(d["q"](b, h, i, c) == 0.0f, "dQ item " << b << " head " << h << " query " << i);
}

BOOST_AUTO_TEST_CASE(learned_bias_table_read_by_gather) {
  // T5-like: a learned bias per clamped distance kv - q in [-4, 4] and head, a weight (R, H).
  constexpr int offset = 4, entries = 2 * offset + 1;
  constexpr auto R = dim<"R", entries>;
  const auto table = weight<"bias">(R, H);
  const auto grad = attn::jit_gradients(attention(modify(s, score + gather(table, kv_idx - q_idx + offset, head))));
  const layout_fn with_table = [](idx_t nq, idx_t nk) {
    layout l = qkv_layout(nq, nk);
    l.params.push_back({"bias", {entries, heads}, false, 1.0f});
    return l;
  };
  const auto reference = [](const auto& in, idx_t) {
    using Acc = acc_of<decltype(in)>;
    const mat<Acc>& bias = in[3];
    const ref::score_mod<Acc> mod = [&bias](Acc x, idx_t i, idx_t j, idx_t h) {
      return x + bias(std::clamp<idx_t>(j - i + offset, 0, entries - 1), h);
    };
    return per_head<Acc>(in[0], in[1], in[2], heads, heads, {}, mod);
  };
  // At 33, most pairs read the table's first or last entry (clamped): their gradients add up there.
  expect_gradients("bias table", grad, 2, small_sizes, with_table, reference);
}

BOOST_AUTO_TEST_CASE(t5_bucket_table) {
  // T5's log buckets (8 per head, bidirectional, up to distance 20): the kernels compute the bucket
  // once per offset kv - q, and the fused backward sums each tile's pairs per offset before adding
  // them to the buckets (offset_tables.hpp); the reference computes both per pair.
  constexpr auto R = dim<"R", 8>;
  const auto grad = attn::jit_gradients(attention(modify(s, score + gather(weight<"t5">(R, H), t5_bucket<true>(8, 20), head))));
  const layout_fn with_table = [](idx_t nq, idx_t nk) {
    layout l = qkv_layout(nq, nk);
    l.params.push_back({"t5", {8, heads}, false, 1.0f});
    return l;
  };
  const auto bucket = [](idx_t i, idx_t j) {
    const idx_t rel = j - i, n = std::abs(rel), side = rel > 0 ? 4 : 0;
    if (n < 2) return side + n;
    return side + std::min<idx_t>(static_cast<idx_t>(2 + std::log(static_cast<double>(n) / 2) / std::log(10.0) * 2), 3);
  };
  const auto reference = [&bucket](const auto& in, idx_t) {
    using Acc = acc_of<decltype(in)>;
    const mat<Acc>& table = in[3];
    const ref::score_mod<Acc> mod = [&](Acc x, idx_t i, idx_t j, idx_t h) { return x + table(bucket(i, j), h); };
    return per_head<Acc>(in[0], in[1], in[2], heads, heads, {}, mod);
  };
  expect_gradients("T5 buckets", grad, 2, {{1, 1}, {7, 7}, {33, 33}, {5, 40}, {40, 5}}, with_table, reference);
}

BOOST_AUTO_TEST_CASE(learned_slope_per_head) {
  const auto slopes = weight<"slopes">(H);
  const auto grad = attn::jit_gradients(attention(causal(modify(s, score - gather(slopes, head) * (q_idx - kv_idx)))));
  const layout_fn with_slopes = [](idx_t nq, idx_t nk) {
    layout l = qkv_layout(nq, nk);
    l.params.push_back({"slopes", {heads}, false, 0.5f});
    return l;
  };
  const auto reference = [](const auto& in, idx_t) {
    using Acc = acc_of<decltype(in)>;
    const mat<Acc>& m = in[3];
    const ref::score_mod<Acc> mod = [&m](Acc x, idx_t i, idx_t j, idx_t h) { return x - m(0, h) * static_cast<Acc>(i - j); };
    return per_head<Acc>(in[0], in[1], in[2], heads, heads, ref::causal_keep, mod);
  };
  expect_gradients("learned slopes", grad, 2, {{1, 1}, {7, 7}, {33, 33}, {257, 257}}, with_slopes, reference);
  // The generic backward's scatter-add sums every pair into a slope in one pass: compensated sums.
  const auto generic = attn::jit_gradients(attention(causal(modify(s, score - gather(slopes, head) * (q_idx - kv_idx)))),
                                           {.path = attn::lowering::generic});
  expect_gradients("learned slopes, generic", generic, 2, {{257, 257}}, with_slopes, reference);
}

// ---------------------------------------------------------------- heads and projections

BOOST_AUTO_TEST_CASE(grouped_query_and_multi_query) {
  constexpr auto H4 = head_dim<"H", 4>;
  const auto q4 = input<"q">(H4, NQ, Dh);
  const auto gqa_layout = [](idx_t groups) {
    return [groups](idx_t nq, idx_t nk) {
      return layout{{{"q", {4, nq, width}, true, 2.0f}, {"k", {groups, nk, width}, true, 2.0f}, {"v", {groups, nk, width}}},
                    {4, nq, width}};
    };
  };
  const auto reference = [](idx_t groups, ref::mask_pred keep) {
    return [groups, keep](const auto& in, idx_t) {
      using Acc = acc_of<decltype(in)>;
      return per_head<Acc>(in[0], in[1], in[2], 4, groups, keep);
    };
  };
  {  // GQA: 4 query heads, 2 groups, causal.
    constexpr auto G = head_dim<"G", 2>;
    const auto kg = input<"k">(G, NK, Dh);
    const auto vg = input<"v">(G, NK, Dh);
    const auto grad = attn::jit_gradients(combine(softmax(causal(scaled_scores(q4, repeat_heads(kg, H4)))), repeat_heads(vg, H4)));
    expect_gradients("GQA 4/2 causal", grad, 2, small_sizes, gqa_layout(2), reference(2, ref::causal_keep));
  }
  {  // MQA: one group for all 4 heads.
    constexpr auto G = head_dim<"G", 1>;
    const auto kg = input<"k">(G, NK, Dh);
    const auto vg = input<"v">(G, NK, Dh);
    const auto grad = attn::jit_gradients(combine(softmax(scaled_scores(q4, repeat_heads(kg, H4))), repeat_heads(vg, H4)));
    expect_gradients("MQA", grad, 2, small_sizes, gqa_layout(1), reference(1, keep_all));
  }
}

BOOST_AUTO_TEST_CASE(cross_attention_with_projections) {
  constexpr auto D = dim<"D", 16>;
  const auto grad = attn::jit_gradients(variants::cross_attention(input<"dec">(NQ, D), input<"enc">(NK, D), weight<"wq">(D, D),
                                                                  weight<"wk">(D, D), weight<"wv">(D, D)));
  const layout_fn l = [](idx_t nq, idx_t nk) {
    return layout{{{"dec", {nq, 16}}, {"enc", {nk, 16}}, {"wq", {16, 16}, false, 0.6f}, {"wk", {16, 16}, false, 0.6f},
                   {"wv", {16, 16}, false, 0.6f}},
                  {nq, 16}};
  };
  const auto reference = [](const auto& in, idx_t) { return ref::cross_attention(in[0], in[1], in[2], in[3], in[4]).output; };
  expect_gradients("cross-attention", grad, 2, {{1, 7}, {7, 3}, {5, 33}, {33, 6}}, l, reference);
}

BOOST_AUTO_TEST_CASE(multi_head_self_attention_with_output_projection) {
  constexpr auto T = dim<"T">;
  constexpr auto D = dim<"D", 16>;
  const auto grad = attn::jit_gradients(variants::multi_head_self_attention(
      input<"x">(T, D), weight<"wq">(D, D), weight<"wk">(D, D), weight<"wv">(D, D), weight<"wo">(D, D), H));
  const layout_fn l = [](idx_t t, idx_t) {
    return layout{{{"x", {t, 16}}, {"wq", {16, 16}, false, 0.6f}, {"wk", {16, 16}, false, 0.6f}, {"wv", {16, 16}, false, 0.6f},
                   {"wo", {16, 16}, false, 0.6f}},
                  {t, 16}};
  };
  const auto reference = [](const auto& in, idx_t) {
    return ref::multi_head_self_attention(in[0], in[1], in[2], in[3], in[4], heads).output;
  };
  expect_gradients("multi-head self-attention", grad, 2, small_sizes, l, reference);
}

// ---------------------------------------------------------------- other weights and scores

BOOST_AUTO_TEST_CASE(sigmoid_and_relu_attention) {
  {  // σ(s - log N_K), causal.
    const auto grad = attn::jit_gradients(variants::sigmoid_attention(causal(s), v));
    const auto reference = [](const auto& in, idx_t nk) {
      using Acc = acc_of<decltype(in)>;
      const Acc bias = static_cast<Acc>(-std::log(static_cast<double>(nk)));
      return per_head_unnormalised<Acc>(in[0], in[1], in[2], [bias](Acc x) { return ref::sigmoid<Acc>(x + bias); },
                                        ref::causal_keep);
    };
    expect_gradients("sigmoid causal", grad, 2, small_sizes, qkv_layout, reference);
  }
  {  // relu(s) / N_K.
    const auto grad = attn::jit_gradients(variants::relu_attention(s, v));
    const auto reference = [](const auto& in, idx_t nk) {
      using Acc = acc_of<decltype(in)>;
      return per_head_unnormalised<Acc>(in[0], in[1], in[2], [nk](Acc x) { return ref::relu<Acc>(x) / static_cast<Acc>(nk); });
    };
    expect_gradients("ReLU", grad, 2, small_sizes, qkv_layout, reference);
  }
}

BOOST_AUTO_TEST_CASE(bahdanau_additive) {
  constexpr auto D = dim<"D", 8>;
  constexpr auto A = dim<"A", 6>;
  const auto grad = attn::jit_gradients(variants::bahdanau(input<"s">(NQ, D), input<"h">(NK, D), weight<"w1">(D, A),
                                                           weight<"w2">(D, A), weight<"b">(A), weight<"va">(A)));
  const layout_fn l = [](idx_t nq, idx_t nk) {
    return layout{{{"s", {nq, 8}}, {"h", {nk, 8}}, {"w1", {8, 6}, false, 0.7f}, {"w2", {8, 6}, false, 0.7f}, {"b", {6}, false, 0.5f},
                   {"va", {6}, false, 1.0f}},
                  {nq, 8}};
  };
  const auto reference = [](const auto& in, idx_t) { return ref::bahdanau(in[0], in[1], in[2], in[3], in[4], in[5]).output; };
  expect_gradients("Bahdanau", grad, 2, {{1, 1}, {3, 7}, {9, 17}}, l, reference);
}

// ---------------------------------------------------------------- masked positions

namespace {

// Sets key j's rows (every head, every feature) of item b of a (B, H, N, D) tensor to x.
void set_key(tensor<float>& t, idx_t b, idx_t j, float x) {
  for (idx_t h = 0; h < t.size(1); ++h)
    for (idx_t c = 0; c < t.size(3); ++c) t(b, h, j, c) = x;
}

bool same_bits(const tensor<float>& x, const tensor<float>& y) {
  return x.sizes() == y.sizes() && std::memcmp(x.data(), y.data(), x.values().size() * sizeof(float)) == 0;
}

}  // namespace

BOOST_AUTO_TEST_CASE(masked_keys_get_exactly_zero_and_nan_there_changes_nothing) {
  const auto grad = attn::jit_gradients(padded);
  std::mt19937 rng(7);
  for (idx_t t : {7, 33}) {
    problem p(padded_layout(t, t), 3, t, rng);
    const attn::gradients d = call(grad, p);
    for (const attn::any_tensor& g : d.values) BOOST_TEST(ref::all_finite(g.as<float>()), "T=" << t);
    for (idx_t b = 0; b < 3; ++b) {
      const idx_t len = p.length(b);
      // A key past the length is masked for every query: exactly 0 in K and V.
      for (idx_t h = 0; h < heads; ++h)
        for (idx_t j = len; j < t; ++j)
          for (idx_t c = 0; c < width; ++c) {
            BOOST_TEST(d["k"](b, h, j, c) == 0.0f, "T=" << t << " item " << b << " dK key " << j);
            BOOST_TEST(d["v"](b, h, j, c) == 0.0f, "T=" << t << " item " << b << " dV key " << j);
          }
      // Length 0: every query of the item is fully masked: exactly 0 in Q.
      if (len == 0)
        for (idx_t h = 0; h < heads; ++h)
          for (idx_t i = 0; i < t; ++i)
            for (idx_t c = 0; c < width; ++c) BOOST_TEST(d["q"](b, h, i, c) == 0.0f, "T=" << t << " item " << b << " dQ query " << i);
    }
    // NaN in every masked key's K and V rows: the same gradients, bit for bit.
    for (idx_t b = 0; b < 3; ++b)
      for (idx_t j = p.length(b); j < t; ++j) {
        set_key(p.floats[1], b, j, not_a_number);
        set_key(p.floats[2], b, j, not_a_number);
      }
    const attn::gradients poisoned = call(grad, p);
    for (std::size_t i = 0; i < d.size(); ++i) {
      BOOST_TEST(ref::all_finite(poisoned.values[i].as<float>()), "T=" << t << " d" << d.names[i] << " with NaN in masked keys");
      BOOST_TEST(same_bits(poisoned.values[i].as<float>(), d.values[i].as<float>()), "T=" << t << " d" << d.names[i] << " with NaN in masked keys");
    }
  }
}

// ---------------------------------------------------------------- determinism, calls, errors

BOOST_AUTO_TEST_CASE(the_same_call_gives_the_same_bits) {
  std::mt19937 rng(11);
  {
    const auto grad = attn::jit_gradients(padded);
    const problem p(padded_layout(257, 257), 3, 257, rng);
    const attn::gradients first = call(grad, p), second = call(grad, p);
    for (std::size_t i = 0; i < first.size(); ++i) BOOST_TEST(same_bits(first.values[i].as<float>(), second.values[i].as<float>()), "d" << first.names[i]);
  }
  {  // Weights: gradients summed over the batch and the rows.
    constexpr auto T = dim<"T">;
    constexpr auto D = dim<"D", 16>;
    const auto grad = attn::jit_gradients(variants::multi_head_self_attention(
        input<"x">(T, D), weight<"wq">(D, D), weight<"wk">(D, D), weight<"wv">(D, D), weight<"wo">(D, D), H));
    std::vector<tensor<float>> in{ref::random_tensor({3, 65, 16}, rng)};
    for (int i = 0; i < 4; ++i) in.push_back(ref::random_tensor({16, 16}, rng, 0.6f));
    const tensor<float> dy = ref::random_tensor({3, 65, 16}, rng);
    const attn::gradients first = grad(dy, in[0], in[1], in[2], in[3], in[4]);
    const attn::gradients second = grad(dy, in[0], in[1], in[2], in[3], in[4]);
    for (std::size_t i = 0; i < first.size(); ++i) BOOST_TEST(same_bits(first.values[i].as<float>(), second.values[i].as<float>()), "d" << first.names[i]);
  }
}

BOOST_AUTO_TEST_CASE(named_calls_and_a_dy_shared_by_the_batch) {
  const auto grad = attn::jit_gradients(padded);
  std::mt19937 rng(13);
  problem p(padded_layout(7, 9), 3, 9, rng);
  const attn::gradients positional = call(grad, p);
  const attn::gradients named = grad(p.dy, {{"len", p.lengths}, {"v", p.floats[2]}, {"q", p.floats[0]}, {"k", p.floats[1]}});
  BOOST_TEST(named.names == positional.names, boost::test_tools::per_element());
  for (std::size_t i = 0; i < named.size(); ++i) BOOST_TEST(same_bits(named.values[i].as<float>(), positional.values[i].as<float>()), "d" << named.names[i]);
  // dY given without the batch dim serves every item, as any tensor given without it: the
  // gradients of that dY repeated for each item.
  const tensor<float> shared = ref::random_tensor({heads, 7, width}, rng);
  for (idx_t b = 0; b < 3; ++b) std::copy(shared.values().begin(), shared.values().end(), p.dy.data() + b * heads * 7 * width);
  const attn::gradients repeated = call(grad, p), once = call(grad, shared, p.views());
  for (std::size_t i = 0; i < once.size(); ++i) BOOST_TEST(same_bits(once.values[i].as<float>(), repeated.values[i].as<float>()), "d" << once.names[i]);
}

// grad.into(targets, ...): the same bits as grad(...), written into the caller's tensors (any
// strides), a tensor shared by the batch summed into one; checks name the gradient and write nothing.
BOOST_AUTO_TEST_CASE(gradients_into_the_callers_tensors) {
  const auto grad = attn::jit_gradients(padded);
  const auto forward = attn::jit(padded, {.with_lse = true});
  std::mt19937 rng(19);
  const problem p(padded_layout(33, 40), 3, 40, rng);
  const std::vector<attn::tensor_view> in = p.views();
  const attn::gradients want = call(grad, p);
  tensor<float> dq({3, heads, 33, width}), dv({3, heads, 40, width});
  // dK's rows 3 floats apart: a strided view into a larger buffer.
  tensor<float> dk_rows({3, heads, 40, width + 3}, -7.0f);
  const idx_t row = width + 3;
  const attn::tensor_view dk = attn::view(dk_rows.data(), {3, heads, 40, width}, {heads * 40 * row, 40 * row, row, 1});
  auto dk_at = [&](std::size_t j) { return dk_rows.values()[j / width * row + j % width]; };
  auto expect_want = [&](const std::string& how) {
    BOOST_TEST(same_bits(dq, want["q"]), how << ": dq");
    BOOST_TEST(same_bits(dv, want["v"]), how << ": dv");
    bool same = true;
    for (std::size_t j = 0; j < want["k"].values().size(); ++j) same = same && dk_at(j) == want["k"].values()[j];
    BOOST_TEST(same, how << ": dk");
    BOOST_TEST(dk_rows.values()[width] == -7.0f, how << ": the padding between dK's rows is untouched");
  };
  grad.into({{"v", dv}, {"q", dq}, {"k", dk}}, p.dy, in[0], in[1], in[2], in[3]);
  expect_want("positional");
  const attn::outputs y = forward.run(in[0], in[1], in[2], in[3]);
  std::fill(dq.values().begin(), dq.values().end(), 0.0f);
  grad.into({{"q", dq}, {"k", dk}, {"v", dv}}, p.dy, attn::saved{y.output, y.lse}, {{"len", in[3]}, {"q", in[0]}, {"k", in[1]}, {"v", in[2]}});
  expect_want("saved, by name");

  // A key tensor given without its batch dim serves the three items: its gradient is their sum.
  const tensor<float> k_shared = ref::random_tensor({heads, 40, width}, rng, 2.0f);
  const attn::gradients shared = grad(p.dy, in[0], k_shared, in[2], in[3]);
  tensor<float> dk_shared({heads, 40, width});
  grad.into({{"q", dq}, {"k", dk_shared}, {"v", dv}}, p.dy, in[0], k_shared, in[2], in[3]);
  BOOST_TEST(same_bits(dk_shared, shared["k"]));
  BOOST_TEST(same_bits(dq, shared["q"]));
  BOOST_CHECK_THROW(grad.into({{"q", dq}, {"k", dk}, {"v", dv}}, p.dy, in[0], k_shared, in[2], in[3]), attn::shape_error);

  // Every float tensor's gradient exactly once, shaped and typed like it, apart from the others.
  const auto fails = [&](const std::string& why, const std::string& named, auto&& f) {
    std::fill(dq.values().begin(), dq.values().end(), 5.0f);
    try {
      f();
      BOOST_ERROR(why << ": expected an error");
    } catch (const attn::error& e) {
      BOOST_TEST(std::string(e.what()).find(named) != std::string::npos, why << ": " << e.what());
    }
    BOOST_TEST(std::all_of(dq.values().begin(), dq.values().end(), [](float x) { return x == 5.0f; }), why << ": dq untouched");
  };
  tensor<float> wide({3, heads, 40, width + 1});
  tensor<attn::bfloat16> dv16({3, heads, 40, width});
  fails("no dV", "v", [&] { grad.into({{"q", dq}, {"k", dk}}, p.dy, in[0], in[1], in[2], in[3]); });
  fails("dV twice", "'v' given twice", [&] { grad.into({{"q", dq}, {"k", dk}, {"v", dv}, {"v", dv}}, p.dy, in[0], in[1], in[2], in[3]); });
  fails("an integer tensor", "'len'", [&] { grad.into({{"q", dq}, {"k", dk}, {"v", dv}, {"len", dv}}, p.dy, in[0], in[1], in[2], in[3]); });
  fails("a wider dV", "gradient of 'v'", [&] { grad.into({{"q", dq}, {"k", dk}, {"v", wide}}, p.dy, in[0], in[1], in[2], in[3]); });
  fails("a bf16 dV", "gradient of 'v'", [&] { grad.into({{"q", dq}, {"k", dk}, {"v", dv16}}, p.dy, in[0], in[1], in[2], in[3]); });
  fails("dK over dV", "overlap", [&] { grad.into({{"q", dq}, {"k", dv}, {"v", dv}}, p.dy, in[0], in[1], in[2], in[3]); });
  fails("a 32-query dY", "", [&] { grad.into({{"q", dq}, {"k", dk}, {"v", dv}}, tensor<float>({3, heads, 32, width}), in[0], in[1], in[2], in[3]); });
}

// ---------------------------------------------------------------- the fused backward

// Which backwards are fused (describe() names the attention), and that the fused gradients are the
// generic lowering's within float rounding: max |fused - generic| ≤ 2e-5 · max |generic| per tensor
// (both meet the reference's rule above, summing in other orders; measured at most ~1e-6). Every
// variant the tests above call fuses is among them, at sizes past a tile (257, 1000).
template <class E>
void expect_fused_equals_generic(const std::string& what, const E& e, idx_t batch, const std::vector<sizes>& at, const layout_fn& shapes,
                                 const std::string& schedule = "default") {
  const auto fused = attn::jit_gradients(e, {.schedule = schedule});
  const auto generic = attn::jit_gradients(e, {.path = attn::lowering::generic});
  BOOST_TEST(fused.describe().find(" backward=") != std::string::npos, what << ": " << fused.describe());
  std::mt19937 rng(29);
  for (const auto& [nq, nk] : at) {
    const problem p(shapes(nq, nk), batch, nk, rng);
    const attn::gradients f = call(fused, p), g = call(generic, p);
    for (std::size_t i = 0; i < f.size(); ++i) {
      float worst = 0, scale = 0;
      for (std::size_t j = 0; j < g.values[i].as<float>().values().size(); ++j) {
        worst = std::max(worst, std::abs(f.values[i].as<float>().values()[j] - g.values[i].as<float>().values()[j]));
        scale = std::max(scale, std::abs(g.values[i].as<float>().values()[j]));
      }
      BOOST_TEST(worst <= 2e-5f * scale, what << " (" << nq << ", " << nk << ") d" << f.names[i] << ": " << worst << " of " << scale);
    }
  }
}

// Its own ctest test (CMakeLists.txt: SPLIT), beside the rest: about half of the time of this file.
BOOST_AUTO_TEST_CASE(the_fused_backward_equals_the_generic_one, *boost::unit_test::label("fused_equals_generic")) {
  const std::vector<sizes> long_sizes{{1, 1}, {257, 257}, {1000, 1000}, {300, 1000}};
  expect_fused_equals_generic("causal", causal_attention, 2, long_sizes, qkv_layout);
  expect_fused_equals_generic("key padding", padded, 3, long_sizes, padded_layout);
  expect_fused_equals_generic("ALiBi + causal", alibi_causal, 2, {{257, 257}}, qkv_layout);
  expect_fused_equals_generic("softcap", attention(softcap(s, 2.0f)), 2, {{257, 257}}, qkv_layout);
  expect_fused_equals_generic("sliding window", attention(sliding_window(s, 5)), 2, {{257, 257}}, qkv_layout);
  // Softmax-free: f(S) and dS = dP ∘ f'(S) in the tiles, no row term.
  expect_fused_equals_generic("sigmoid causal", variants::sigmoid_attention(causal(s), v), 2, {{1, 1}, {257, 257}, {300, 1000}},
                              qkv_layout);
  expect_fused_equals_generic("ReLU, two passes", variants::relu_attention(s, v), 2, {{257, 257}}, qkv_layout, "backward_sweep=0");
  // Two passes instead of the sweep, and tiles that do not divide the sizes.
  expect_fused_equals_generic("causal, two passes", causal_attention, 2, {{1, 1}, {300, 1000}}, qkv_layout, "backward_sweep=0");
  expect_fused_equals_generic("key padding, two passes", padded, 3, {{257, 257}}, padded_layout, "backward_sweep=0 backward_q_tile=40");
  expect_fused_equals_generic("sliding window, tiles of 48", attention(sliding_window(s, 5)), 2, {{257, 257}}, qkv_layout,
                              "backward_q_tile=48");
  // Reductions: the pairs' gradients summed into a table (scatter-add) or a slope per head, per
  // tile; a table wider than a tile's rows (65 cells against tiles of 32), one shared by the heads.
  constexpr auto R = dim<"R", 9>;
  constexpr auto wide = dim<"R", 65>;
  const auto table = attention(modify(s, score + gather(weight<"t">(R, H), kv_idx - q_idx + 4, head)));
  const auto slopes = attention(causal(modify(s, score - gather(weight<"slopes">(H), head) * (q_idx - kv_idx))));
  const auto shared = attention(modify(s, score + gather(weight<"t">(wide), kv_idx - q_idx + 32)));
  const layout_fn with = [](idx_t nq, idx_t nk) {
    layout l = qkv_layout(nq, nk);
    l.params.push_back({"t", {9, heads}, false, 1.0f});
    return l;
  };
  const layout_fn with_slopes = [](idx_t nq, idx_t nk) {
    layout l = qkv_layout(nq, nk);
    l.params.push_back({"slopes", {heads}, false, 0.5f});
    return l;
  };
  const layout_fn with_shared = [](idx_t nq, idx_t nk) {
    layout l = qkv_layout(nq, nk);
    l.params.push_back({"t", {65}, false, 1.0f});
    return l;
  };
  expect_fused_equals_generic("bias table", table, 2, {{1, 1}, {257, 257}, {300, 1000}}, with);
  expect_fused_equals_generic("bias table, two passes", table, 2, {{257, 257}}, with, "backward_sweep=0");
  const auto t5 = attention(modify(s, score + gather(weight<"t">(R, H), t5_bucket<true>(8, 20), head)));
  expect_fused_equals_generic("T5 buckets", t5, 2, {{300, 1000}, {1000, 300}}, with);
  // A slope's gradient sums every pair (learned_slope_per_head checks both at 257 against the reference).
  expect_fused_equals_generic("learned slopes, tiles of 16", slopes, 2, {{33, 33}}, with_slopes, "backward_q_tile=16");
  expect_fused_equals_generic("shared table of 65, tiles of 32", shared, 2, {{257, 257}}, with_shared, "backward_q_tile=32");
  expect_fused_equals_generic("shared table of 65, two passes", shared, 2, {{300, 1000}}, with_shared,
                              "backward_sweep=0 backward_q_tile=32 kv_tile=32");
  // Sizes fixed when compiling, past a tile's end (150 against 128), the tiles reading projections
  // (Funcs bounded to those sizes) there.
  constexpr auto fixed_t = dim<"T", 150>;
  constexpr auto D = dim<"D", 16>;
  const auto fixed = variants::multi_head_self_attention(input<"x">(fixed_t, D), weight<"wq">(D, D), weight<"wk">(D, D),
                                                         weight<"wv">(D, D), weight<"wo">(D, D), H);
  const layout_fn projections = [](idx_t t, idx_t) {
    return layout{{{"x", {t, 16}}, {"wq", {16, 16}, false, 0.6f}, {"wk", {16, 16}, false, 0.6f}, {"wv", {16, 16}, false, 0.6f},
                   {"wo", {16, 16}, false, 0.6f}},
                  {t, 16}};
  };
  expect_fused_equals_generic("projections, T = 150 fixed", fixed, 2, {{150, 150}}, projections);
  // Not fused: a table whose size is known only at the call (its cells cannot be laid out per tile).
  const auto per_pair = attention(modify(s, score + gather(weight<"b">(NQ, NK), q_idx, kv_idx)));
  BOOST_TEST(attn::jit_gradients(per_pair).describe() == "path=generic");
  BOOST_CHECK_THROW(attn::jit_gradients(per_pair, {.path = attn::lowering::fused}), attn::compile_error);
}

// What the forward saved (attn::saved{output, lse}): the fused backward reads P = exp(S - lse) and
// rowsum(dY ∘ y) from it, so a call with it gives the gradients of the call without it (which
// computes them first), and an lse larger by log 2 halves P, hence dV; the generic backward only
// checks its shapes.
BOOST_AUTO_TEST_CASE(what_the_forward_saved) {
  const auto grad = attn::jit_gradients(padded);
  const auto forward = attn::jit(padded, {.with_lse = true});
  std::mt19937 rng(41);
  const problem p(padded_layout(33, 40), 3, 40, rng);
  const std::vector<attn::tensor_view> in = p.views();
  const attn::outputs y = forward.run(in[0], in[1], in[2], in[3]);
  const std::vector<attn::named_tensor> named{{"q", in[0]}, {"k", in[1]}, {"v", in[2]}, {"len", in[3]}};
  const attn::gradients with = grad(p.dy, attn::saved{y.output, y.lse}, std::span<const attn::named_tensor>(named));
  const attn::gradients without = call(grad, p);
  for (std::size_t i = 0; i < with.size(); ++i) BOOST_TEST(with.values[i].as<float>().values() == without.values[i].as<float>().values(), "d" << with.names[i]);

  tensor<float> shifted = y.lse;
  for (float& x : shifted.values()) x += std::log(2.0f);
  const attn::gradients halved = grad(p.dy, attn::saved{y.output, shifted}, in[0], in[1], in[2], in[3]);
  float worst = 0, scale = 0;
  for (std::size_t j = 0; j < with["v"].values().size(); ++j) {
    worst = std::max(worst, std::abs(halved["v"].values()[j] - 0.5f * with["v"].values()[j]));
    scale = std::max(scale, std::abs(with["v"].values()[j]));
  }
  BOOST_TEST(worst <= 1e-6f * scale, "dv from an lse + log 2: " << worst << " of " << scale);

  const auto generic = attn::jit_gradients(padded, {.path = attn::lowering::generic});
  BOOST_TEST(!generic.compiled().reads("lse"));
  const attn::gradients g = generic(p.dy, attn::saved{y.output, shifted}, in[0], in[1], in[2], in[3]);
  const attn::gradients g0 = call(generic, p);
  for (std::size_t i = 0; i < g.size(); ++i) BOOST_TEST(g.values[i].as<float>().values() == g0.values[i].as<float>().values(), "generic d" << g.names[i]);

  // Shapes checked like any tensor's, by name.
  try {
    grad(p.dy, attn::saved{y.output, tensor<float>({3, heads, 32})}, in[0], in[1], in[2], in[3]);
    BOOST_ERROR("an lse of 32 rows: expected attn::shape_error");
  } catch (const attn::shape_error& e) {
    BOOST_TEST(std::string(e.what()).find("lse") != std::string::npos, e.what());
  }
  BOOST_CHECK_THROW(grad(p.dy, attn::saved{p.dy, tensor<float>({3, heads, 33, 1})}, in[0], in[1], in[2], in[3]), attn::shape_error);
  BOOST_CHECK_THROW(grad(p.dy, attn::saved{tensor<float>({3, heads, 33, width + 1}), y.lse}, in[0], in[1], in[2], in[3]), attn::shape_error);
  // Two softmaxes: no one lse to save.
  const auto two = attn::jit_gradients(attention(s) + attention(causal(s)));
  BOOST_CHECK_THROW(two(p.dy, attn::saved{y.output, y.lse}, in[0], in[1], in[2]), attn::argument_error);
  // The names the gradient's call gives to what the forward saved.
  BOOST_CHECK_THROW(attn::jit_gradients(combine(softmax(scaled_scores(q, input<"lse">(H, NK, Dh))), v)), attn::argument_error);
}

BOOST_AUTO_TEST_CASE(errors) {
  BOOST_CHECK_THROW(attn::jit_gradients(plain, {.with_weights = true}), attn::argument_error);
  BOOST_CHECK_THROW(attn::jit_gradients(plain, {.with_lse = true}), attn::argument_error);

  const auto grad = attn::jit_gradients(padded);
  std::mt19937 rng(17);
  const problem p(padded_layout(7, 7), 3, 7, rng);
  // dY not shaped like the output (3, H, 7, Dh): another query count, another width, a missing
  // axis, another batch.
  for (const std::vector<idx_t>& wrong : {std::vector<idx_t>{3, heads, 8, width}, std::vector<idx_t>{3, heads, 7, width + 1},
                                          std::vector<idx_t>{3, heads, 7}, std::vector<idx_t>{1, heads, 7, width}})
    BOOST_CHECK_THROW(call(grad, tensor<float>(wrong), p.views()), attn::shape_error);
  const attn::gradients d = call(grad, p);
  BOOST_TEST(d.size() == 3u);
  BOOST_CHECK_THROW(d["nope"], attn::argument_error);
  BOOST_CHECK_THROW(d["len"], attn::argument_error);  // an integer tensor has no gradient
}
