#pragma once
// Which key tiles a mask keeps, per query tile, derived from the mask's predicate itself
// (Halide's interval solver), not from a list of known masks. A predicate the solver cannot
// bound, or whose float arithmetic on q and kv may round (a division, a fraction: its tile
// bounds would be evaluated with other roundings than the predicate), gives "every tile, all
// partial": slower, never wrong.
#include <cstdint>
#include <Halide.h>

namespace attn::gen {

// Key tiles by index t (keys [t·kv_tile, (t+1)·kv_tile)), for one query tile, as conditions on t:
//   some  the tile may hold a kept key (when false, the tile is skipped);
//   all   every key of the tile is kept and inside the keys (no predicate needed).
// `all` implies `some`. [lo, hi) bounds the tiles where `some` may hold, where the solver finds
// bounds (the whole range otherwise): the loop over tiles can start and stop there.
struct kv_tile_ranges {
  Halide::Expr some, all;
  Halide::Expr lo, hi;
};

// keep: the mask's predicate in the Vars q and kv (and any other symbols, e.g. a length read
// per batch item); queries of the tile are [q_first, q_last]; there are nk keys; t is the tile.
kv_tile_ranges kv_tiles_kept(const Halide::Expr& keep, const Halide::Var& q, const Halide::Var& kv,
                             const Halide::Expr& q_first, const Halide::Expr& q_last, const Halide::Expr& nk, int kv_tile,
                             const Halide::Expr& t);

// How many consecutive keys one query keeps at most, when the predicate bounds that by a
// constant (a sliding window of w keeps w, whatever the length); 0 when the kept keys grow with
// the sequence (causal, key padding) or the solver cannot tell.
std::int64_t kept_band(const Halide::Expr& keep, const Halide::Var& q, const Halide::Var& kv);

// Does an edge of the kept keys move with the query (causal, a sliding window, prefix-LM: kv <= q)?
// Then every query tile has partial key tiles along that edge, however long the sequence; a
// mask whose kept keys do not depend on q (key padding) or no mask has none.
bool kept_edge_follows_query(const Halide::Expr& keep, const Halide::Var& q, const Halide::Var& kv);

}  // namespace attn::gen
