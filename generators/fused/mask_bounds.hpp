#pragma once
// Which key tiles a mask keeps, per query tile, derived from the mask's predicate itself
// (Halide's interval solver), not from a list of known masks. A predicate the solver cannot
// bound, or whose float arithmetic on q and kv may round (a division, a fraction: its tile
// bounds would be evaluated with other roundings than the predicate), gives "every tile, all
// partial": slower, never wrong. So does a query tile where that arithmetic passes ±2^23 (the
// tile bounds are integers; the predicate's floats round from 2^24 on), checked as the kernel runs.
#include <cstdint>
#include <Halide.h>

namespace attn::gen {

// Key tiles by index t (keys [origin + t·kv_tile, origin + (t+1)·kv_tile)), for one query tile, as
// conditions on t:
//   some  the tile may hold a kept key (when false, the tile is skipped);
//   all   every key of the tile is kept and inside the keys (no predicate needed).
// `all` implies `some`. [lo, hi) bounds the tiles where `some` may hold, where the solver finds
// bounds (the whole range otherwise): the loop over tiles can start and stop there.
struct kv_tile_ranges {
  Halide::Expr some, all;
  Halide::Expr lo, hi;
};

// keep: the mask's predicate in the Vars q and kv (and any other symbols, e.g. a length read
// per batch item); queries of the tile are [q_first, q_last]; there are nk keys; t is the tile;
// origin (>= 0, first_kept_key) is where the query tile's key tiles start.
kv_tile_ranges kv_tiles_kept(const Halide::Expr& keep, const Halide::Var& q, const Halide::Var& kv,
                             const Halide::Expr& q_first, const Halide::Expr& q_last, const Halide::Expr& nk, int kv_tile,
                             const Halide::Expr& t, const Halide::Expr& origin = 0);

// A key no query of [q_first, q_last] keeps any key before, rounded down to a multiple of `align`
// (>= 0; 0 where the predicate is not analysed): a sliding window's query tile starts its key
// tiles at its band, not at a multiple of the tile (a window of 256, query tiles of 24 rows and
// key tiles of 64: ~311 keys computed per row instead of ~325 from multiples of 64).
Halide::Expr first_kept_key(const Halide::Expr& keep, const Halide::Var& q, const Halide::Var& kv,
                            const Halide::Expr& q_first, const Halide::Expr& q_last, const Halide::Expr& nk, int align);

// How many consecutive keys one query keeps at most, when the predicate bounds that by a
// constant (a sliding window of w keeps w, whatever the length); 0 when the kept keys grow with
// the sequence (causal, key padding) or the solver cannot tell.
std::int64_t kept_band(const Halide::Expr& keep, const Halide::Var& q, const Halide::Var& kv);

// Does an edge of the kept keys move with the query (causal, a sliding window, prefix-LM: kv <= q)?
// Then every query tile has partial key tiles along that edge, however long the sequence; a
// mask whose kept keys do not depend on q (key padding) or no mask has none.
bool kept_edge_follows_query(const Halide::Expr& keep, const Halide::Var& q, const Halide::Var& kv);

}  // namespace attn::gen
