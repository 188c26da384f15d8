#pragma once
// Which key tiles a mask keeps, per query tile, derived from the mask's predicate itself
// (Halide's interval solver), not from a list of known masks. A predicate the solver cannot
// bound gives "every tile, all partial": slower, never wrong.
#include <Halide.h>

namespace attn::gen {

// Key tiles by index t (keys [t·kv_tile, (t+1)·kv_tile)), for one query tile:
//   [lo, hi)            tiles that may hold a kept key; the others are skipped;
//   [full_lo, full_hi)  tiles whose keys are all kept (and inside the keys): no predicate.
// lo <= full_lo <= full_hi <= hi always holds.
struct kv_tile_ranges {
  Halide::Expr lo, hi, full_lo, full_hi;
};

// keep: the mask's predicate in the Vars q and kv (and any other symbols, e.g. a length read
// per batch item); queries of the tile are [q_first, q_last]; there are nk keys.
kv_tile_ranges kv_tiles_kept(const Halide::Expr& keep, const Halide::Var& q, const Halide::Var& kv,
                             const Halide::Expr& q_first, const Halide::Expr& q_last, const Halide::Expr& nk, int kv_tile);

}  // namespace attn::gen
