#include "mask_bounds.hpp"

namespace attn::gen {

using namespace Halide;
using Halide::Internal::Interval;

kv_tile_ranges kv_tiles_kept(const Expr& keep, const Var& q, const Var& kv, const Expr& q_first, const Expr& q_last,
                             const Expr& nk, int kv_tile) {
  const Var t("kv_tile_index");
  Internal::Scope<Interval> tile;
  tile.push(q.name(), Interval(q_first, q_last));
  tile.push(kv.name(), Interval(t * kv_tile, t * kv_tile + (kv_tile - 1)));
  const Expr tiles = (nk + (kv_tile - 1)) / kv_tile;

  // Tiles where some (q, kv) may be kept: outside them the predicate is false everywhere.
  const Expr some = Internal::simplify(Internal::or_condition_over_domain(keep, tile));
  const Interval may = Internal::solve_for_outer_interval(some, t.name());
  // Tiles where every (q, kv) is kept and inside the keys.
  const Expr all = Internal::simplify(Internal::and_condition_over_domain(keep && kv < nk, tile));
  const Interval must = Internal::solve_for_inner_interval(all, t.name());

  kv_tile_ranges r;
  if (may.is_empty()) {
    r.lo = r.hi = r.full_lo = r.full_hi = 0;
    return r;
  }
  r.lo = may.has_lower_bound() ? max(may.min, 0) : Expr(0);
  r.hi = may.has_upper_bound() ? min(may.max + 1, tiles) : tiles;
  r.hi = max(r.hi, r.lo);
  if (must.is_empty()) {
    r.full_lo = r.full_hi = r.lo;
  } else {
    r.full_lo = must.has_lower_bound() ? clamp(must.min, r.lo, r.hi) : r.lo;
    r.full_hi = must.has_upper_bound() ? clamp(must.max + 1, r.full_lo, r.hi) : r.hi;
  }
  for (Expr* e : {&r.lo, &r.hi, &r.full_lo, &r.full_hi}) *e = Internal::simplify(*e);
  return r;
}

}  // namespace attn::gen
