#include "mask_bounds.hpp"

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
// while the values stay below 2^24; used only to size tiles (kept_band), never to skip work.
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

}  // namespace

kv_tile_ranges kv_tiles_kept(const Expr& keep, const Var& q, const Var& kv, const Expr& q_first, const Expr& q_last,
                             const Expr& nk, int kv_tile, const Expr& t) {
  const Var tile_var("kv_tile_index");
  Internal::Scope<Interval> tile;
  tile.push(q.name(), Interval(q_first, q_last));
  tile.push(kv.name(), Interval(tile_var * kv_tile, tile_var * kv_tile + (kv_tile - 1)));
  const Expr tiles = (nk + (kv_tile - 1)) / kv_tile;

  // Necessary for some (q, kv) of the tile to be kept; sufficient for all to be kept.
  reads_as_symbols symbolic(q.name(), kv.name());
  const Expr keep_symbolic = symbolic.mutate(keep);
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
  return r;
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
