#include "generators/fused/mask_bounds.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>

namespace attn::gen {

using namespace Halide;
using Halide::Internal::Interval;

namespace {

// Reads that do not depend on the tile's q and kv (a length per batch item, say) become plain
// symbols for the interval analysis, which treats a tensor read as unbounded otherwise.
class reads_as_symbols : public Internal::IRMutator {
 public:
  reads_as_symbols(std::string q, std::string kv) : q_(std::move(q)), kv_(std::move(kv)) {}
  std::map<std::string, Expr> symbols;

  using IRMutator::visit;
  Expr visit(const Internal::Call* op) override {
    const bool tensor_read = op->call_type == Internal::Call::Image || op->call_type == Internal::Call::Halide;
    if (!tensor_read || Internal::expr_uses_var(op, q_) || Internal::expr_uses_var(op, kv_)) return IRMutator::visit(op);
    const std::string name = "mask_symbol" + std::to_string(symbols.size());
    symbols.emplace(name, op);
    return Internal::Variable::make(op->type, name);
  }

  Expr restore(const Expr& e) const {
    Expr r = e;
    for (const auto& [name, read] : symbols) r = Internal::substitute(name, read, r);
    return r;
  }

 private:
  std::string q_, kv_;
};

// Comparisons of float sums of integers and integral constants (float32(q) + 3.0f < float32(kv))
// as integer comparisons, the form the solver can invert (indices reach masks as floats). Exact
// while the values stay below 2^24: kept_band may use it anywhere, kv_tiles_kept (which skips
// work by it) only where every such float is an integer (integral_floats).
class integer_comparisons : public Internal::IRMutator {
 public:
  using IRMutator::visit;
  Expr visit(const Internal::LT* op) override { return compare(op, [](Expr a, Expr b) { return a < b; }); }
  Expr visit(const Internal::LE* op) override { return compare(op, [](Expr a, Expr b) { return a <= b; }); }
  Expr visit(const Internal::GT* op) override { return compare(op, [](Expr a, Expr b) { return a > b; }); }
  Expr visit(const Internal::GE* op) override { return compare(op, [](Expr a, Expr b) { return a >= b; }); }

 private:
  static Expr integer(const Expr& e) {
    if (const auto* c = e.as<Internal::Cast>(); c != nullptr && e.type().is_float() && c->value.type().is_int())
      return c->value;
    if (const auto* add = e.as<Internal::Add>()) return both(integer(add->a), integer(add->b), [](Expr a, Expr b) { return a + b; });
    if (const auto* sub = e.as<Internal::Sub>()) return both(integer(sub->a), integer(sub->b), [](Expr a, Expr b) { return a - b; });
    if (const std::optional<double> v = Internal::as_const_float(e); v && *v == std::floor(*v) && std::abs(*v) <= 16777216.0)
      return Expr(static_cast<int>(*v));
    return Expr();
  }
  template <class Make>
  static Expr both(const Expr& a, const Expr& b, Make make) {
    if (!a.defined() || !b.defined()) return Expr();
    return make(cast(Int(32), a), cast(Int(32), b));
  }
  template <class Op, class Make>
  Expr compare(const Op* op, Make make) {
    const Expr a = integer(op->a), b = integer(op->b);
    const bool variable = !Internal::is_const(op->a) || !Internal::is_const(op->b);
    const bool narrow = a.defined() && b.defined() && a.type().bits() <= 32 && b.type().bits() <= 32;
    if (narrow && variable) return make(cast(Int(32), a), cast(Int(32), b));
    return IRMutator::visit(op);
  }
};

// Is every float that a comparison (or a conversion to an integer) reads from q or kv an integer
// value: casts of integers, integral constants, and +, -, × a constant, min, max, abs, select,
// floor(· / c) of them? Then, below 2^23, its arithmetic is exact whatever the order or fusion
// of the operations, and a tile's bounds evaluate as the predicate does. A division or a
// fraction need not: (kv - kv % 6) / 6 <= 1 bounded as 18·0.16666667 inside a fused
// multiply-subtract compared as 1.0000001 and skipped a key tile the predicate keeps (NATTEN
// written with a float division, at key tiles of 4).
class integral_floats : public Internal::IRVisitor {
 public:
  integral_floats(std::string q, std::string kv) : q_(std::move(q)), kv_(std::move(kv)) {}
  bool exact = true;

  using IRVisitor::visit;
  void visit(const Internal::LT* op) override { compared(op->a, op->b); }
  void visit(const Internal::LE* op) override { compared(op->a, op->b); }
  void visit(const Internal::GT* op) override { compared(op->a, op->b); }
  void visit(const Internal::GE* op) override { compared(op->a, op->b); }
  void visit(const Internal::EQ* op) override { compared(op->a, op->b); }
  void visit(const Internal::NE* op) override { compared(op->a, op->b); }
  void visit(const Internal::Cast* op) override {  // a float made an integer
    if (op->value.type().is_float() && !op->type.is_float() && indexed(op->value) && !integral(op->value)) exact = false;
    IRVisitor::visit(op);
  }

 private:
  void compared(const Expr& a, const Expr& b) {
    if (a.type().is_float() && (indexed(a) || indexed(b)) && !(integral(a) && integral(b))) exact = false;
    a.accept(this);
    b.accept(this);
  }
  bool indexed(const Expr& e) const { return Internal::expr_uses_var(e, q_) || Internal::expr_uses_var(e, kv_); }
  static bool integral(const Expr& e) {
    using namespace Internal;
    if (const auto* f = e.as<FloatImm>()) return f->value == std::floor(f->value);
    if (const auto* c = e.as<Cast>()) return !c->value.type().is_float() || integral(c->value);
    if (const auto* x = e.as<Add>()) return integral(x->a) && integral(x->b);
    if (const auto* x = e.as<Sub>()) return integral(x->a) && integral(x->b);
    if (const auto* x = e.as<Mul>())  // by a constant: q·kv passes 2^23 from T = 2897 on
      return integral(x->a) && integral(x->b) && (is_const(x->a) || is_const(x->b));
    if (const auto* x = e.as<Min>()) return integral(x->a) && integral(x->b);
    if (const auto* x = e.as<Max>()) return integral(x->a) && integral(x->b);
    if (const auto* x = e.as<Select>()) return integral(x->true_value) && integral(x->false_value);
    // floor or ceil of an integer over an integral constant (a float remainder, generic_lowering.cpp): an
    // integer, the same whether a / c or a·(1/c) is rounded while |a| < 2^23.
    if (const auto* x = e.as<Call>(); x != nullptr && (x->name == "floor_f32" || x->name == "ceil_f32")) {
      const auto* quotient = x->args[0].as<Div>();
      const auto divisor = quotient != nullptr ? as_const_float(quotient->b) : std::nullopt;
      return divisor && *divisor != 0 && *divisor == std::floor(*divisor) && integral(quotient->a);
    }
    if (const auto* x = e.as<Call>(); x != nullptr && x->is_intrinsic({Call::abs, Call::strict_add, Call::strict_sub, Call::strict_mul,
                                                                         Call::strict_min, Call::strict_max}))
      return std::all_of(x->args.begin(), x->args.end(), integral);
    return !e.type().is_float();
  }
  std::string q_, kv_;
};

// Where that exactness holds: every float the predicate computes from q and kv (each node, not
// only the compared ones: kv·c - q·c may cancel) lies within ±2^23, by interval arithmetic over the
// query tile's rows and the tiles' keys, the mask's symbols (reads per batch item) as points. As a
// condition evaluated per query tile: past it a float predicate rounds where the integer bounds do
// not (kv·1000001 <= q·1000001 - 1 keeps kv = q from q = 34 on, the bounds never).
class exact_range : public Internal::IRGraphVisitor {
 public:
  exact_range(std::string q, std::string kv, const Interval& queries, const Interval& keys)
      : q_(std::move(q)), kv_(std::move(kv)) {
    scope_.push(q_, queries);
    scope_.push(kv_, keys);
  }
  Expr holds = Internal::const_true();

 protected:
  using IRGraphVisitor::visit;
  void include(const Expr& e) override {
    if (e.type().is_float() && (Internal::expr_uses_var(e, q_) || Internal::expr_uses_var(e, kv_))) {
      const Interval b = Internal::bounds_of_expr_in_scope(e, scope_);
      const float limit = 8388608.0f;  // 2^23: exact integers up to 2^24, with a margin for b's own rounding
      // An unbounded side (a tensor read at q or kv) gives the analysis nothing to decide by.
      if (b.has_lower_bound()) holds = holds && b.min > -limit;
      if (b.has_upper_bound()) holds = holds && b.max < limit;
    }
    IRGraphVisitor::include(e);
  }

 private:
  std::string q_, kv_;
  Internal::Scope<Interval> scope_;
};

}  // namespace

kv_tile_ranges kv_tiles_kept(const Expr& keep, const Var& q, const Var& kv, const Expr& q_first, const Expr& q_last,
                             const Expr& nk, int kv_tile, const Expr& t, const Expr& origin) {
  const Var tile_var("kv_tile_index");
  Internal::Scope<Interval> tile;
  tile.push(q.name(), Interval(q_first, q_last));
  const Expr first = origin + tile_var * kv_tile;
  tile.push(kv.name(), Interval(first, first + (kv_tile - 1)));
  const Expr tiles = (nk - origin + (kv_tile - 1)) / kv_tile;

  // Necessary for some (q, kv) of the tile to be kept; sufficient for all to be kept.
  reads_as_symbols symbolic(q.name(), kv.name());
  const Expr symbols_for_reads = symbolic.mutate(keep);
  integral_floats floats(q.name(), kv.name());
  symbols_for_reads.accept(&floats);
  const kv_tile_ranges every_tile_partial{Internal::const_true(), Internal::const_false(), Expr(0), tiles};
  if (!floats.exact) return every_tile_partial;
  exact_range range(q.name(), kv.name(), Interval(q_first, q_last), Interval(Expr(0), nk + (kv_tile - 1)));
  symbols_for_reads.accept(&range);
  const Expr exact = symbolic.restore(Internal::simplify(range.holds));
  if (Internal::is_const_zero(exact)) return every_tile_partial;
  // Integer comparisons, equal to the float ones below 2^23 (integral_floats), and the solver can
  // invert them: a window's tiles get loop bounds, its first key (first_kept_key) a bound at all.
  const Expr keep_symbolic = integer_comparisons().mutate(symbols_for_reads);
  const Expr some = Internal::simplify(Internal::or_condition_over_domain(keep_symbolic, tile));
  const Expr all = Internal::simplify(Internal::and_condition_over_domain(keep_symbolic && kv < nk, tile));
  const Interval may = Internal::solve_for_outer_interval(some, tile_var.name());

  kv_tile_ranges r;
  const auto at_t = [&](const Expr& e) { return Internal::simplify(Internal::substitute(tile_var.name(), t, e)); };
  r.some = symbolic.restore(at_t(some));
  r.all = symbolic.restore(at_t(all));
  r.lo = may.has_lower_bound() && !may.is_empty() ? symbolic.restore(Internal::simplify(max(may.min, 0))) : Expr(0);
  r.hi = may.has_upper_bound() && !may.is_empty() ? symbolic.restore(Internal::simplify(min(may.max + 1, tiles))) : tiles;
  if (may.is_empty()) r.hi = r.lo;
  if (Internal::is_const_one(exact)) return r;
  // Past float's exact integers this query tile has every tile partial.
  return {r.some || !exact, r.all && exact, select(exact, r.lo, every_tile_partial.lo), select(exact, r.hi, tiles)};
}

Expr first_kept_key(const Expr& keep, const Var& q, const Var& kv, const Expr& q_first, const Expr& q_last, const Expr& nk,
                    int align) {
  // Tiles of one key: the first that may hold a kept key (kv_tiles_kept's bounds are outer bounds).
  const Expr first = kv_tiles_kept(keep, q, kv, q_first, q_last, nk, 1, Expr(0)).lo;
  return Internal::simplify(first / align * align);
}

namespace {

// The keys kv a query q keeps at most, as an interval in q (and the mask's other symbols).
Interval kept_keys(const Expr& keep, const Var& q, const Var& kv) {
  reads_as_symbols symbolic(q.name(), kv.name());
  return Internal::solve_for_outer_interval(integer_comparisons().mutate(symbolic.mutate(keep)), kv.name());
}

}  // namespace

std::int64_t kept_band(const Expr& keep, const Var& q, const Var& kv) {
  const Interval keys = kept_keys(keep, q, kv);
  if (!keys.is_bounded() || keys.is_empty()) return 0;
  const Expr width = Internal::simplify(keys.max - keys.min + 1);
  const std::optional<std::int64_t> w = Internal::as_const_int(width);
  return w && *w > 0 ? *w : 0;
}

bool kept_edge_follows_query(const Expr& keep, const Var& q, const Var& kv) {
  const Interval keys = kept_keys(keep, q, kv);
  if (keys.is_empty()) return false;
  const auto follows = [&](const Expr& bound) { return Internal::expr_uses_var(bound, q.name()); };
  return (keys.has_lower_bound() && follows(keys.min)) || (keys.has_upper_bound() && follows(keys.max));
}

}  // namespace attn::gen
