#include "mask_bounds.hpp"

#include <map>
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

}  // namespace attn::gen
