#pragma once
// Exact gradients of the reference (support/reference.hpp), for judging a backward pass.
//
// ad::var is a double that records every operation on a tape (reverse-mode automatic
// differentiation). The reference's templates instantiated with Acc = ad::var run the very same
// double operations as Acc = double, so their values are bit-for-bit the double reference's, and
// one reverse sweep over the tape gives the gradient of that computation, exact up to double
// rounding: no step size, no truncation error.
//
// Conventions where the derivative is not defined, PyTorch's:
//   abs'(0) = 0; ref::relu'(0) = 0 (torch.relu); sqrt'(0) = +inf;
//   max(a, b) and min(a, b) at a tie give each side half the gradient (torch.maximum, torch.minimum),
//   so max(x, 0) passes 1/2 at x = 0 where ref::relu passes 0.
// max and min return what std::max and std::min return, NaN operands included, and the operand
// returned gets the gradient.
//
// One rule that is not PyTorch's, for masking: a local partial derivative or an adjoint that is
// exactly 0 passes nothing back, whatever the other factor is (inf and NaN included).
//  - A key the mask removes has score -inf and weight exp(-inf - m) = 0: exp's partial there is 0,
//    so nothing reaches the score, and no NaN comes from 0 · inf.
//  - Its V row is multiplied by a weight of exactly 0, so it gets gradient 0. If that row holds NaN
//    (the forward output is then NaN, as in the double reference), the NaN it puts in the weight's
//    adjoint stops at that exp instead of spreading over the whole row through the softmax's
//    normalisation (PyTorch's autograd gives NaN there).
//  - Nodes that do not reach the outputs keep adjoint 0 and pass nothing, even through an infinite
//    partial (a sqrt(0) computed on the side).
// The rule holds everywhere, not only at masks; it changes a result only where an inf or NaN meets
// an exact 0 (a tanh saturated to exactly ±1 under a NaN adjoint also passes 0, PyTorch NaN).
// A fully masked row's weights and log-sum-exp are constants (no node): its query gets gradient 0.
//
// ad::basic_var<T> is the same over another value type; ad::var is basic_var<double>. With
// basic_var<float> every operation and the reverse sweep run in float: the reference's templates
// give Acc = float's values, bit for bit, and their gradients are the naive float backward pass,
// whose error against the double one sets a float backward pass's tolerance, as the naive float
// forward does the forward's. A tape, its vars and its adjoints share one value type (ad::tape,
// ad::adjoints: double).
//
// Vars belong to the tape that was active where they were made; a tape is active from its
// construction to its destruction (RAII, one active tape per thread, scopes nest). Constants
// (a var made from a double) belong to no tape and mix with any.
#include <atomic>
#include <cmath>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>
#include "reference.hpp"

namespace attn::ref::ad {

template <class T>
class basic_var;
template <class T>
class basic_adjoints;

// The record of one differentiation: one node per operation on non-constant vars, in program
// order, each with its (at most two) operands and the partial derivatives with respect to them.
template <class T>
class basic_tape {
 public:
  using var = basic_var<T>;
  using adjoints = basic_adjoints<T>;

  basic_tape() : serial_(next_serial()), previous_(active_) { active_ = this; }
  ~basic_tape() { active_ = previous_; }
  basic_tape(const basic_tape&) = delete;
  basic_tape& operator=(const basic_tape&) = delete;

  // The tape operations record on now; throws std::logic_error outside any tape scope.
  static basic_tape& active() {
    if (!active_) throw std::logic_error("ad: an operation on variables outside any ad::tape scope");
    return *active_;
  }

  std::size_t size() const { return nodes_.size(); }

  // ∂L/∂(every var of this tape) for L = Σ_k seeds[k] · ys[k], by one sweep from the last node to
  // the first (a node's adjoint is complete before it is passed on: operands precede results).
  // The seeds are rounded to T; the sweep runs in T.
  adjoints backward(const std::vector<var>& ys, const std::vector<double>& seeds) const;
  // The same for L = Σ dy ∘ y.
  adjoints backward(const mat<var>& y, const mat<double>& dy) const;
  // The same for L = y.
  adjoints backward(const var& y) const;

 private:
  friend class basic_var<T>;

  struct edge {
    std::int64_t operand = -1;  // node index, -1: none (a constant operand records no edge)
    T partial = 0;
  };
  struct node {
    edge a, b;
  };

  // The edge from a new node to operand x: none for a constant.
  edge edge_to(const var& x, T partial) const;

  static std::uint64_t next_serial() {
    static std::atomic<std::uint64_t> last{0};
    return ++last;
  }

  std::uint64_t serial_;  // names this tape in its vars: a var used on another tape is an error
  basic_tape* previous_;
  std::vector<node> nodes_;
  inline static thread_local basic_tape* active_ = nullptr;
};

// A T with its place on a tape. Arithmetic, comparisons and the math functions below accept
// plain numbers on either side (they convert to constants).
template <class T>
class basic_var {
 public:
  using value_type = T;
  using tape = basic_tape<T>;

  basic_var() = default;  // the constant 0
  basic_var(T value) : value_(value) {}  // implicit: a constant, so that numbers mix with vars

  // An independent variable: a new leaf on the active tape.
  static basic_var variable(T value) {
    tape& t = tape::active();
    return push(t, value, {});
  }

  // The result of an operation: its value and its partial derivatives with respect to its
  // operands a and b. Without a non-constant operand it is a constant and needs no tape.
  static basic_var record(T value, const basic_var& a, T da, const basic_var& b, T db) {
    if (a.is_constant() && b.is_constant()) return basic_var(value);
    tape& t = tape::active();
    return push(t, value, {t.edge_to(a, da), t.edge_to(b, db)});
  }
  static basic_var record(T value, const basic_var& a, T da) { return record(value, a, da, basic_var(), 0); }

  T value() const { return value_; }
  explicit operator T() const { return value_; }
  bool is_constant() const { return node_ < 0; }

  friend basic_var operator+(const basic_var& a) { return a; }
  friend basic_var operator-(const basic_var& a) { return record(-a.value_, a, -1); }
  friend basic_var operator+(const basic_var& a, const basic_var& b) { return record(a.value_ + b.value_, a, 1, b, 1); }
  friend basic_var operator-(const basic_var& a, const basic_var& b) { return record(a.value_ - b.value_, a, 1, b, -1); }
  friend basic_var operator*(const basic_var& a, const basic_var& b) { return record(a.value_ * b.value_, a, b.value_, b, a.value_); }
  friend basic_var operator/(const basic_var& a, const basic_var& b) {
    const T q = a.value_ / b.value_;
    return record(q, a, T{1} / b.value_, b, -q / b.value_);
  }
  basic_var& operator+=(const basic_var& b) { return *this = *this + b; }
  basic_var& operator-=(const basic_var& b) { return *this = *this - b; }
  basic_var& operator*=(const basic_var& b) { return *this = *this * b; }
  basic_var& operator/=(const basic_var& b) { return *this = *this / b; }

  // Comparisons are by value, as the plain reference's.
  friend bool operator==(const basic_var& a, const basic_var& b) { return a.value_ == b.value_; }
  friend std::partial_ordering operator<=>(const basic_var& a, const basic_var& b) { return a.value_ <=> b.value_; }

  // ---- math functions, found by ADL (hidden friends: a plain number converts on either side)

  friend basic_var exp(const basic_var& x) {
    const T e = std::exp(x.value_);
    return record(e, x, e);
  }

  friend basic_var log(const basic_var& x) { return record(std::log(x.value_), x, T{1} / x.value_); }

  friend basic_var tanh(const basic_var& x) {
    const T t = std::tanh(x.value_);
    return record(t, x, T{1} - t * t);
  }

  // sqrt'(0) = +inf.
  friend basic_var sqrt(const basic_var& x) {
    const T r = std::sqrt(x.value_);
    return record(r, x, T{0.5} / r);
  }

  // abs'(0) = 0 (and NaN at NaN).
  friend basic_var abs(const basic_var& x) {
    const T v = x.value_;
    const T sign = v > 0 ? T{1} : v < 0 ? T{-1} : v == 0 ? T{0} : v;
    return record(std::abs(v), x, sign);
  }

  // std::max's value; the larger operand gets the gradient, half each at a tie (torch.maximum).
  friend basic_var max(const basic_var& a, const basic_var& b) {
    const T x = a.value_, y = b.value_;
    if (x == y) return record(x, a, T{0.5}, b, T{0.5});
    return x < y ? record(y, b, 1) : record(x, a, 1);
  }

  // std::min's value; the smaller operand gets the gradient, half each at a tie (torch.minimum).
  friend basic_var min(const basic_var& a, const basic_var& b) {
    const T x = a.value_, y = b.value_;
    if (x == y) return record(x, a, T{0.5}, b, T{0.5});
    return y < x ? record(y, b, 1) : record(x, a, 1);
  }

 private:
  friend class basic_tape<T>;
  friend class basic_adjoints<T>;

  static basic_var push(tape& t, T value, const typename tape::node& n) {
    t.nodes_.push_back(n);
    basic_var r(value);
    r.node_ = static_cast<std::int64_t>(t.nodes_.size()) - 1;
    r.tape_ = t.serial_;
    return r;
  }

  T value_ = 0;
  std::int64_t node_ = -1;  // index on the tape named by tape_; -1: a constant
  std::uint64_t tape_ = 0;
};

// ∂L/∂x for the vars of one tape, from tape::backward.
template <class T>
class basic_adjoints {
 public:
  T operator()(const basic_var<T>& x) const {
    if (x.is_constant()) return 0;
    if (x.tape_ != serial_) throw std::logic_error("ad::adjoints: a variable of another tape");
    return values_[static_cast<std::size_t>(x.node_)];
  }
  mat<T> operator()(const mat<basic_var<T>>& x) const {
    mat<T> g(x.rows, x.cols);
    for (std::size_t i = 0; i < x.a.size(); ++i) g.a[i] = (*this)(x.a[i]);
    return g;
  }

 private:
  friend class basic_tape<T>;
  basic_adjoints(std::uint64_t serial, std::vector<T> values) : serial_(serial), values_(std::move(values)) {}

  std::uint64_t serial_;
  std::vector<T> values_;  // one per node
};

// The reference's value type: double.
using var = basic_var<double>;
using tape = basic_tape<double>;
using adjoints = basic_adjoints<double>;

// ---------------------------------------------------------------- the tape's sweep

template <class T>
typename basic_tape<T>::edge basic_tape<T>::edge_to(const var& x, T partial) const {
  if (x.is_constant()) return {};
  if (x.tape_ != serial_) throw std::logic_error("ad: a variable used outside the tape it was made on");
  return {x.node_, partial};
}

template <class T>
basic_adjoints<T> basic_tape<T>::backward(const std::vector<var>& ys, const std::vector<double>& seeds) const {
  if (ys.size() != seeds.size()) throw std::invalid_argument("ad::tape::backward: as many seeds as outputs");
  std::vector<T> adj(nodes_.size(), T{0});
  for (std::size_t k = 0; k < ys.size(); ++k) {
    const edge e = edge_to(ys[k], static_cast<T>(seeds[k]));
    if (e.operand >= 0) adj[static_cast<std::size_t>(e.operand)] += e.partial;
  }
  for (std::size_t i = nodes_.size(); i-- > 0;) {
    const T a = adj[i];
    if (a == 0) continue;  // the masking rule: an adjoint of exactly 0 passes nothing
    for (const edge& e : {nodes_[i].a, nodes_[i].b})
      if (e.operand >= 0 && e.partial != 0)  // the masking rule: a partial of exactly 0 passes nothing
        adj[static_cast<std::size_t>(e.operand)] += a * e.partial;
  }
  return adjoints(serial_, std::move(adj));
}

template <class T>
basic_adjoints<T> basic_tape<T>::backward(const mat<var>& y, const mat<double>& dy) const {
  if (y.rows != dy.rows || y.cols != dy.cols) throw std::invalid_argument("ad::tape::backward: dy's shape is not y's");
  return backward(y.a, dy.a);
}

template <class T>
basic_adjoints<T> basic_tape<T>::backward(const var& y) const {
  return backward(std::vector<var>{y}, std::vector<double>{1.0});
}

// ---------------------------------------------------------------- matrices

// Each entry a new independent variable on the active tape of value type T (rounded to T).
template <class T = double>
mat<basic_var<T>> variables(const mat<double>& x) {
  mat<basic_var<T>> r(x.rows, x.cols);
  for (std::size_t i = 0; i < x.a.size(); ++i) r.a[i] = basic_var<T>::variable(static_cast<T>(x.a[i]));
  return r;
}

template <class T>
mat<T> values(const mat<basic_var<T>>& x) {
  mat<T> r(x.rows, x.cols);
  for (std::size_t i = 0; i < x.a.size(); ++i) r.a[i] = x.a[i].value();
  return r;
}

}  // namespace attn::ref::ad

namespace attn::ref {

// The gradient of L = Σ dy ∘ f(inputs) with respect to each input, by ad::basic_var<T> on a tape of
// its own: T = double, the reference gradient; T = float, the naive float one (inputs and dy
// rounded to float, every operation and the sweep in float).
// f: const std::vector<mat<ad::basic_var<T>>>& -> mat<ad::basic_var<T>>, usually a generic lambda
// that calls the reference. A table that f reads (ALiBi slopes, say) gets a gradient when it is one
// of the inputs; one that f captures as a mat<double> is a constant.
template <class T = double, class F>
std::vector<mat<T>> reference_gradients(F f, const std::vector<mat<double>>& inputs, const mat<double>& dy) {
  ad::basic_tape<T> t;
  std::vector<mat<ad::basic_var<T>>> x;
  x.reserve(inputs.size());
  for (const mat<double>& in : inputs) x.push_back(ad::variables<T>(in));
  const mat<ad::basic_var<T>> y = f(std::as_const(x));
  const ad::basic_adjoints<T> g = t.backward(y, dy);
  std::vector<mat<T>> r;
  r.reserve(x.size());
  for (const mat<ad::basic_var<T>>& xi : x) r.push_back(g(xi));
  return r;
}

// The same gradient by central differences in double, for checking the one above:
//   ∂L/∂x ≈ Σ_j dy_j · (y_j(x + eps) - y_j(x - eps)) / (2 eps),
// the difference taken entry by entry before the sum (less cancellation), divided by the step
// actually taken ((x + eps) - (x - eps) once rounded). An output entry that does not move (the
// -inf log-sum-exp of a fully masked row) and a dy_j of 0 add nothing; an infinite input does not
// move either, so its difference is 0. f: const std::vector<mat<double>>& -> mat<double>.
template <class F>
std::vector<mat<double>> finite_differences(F f, const std::vector<mat<double>>& inputs, const mat<double>& dy,
                                            double eps = 1e-6) {
  std::vector<mat<double>> x = inputs;
  const auto output = [&] {
    mat<double> y = f(std::as_const(x));
    if (y.rows != dy.rows || y.cols != dy.cols)
      throw std::invalid_argument("ref::finite_differences: dy's shape is not f's output's");
    return y;
  };
  std::vector<mat<double>> g;
  g.reserve(x.size());
  for (mat<double>& xk : x) {
    mat<double> gk(xk.rows, xk.cols);
    for (std::size_t i = 0; i < xk.a.size(); ++i) {
      const double x0 = xk.a[i], up = x0 + eps, down = x0 - eps;
      xk.a[i] = up;
      const mat<double> y_up = output();
      xk.a[i] = down;
      const mat<double> y_down = output();
      xk.a[i] = x0;
      double change = 0;
      for (std::size_t j = 0; j < dy.a.size(); ++j)
        if (dy.a[j] != 0 && y_up.a[j] != y_down.a[j]) change += dy.a[j] * (y_up.a[j] - y_down.a[j]);
      gk.a[i] = change / (std::isfinite(x0) ? up - down : 2 * eps);
    }
    g.push_back(std::move(gk));
  }
  return g;
}

}  // namespace attn::ref
