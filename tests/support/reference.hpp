#pragma once
// An independent plain C++ reference for the tests, written from the math of the seeds and
// not from the DSL: nested loops over small dense matrices, no Halide, no expression types.
//
// Every function is a template over the arithmetic type Acc:
//   Acc = double  the reference the kernels are judged against (double accumulation);
//   Acc = float   the "naive float" implementation of the same algorithm, whose error against
//                 the double reference sets the tolerance (FlashAttention's rule: a float kernel
//                 may be at most about twice as wrong as a naive float implementation on the
//                 same inputs, plus a small absolute floor).
//
//   Acc = ad::var the same algorithm on a reverse-mode differentiation tape (support/reference_gradient.hpp),
//                 whose gradients are the reference for the backward pass.
// So that all three work, the math functions are called unqualified after `using std::exp;` (ADL
// finds ad::exp), conversions are static_casts, and -∞ comes from minus_infinity<Acc>().
//
// The reference works on one batch item at a time; `item` slices a batch item out of a tensor
// that may or may not carry a leading batch dim.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>
#include "runtime/tensor.hpp"

namespace attn::ref {

using index = std::int64_t;

// A dense row-major matrix; a vector is a 1 × n matrix.
template <class Acc>
struct mat {
  index rows = 0, cols = 0;
  std::vector<Acc> a;

  mat() = default;
  mat(index r, index c, Acc fill = Acc{}) : rows(r), cols(c), a(static_cast<std::size_t>(r * c), fill) {}

  Acc& operator()(index i, index j) { return a[static_cast<std::size_t>(i * cols + j)]; }
  const Acc& operator()(index i, index j) const { return a[static_cast<std::size_t>(i * cols + j)]; }
  index size() const { return rows * cols; }
};

// ---------------------------------------------------------------- tensors in and out

inline index elements(const std::vector<index>& sizes) {
  index n = 1;
  for (index s : sizes) n *= s;
  return n;
}

// The sizes with a leading batch dim B, or without one when B == 0.
inline std::vector<index> with_batch(index batch, std::vector<index> sizes) {
  if (batch > 0) sizes.insert(sizes.begin(), batch);
  return sizes;
}

// Batch item b of t as a matrix. t has rank item_rank (no batch dim: the whole tensor, b ignored)
// or item_rank + 1 (a leading batch dim). Rank 1 items become 1 × n matrices, rank 0 items 1 × 1.
template <class Acc>
mat<Acc> item(const tensor<float>& t, index b, int item_rank) {
  std::vector<index> s = t.sizes();
  index offset = 0;
  if (t.rank() == item_rank + 1) {
    if (b < 0 || b >= s.front()) throw std::out_of_range("ref::item: batch index out of range");
    s.erase(s.begin());
    offset = b * elements(s);
  } else if (t.rank() != item_rank) {
    throw std::invalid_argument("ref::item: tensor rank " + std::to_string(t.rank()) + " is neither " +
                                std::to_string(item_rank) + " nor " + std::to_string(item_rank + 1));
  }
  index cols = s.empty() ? 1 : s.back();
  index rows = cols == 0 ? 0 : elements(s) / cols;
  mat<Acc> m(rows, cols);
  for (index i = 0; i < m.size(); ++i)
    m.a[static_cast<std::size_t>(i)] = static_cast<Acc>(t.data()[static_cast<std::size_t>(offset + i)]);
  return m;
}

// Entry b of a lengths tensor: shape (B), or rank 0 for an unbatched call.
inline index length_at(const tensor<std::int32_t>& lengths, index b) {
  return lengths.rank() == 0 ? lengths.data()[0] : lengths.data()[static_cast<std::size_t>(b)];
}

// Uniform random values in [-scale, scale], from a seeded std::mt19937: reproducible.
inline void fill_uniform(tensor<float>& t, std::mt19937& rng, float scale = 1.0f) {
  std::uniform_real_distribution<float> u(-scale, scale);
  for (float& v : t.values()) v = u(rng);
}

inline tensor<float> random_tensor(std::vector<index> sizes, std::mt19937& rng, float scale = 1.0f) {
  tensor<float> t(std::move(sizes));
  fill_uniform(t, rng, scale);
  return t;
}

// -∞ as an Acc, through double: also for an Acc without std::numeric_limits (ad::var).
template <class Acc>
Acc minus_infinity() {
  return static_cast<Acc>(-std::numeric_limits<double>::infinity());
}

// ---------------------------------------------------------------- linear algebra

template <class Acc>
mat<Acc> matmul(const mat<Acc>& x, const mat<Acc>& y) {
  if (x.cols != y.rows) throw std::invalid_argument("ref::matmul: inner sizes differ");
  mat<Acc> r(x.rows, y.cols);
  for (index i = 0; i < x.rows; ++i)
    for (index j = 0; j < y.cols; ++j) {
      Acc s = 0;
      for (index k = 0; k < x.cols; ++k) s += x(i, k) * y(k, j);
      r(i, j) = s;
    }
  return r;
}

template <class Acc>
mat<Acc> transpose(const mat<Acc>& x) {
  mat<Acc> r(x.cols, x.rows);
  for (index i = 0; i < x.rows; ++i)
    for (index j = 0; j < x.cols; ++j) r(j, i) = x(i, j);
  return r;
}

// Columns [first, first + count) of x.
template <class Acc>
mat<Acc> columns(const mat<Acc>& x, index first, index count) {
  mat<Acc> r(x.rows, count);
  for (index i = 0; i < x.rows; ++i)
    for (index j = 0; j < count; ++j) r(i, j) = x(i, first + j);
  return r;
}

// Softmax of each row: exp(s - max) / Σ exp(s - max). A row of only -inf (fully masked) is all 0.
template <class Acc>
mat<Acc> softmax_rows(const mat<Acc>& s) {
  using std::exp, std::max;
  const Acc minus_inf = minus_infinity<Acc>();
  mat<Acc> w(s.rows, s.cols, Acc{0});
  for (index i = 0; i < s.rows; ++i) {
    Acc m = minus_inf;
    for (index j = 0; j < s.cols; ++j) m = max(m, s(i, j));
    if (m == minus_inf) continue;
    Acc sum = 0;
    for (index j = 0; j < s.cols; ++j) sum += (w(i, j) = exp(s(i, j) - m));
    for (index j = 0; j < s.cols; ++j) w(i, j) /= sum;
  }
  return w;
}

// The log-sum-exp of each row, log Σ_j exp(s_ij), as a column (rows × 1): max + log Σ exp(s - max).
// -inf scores (masked keys) add nothing; a row of only -inf (fully masked) gives -inf.
template <class Acc>
mat<Acc> log_sum_exp_rows(const mat<Acc>& s) {
  using std::exp, std::log, std::max;
  const Acc minus_inf = minus_infinity<Acc>();
  mat<Acc> r(s.rows, 1, minus_inf);
  for (index i = 0; i < s.rows; ++i) {
    Acc m = minus_inf;
    for (index j = 0; j < s.cols; ++j) m = max(m, s(i, j));
    if (m == minus_inf) continue;
    Acc sum = 0;
    for (index j = 0; j < s.cols; ++j) sum += exp(s(i, j) - m);
    r(i, 0) = m + log(sum);
  }
  return r;
}

// ---------------------------------------------------------------- attention

// A score modifier f(score, q_idx, kv_idx, head) and a mask predicate keep(q_idx, kv_idx, head).
// A generic lambda converts to score_mod<double> and score_mod<float> alike.
template <class Acc>
using score_mod = std::function<Acc(Acc score, index q, index kv, index head)>;
using mask_pred = std::function<bool(index q, index kv, index head)>;

template <class Acc>
struct result {
  mat<Acc> output;
  mat<Acc> weights;  // the softmax output; heads stacked along the rows for multi-head variants
  mat<Acc> lse;      // each row's log-sum-exp of its scores (rows × 1), heads stacked as the weights
};

// Attention from scores: softmax over each row (after the modifier, then the mask), times V.
template <class Acc>
result<Acc> attend(mat<Acc> scores, const mat<Acc>& v, const mask_pred& keep = {}, const score_mod<Acc>& mod = {},
                   index head = 0) {
  for (index i = 0; i < scores.rows; ++i)
    for (index j = 0; j < scores.cols; ++j) {
      if (mod) scores(i, j) = mod(scores(i, j), i, j, head);
      if (keep && !keep(i, j, head)) scores(i, j) = minus_infinity<Acc>();
    }
  result<Acc> r;
  r.weights = softmax_rows(scores);
  r.lse = log_sum_exp_rows(scores);
  r.output = matmul(r.weights, v);
  return r;
}

// Softmax-free attention (sigmoid, ReLU attention): each weight is f(score) on its own (after the
// modifier), exactly 0 for a key the mask removes; output = W·V, no normalisation over the keys.
template <class Acc>
result<Acc> attend_unnormalised(const mat<Acc>& scores, const mat<Acc>& v, const std::function<Acc(Acc)>& f,
                                const mask_pred& keep = {}, const score_mod<Acc>& mod = {}, index head = 0) {
  result<Acc> r;
  r.weights = mat<Acc>(scores.rows, scores.cols);
  for (index i = 0; i < scores.rows; ++i)
    for (index j = 0; j < scores.cols; ++j) {
      const Acc s = mod ? mod(scores(i, j), i, j, head) : scores(i, j);
      r.weights(i, j) = keep && !keep(i, j, head) ? Acc{0} : f(s);
    }
  r.output = matmul(r.weights, v);
  return r;
}

template <class Acc>
Acc sigmoid(Acc x) {
  using std::exp;
  return Acc{1} / (Acc{1} + exp(-x));
}
template <class Acc>
Acc relu(Acc x) { return x > Acc{0} ? x : Acc{0}; }

// softmax(scale · Q·Kᵀ [modified] [masked])·V
template <class Acc>
result<Acc> scaled_dot_product(const mat<Acc>& q, const mat<Acc>& k, const mat<Acc>& v, double scale,
                               const mask_pred& keep = {}, const score_mod<Acc>& mod = {}, index head = 0) {
  mat<Acc> s = matmul(q, transpose(k));
  for (Acc& e : s.a) e *= static_cast<Acc>(scale);
  return attend(std::move(s), v, keep, mod, head);
}

inline double inv_sqrt(index d) { return 1.0 / std::sqrt(static_cast<double>(d)); }

// H heads over the columns of Q, K, V: head h uses columns [h·D/H, (h+1)·D/H), scale 1/√(D/H);
// the heads' outputs are concatenated back into columns. Weights: head h's rows at h·N_Q.
template <class Acc>
result<Acc> multi_head(const mat<Acc>& q, const mat<Acc>& k, const mat<Acc>& v, index heads, const mask_pred& keep = {},
                       const score_mod<Acc>& mod = {}) {
  if (q.cols % heads != 0 || v.cols % heads != 0) throw std::invalid_argument("ref::multi_head: width not divisible");
  const index dq = q.cols / heads, dv = v.cols / heads;
  result<Acc> r{mat<Acc>(q.rows, v.cols), mat<Acc>(heads * q.rows, k.rows), mat<Acc>(heads * q.rows, 1)};
  for (index h = 0; h < heads; ++h) {
    result<Acc> one = scaled_dot_product(columns(q, h * dq, dq), columns(k, h * dq, dq), columns(v, h * dv, dv),
                                         inv_sqrt(dq), keep, mod, h);
    for (index i = 0; i < q.rows; ++i) {
      for (index j = 0; j < dv; ++j) r.output(i, h * dv + j) = one.output(i, j);
      for (index j = 0; j < k.rows; ++j) r.weights(h * q.rows + i, j) = one.weights(i, j);
      r.lse(h * q.rows + i, 0) = one.lse(i, 0);
    }
  }
  return r;
}

// Grouped-query: Q has H heads of Dh columns; K and V have G groups of Dh columns, query head h
// using group h / (H / G). Written by copying each head's group into an H-head K and V.
template <class Acc>
result<Acc> grouped_query(const mat<Acc>& q, const mat<Acc>& k, const mat<Acc>& v, index heads, index groups,
                          const mask_pred& keep = {}, const score_mod<Acc>& mod = {}) {
  const index dh = k.cols / groups;
  mat<Acc> ke(k.rows, heads * dh), ve(v.rows, heads * dh);
  for (index h = 0; h < heads; ++h)
    for (index i = 0; i < k.rows; ++i)
      for (index j = 0; j < dh; ++j) {
        ke(i, h * dh + j) = k(i, (h / (heads / groups)) * dh + j);
        ve(i, h * dh + j) = v(i, (h / (heads / groups)) * dh + j);
      }
  return multi_head(q, ke, ve, heads, keep, mod);
}

// ---------------------------------------------------------------- the named variants

// Simplified: y = softmax(q·Xᵀ/√D)·X; q is 1 × D (a vector) or N_Q × D.
template <class Acc>
result<Acc> simplified(const mat<Acc>& q, const mat<Acc>& x, const mask_pred& keep = {}, const score_mod<Acc>& mod = {}) {
  return scaled_dot_product(q, x, x, inv_sqrt(x.cols), keep, mod);
}

// Standard: Q' = Q·W_Q, K = X·W_K, V = X·W_V; softmax(Q'·Kᵀ/√d_k)·V.
template <class Acc>
result<Acc> standard(const mat<Acc>& q, const mat<Acc>& x, const mat<Acc>& wq, const mat<Acc>& wk, const mat<Acc>& wv,
                     const mask_pred& keep = {}, const score_mod<Acc>& mod = {}) {
  return scaled_dot_product(matmul(q, wq), matmul(x, wk), matmul(x, wv), inv_sqrt(wk.cols), keep, mod);
}

template <class Acc>
result<Acc> self_attention(const mat<Acc>& x, const mat<Acc>& wq, const mat<Acc>& wk, const mat<Acc>& wv,
                           const mask_pred& keep = {}, const score_mod<Acc>& mod = {}) {
  return standard(x, x, wq, wk, wv, keep, mod);
}

template <class Acc>
result<Acc> cross_attention(const mat<Acc>& decoder, const mat<Acc>& encoder, const mat<Acc>& wq, const mat<Acc>& wk,
                            const mat<Acc>& wv) {
  return standard(decoder, encoder, wq, wk, wv);
}

// Token i sees tokens 0..i.
inline bool causal_keep(index q, index kv, index) { return kv <= q; }

template <class Acc>
result<Acc> causal_self_attention(const mat<Acc>& x, const mat<Acc>& wq, const mat<Acc>& wk, const mat<Acc>& wv) {
  return standard(x, x, wq, wk, wv, causal_keep);
}

// Multi-head self-attention: per-head attention on column blocks of X·W_Q, X·W_K, X·W_V,
// concatenated, then projected by W_O.
template <class Acc>
result<Acc> multi_head_self_attention(const mat<Acc>& x, const mat<Acc>& wq, const mat<Acc>& wk, const mat<Acc>& wv,
                                      const mat<Acc>& wo, index heads, const mask_pred& keep = {},
                                      const score_mod<Acc>& mod = {}) {
  result<Acc> r = multi_head(matmul(x, wq), matmul(x, wk), matmul(x, wv), heads, keep, mod);
  r.output = matmul(r.output, wo);
  return r;
}

// Luong dot (unscaled): e_ij = s_i·h_j; c_i = Σ_j α_ij h_j.
template <class Acc>
result<Acc> luong_dot(const mat<Acc>& s, const mat<Acc>& h) {
  return scaled_dot_product(s, h, h, 1.0);
}

// Luong general: e_ij = s_iᵀ·W·h_j.
template <class Acc>
result<Acc> luong_general(const mat<Acc>& s, const mat<Acc>& h, const mat<Acc>& w) {
  return scaled_dot_product(matmul(s, w), h, h, 1.0);
}

// Bahdanau additive: e_ij = Σ_a v[a]·tanh((s·W1)[i,a] + (h·W2)[j,a] + b[a]); c_i = Σ_j α_ij h_j.
// b and v are 1 × A.
template <class Acc>
result<Acc> bahdanau(const mat<Acc>& s, const mat<Acc>& h, const mat<Acc>& w1, const mat<Acc>& w2, const mat<Acc>& b,
                     const mat<Acc>& v) {
  using std::tanh;
  const mat<Acc> ps = matmul(s, w1), ph = matmul(h, w2);
  const index a_dim = w1.cols;
  mat<Acc> e(s.rows, h.rows);
  for (index i = 0; i < s.rows; ++i)
    for (index j = 0; j < h.rows; ++j) {
      Acc sum = 0;
      for (index a = 0; a < a_dim; ++a) sum += v(0, a) * tanh(ps(i, a) + ph(j, a) + b(0, a));
      e(i, j) = sum;
    }
  return attend(std::move(e), h);
}

// ALiBi slope of head h of H: m_h = 2^(-8(h+1)/H); the modifier adds -m_h·(q - kv).
// The ALiBi paper's slopes (its reference get_slopes): a power of two P <= heads gets
// 2^(-8(h+1)/P); the heads past P take every other slope of 2P heads.
inline double alibi_slope(index h, index heads) {
  index p = 1;
  while (p * 2 <= heads) p *= 2;
  if (h < p) return std::exp2(-8.0 * static_cast<double>(h + 1) / static_cast<double>(p));
  return std::exp2(-8.0 * static_cast<double>(2 * (h - p) + 1) / static_cast<double>(2 * p));
}

// ---------------------------------------------------------------- error metrics

// Largest |got - want| over n values. NaN or inf in `got` gives +inf (never passes a tolerance),
// unless `want` is the same infinity (a log-sum-exp of -inf: a row without a kept key).
template <class Acc>
double max_abs_error(const float* got, index n, const mat<Acc>& want, index* worst = nullptr) {
  if (want.size() != n) throw std::invalid_argument("ref::max_abs_error: sizes differ");
  double e = 0;
  for (index i = 0; i < n; ++i) {
    const double w = static_cast<double>(want.a[static_cast<std::size_t>(i)]);
    double d = std::isinf(w) && static_cast<double>(got[i]) == w ? 0.0 : std::abs(static_cast<double>(got[i]) - w);
    if (!std::isfinite(d)) d = std::numeric_limits<double>::infinity();
    if (d > e) {
      e = d;
      if (worst) *worst = i;
    }
  }
  return e;
}

template <class Acc>
double max_abs(const mat<Acc>& m) {
  double r = 0;
  for (Acc v : m.a)
    if (std::isfinite(static_cast<double>(v))) r = std::max(r, std::abs(static_cast<double>(v)));  // the scale of finite values
  return r;
}

// The tolerance rule of these tests, in one place:
//   kernel error ≤ 2 · (naive float error) + floor,  floor = floor_rel · max(1, max |reference|).
// The floor covers inputs where the naive float happens to be (nearly) exact (one key: a weight
// of exactly 1) while the kernel sums in another order; 1e-6 is ~8 float ulps of an O(1) output.
// Measured on the reference CPU schedule: the worst kernel error is 1.5x the naive float's and
// at most 0.31 of this tolerance; a 0.1% change of the score scale already fails it.
struct comparison {
  double kernel_error = 0, naive_error = 0, tolerance = 0;
  index worst = 0;
  bool ok = false;

  std::string describe() const {
    std::ostringstream s;
    s << "kernel error " << kernel_error << " (at flat index " << worst << "), naive float error " << naive_error
      << ", tolerance 2*naive+floor = " << tolerance;
    return s.str();
  }
};

inline constexpr double default_floor = 1e-6;

inline comparison compare(const float* got, index n, const mat<double>& reference, const mat<float>& naive,
                          double floor_rel = default_floor) {
  comparison c;
  c.kernel_error = max_abs_error(got, n, reference, &c.worst);
  std::vector<float> naive_values(naive.a.begin(), naive.a.end());
  c.naive_error = max_abs_error(naive_values.data(), n, reference);
  c.tolerance = 2.0 * c.naive_error + floor_rel * std::max(1.0, max_abs(reference));
  c.ok = c.kernel_error <= c.tolerance;
  return c;
}

// A kernel's output for variants::simplified(x, x) (self-attention without projections) on an
// unbatched x (T, D), compared with the double reference and the naive float one.
inline comparison compare_simplified_self(const tensor<float>& got, const tensor<float>& x) {
  if (got.values().size() != x.values().size()) throw std::invalid_argument("ref::compare_simplified_self: sizes differ");
  const mat<double> r = simplified(item<double>(x, 0, 2), item<double>(x, 0, 2)).output;
  const mat<float> f = simplified(item<float>(x, 0, 2), item<float>(x, 0, 2)).output;
  return compare(got.data(), r.size(), r, f);
}

// Largest |a - b| between two float arrays (for "same result" properties); NaN gives +inf.
inline double max_abs_difference(const float* x, const float* y, index n) {
  double e = 0;
  for (index i = 0; i < n; ++i) {
    double d = std::abs(static_cast<double>(x[i]) - static_cast<double>(y[i]));
    if (!std::isfinite(d)) d = std::numeric_limits<double>::infinity();
    e = std::max(e, d);
  }
  return e;
}

inline bool all_finite(const tensor<float>& t) {
  return std::all_of(t.values().begin(), t.values().end(), [](float v) { return std::isfinite(v); });
}

inline std::string to_string(const std::vector<index>& sizes) {
  std::string s = "(";
  for (std::size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + ")";
}

}  // namespace attn::ref
