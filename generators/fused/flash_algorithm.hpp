#pragma once
// The fused ("flash") attention algorithm, written once: for each (batch, lead dims such as
// heads, query tile), a serial loop over key tiles computes the score tile, applies modifiers
// and masks, and folds the tile into an online softmax (running max, running sum, rescaled
// P·V accumulator). The Nq × Nk matrix is never stored: per task, one tile of scores.
// Softmax-free attention (flash_problem::normalised false: sigmoid, ReLU attention) runs the same
// loops with the weights f(S) in place of the probabilities and a plain sum Σ f(S)·V as the state.
//
// Key tiles start at key 0, or (CPU) at the query tile's first kept key, rounded down to a
// vector: key 0 but for banded masks such as a sliding window, whose query tiles then compute ~5%
// fewer keys. They come in two kinds (mask_bounds.hpp): full tiles skip the mask predicate, partial
// tiles evaluate it; tiles the mask removes entirely are never visited. Both kinds are one
// update of the same state, so their order does not matter. Partial tiles may be smaller (a
// divisor of the full tile): where a mask's edge or the last key cuts a full tile, only the
// smaller tiles that hold kept keys are computed (causal at T = 4096: 2.3% of the keys computed
// are masked with tiles of 64 keys instead of 6.5% with 256).
//
// Numerics: a masked key, or a score of -inf, has weight 0, and its key and value are never
// mixed into the result (0·NaN included); a row with no kept key gives 0. A NaN or +inf score
// among the kept keys makes the row NaN. These hold under Halide's fast-math flags because the
// few comparisons that see non-finite values are strict_float.
//
// How the Funcs are scheduled is flash_cpu_schedule's business; this file only defines them.
#include <functional>
#include <string>
#include <vector>
#include <Halide.h>
#include "generators/lowering/stage.hpp"

namespace attn::gen {

// One attention, as the lowering sees it: callbacks that evaluate the score and V.
struct flash_problem {
  struct scored {
    Halide::Expr score;  // after modifiers
    Halide::Expr keep;   // the masks' predicate (true: kept)
  };
  int lead = 0;  // dims before (Nq, Nk), e.g. heads; indices are row-major
  bool batched = false;
  Halide::Var batch;
  Halide::Expr nq, nk;
  int dv = 0;        // width of V if static (the output is bounded to it), else 0
  int dv_known = 0;  // width of V if known when compiling (static or bound: register tiles), else 0
  Halide::Expr dv_extent;  // width of V: a constant, or read off V at the call
  // V's columns in blocks of this many, each block's even columns first, then its odd ones, as P·V
  // and the state hold them (the output reads them back in order): a bfloat16 row's block is one
  // vector of 32-bit words, each half of it widened by one instruction (a shift, a mask), where
  // widening the block's halves in order takes two each. 0: in order.
  int split_columns = 0;
  // Optional, (d): the largest exponent field (bits & 0x7f800000) in column d of V, over all its
  // other indices; 0x7f800000 means a NaN or inf there. Read once per call: where V is finite,
  // partial key tiles multiply a masked key's value by its weight 0 (0·finite is 0) with a plain
  // FMA instead of a guarded one. Undefined: always guarded.
  Halide::Func value_exponents;
  // Decoding: where few_queries holds (N_Q <= few_rows, known when compiling or at the call), a
  // query tile holds the N_Q rows, not q_tile (one query computed as 48 rows made decoding 2.5x
  // slower), and the per-tile products read their transposed operand from a copy per key tile
  // (stage::tile_transpose) instead of one shared by the query tiles. Undefined: never.
  Halide::Expr few_queries;
  int few_rows = 0;
  std::string suffix;  // added to every Func's name: unique per attention in one pipeline
  bool with_lse = false;  // also define flash_funcs::lse, each row's log-sum-exp of its kept scores
  // true: softmax over the keys (score: the scores). false: score gives the weights themselves,
  // summed unnormalised (a key outside `keep` weighs 0); no max, no sum, no lse.
  bool normalised = true;
  // The score at (lead..., q, kv); per-pair materialised nodes (Q·Kᵀ) used by this call are
  // new Funcs, appended to `pairwise` so the schedule computes them per tile.
  std::function<scored(const std::vector<Halide::Expr>& lead, const Halide::Expr& q, const Halide::Expr& kv,
                       std::vector<stage>& pairwise)>
      score;
  // V at (lead..., kv, d); `inside`: kv is known to lie inside the keys, read without a clamp.
  std::function<Halide::Expr(const std::vector<Halide::Expr>& lead, const Halide::Expr& kv, const Halide::Expr& d, bool inside)>
      value;
  // Optional: V in bfloat16 pairs of keys, V(lead..., 2·pair + j, d) at (lead..., pair, d, j). Given
  // (a CPU with bfloat16 dot products, V bfloat16, the result stored as bfloat16), key tiles round
  // P to bfloat16 and run P·V on bfloat16 dot products, a pair of keys per product; the running sum
  // adds the unrounded P. Partial tiles do so where flash_step::pairs_fit, else keep the float32
  // P·V that guards masked keys.
  std::function<Halide::Expr(const std::vector<Halide::Expr>& lead, const Halide::Expr& pair, const Halide::Expr& d, const Halide::Expr& j)>
      value_pairs;
  // Optional: the result as the caller's buffer stores it (rounded to bfloat16 or float16), applied
  // as the output is written, so that no float32 copy is converted after. Undefined: float32.
  std::function<Halide::Expr(const Halide::Expr&)> stored;
};

// One kind of key tile: the update of the state that folds it in, and the Funcs computed per tile.
struct flash_step {
  Halide::RDom r;  // over key tiles
  int tile = 0;    // keys per tile
  int update = 0;  // the state's update index
  std::vector<stage> pairwise;
  Halide::Func score, max_lanes, max, prob, sum_lanes, sum, pv;  // softmax-free: score (the weights) and pv only
  // With flash_problem::value_pairs: P as bfloat16 and its product with V on pairs of keys, which
  // pv reads (Funcs of their own, so that a schedule can compute them per register tile of pv);
  // partial tiles: pv selects it where pairs_fit, else guarded_pv, the float32 P·V that never
  // multiplies a masked key's value.
  Halide::Func rounded_prob, paired_pv, guarded_pv;
  Halide::Expr pairs_fit;  // partial tiles: () where pv reads paired_pv (V finite, the keys whole tiles)
  // Reductions: across lanes (the sum; the max is a tree), along a lane, over a tile's keys (P·V),
  // over its pairs of keys (x a pair's two, y the pairs: paired_pv).
  Halide::RDom lanes, in_lane, keys, key_pairs;
};

struct flash_funcs {
  Halide::Func output;  // (dv, q, lead innermost first..., batch): the combine's value
  // With flash_problem::with_lse: (q, lead..., batch) the row's log-sum-exp, max + log(sum), -inf
  // for a row without a kept key. Both read `rows`, Tuple(output, lse) over output's vars, the
  // Func the state is computed in (a Func computed inside one consumer cannot feed two).
  Halide::Func lse, rows;
  // (dv, qi, qt, lead..., batch): the normalised result per query tile (with the log-sum-exp: a
  // Tuple of both), read by `output` (or `rows`). The CPU schedule inlines it; GPU schedules
  // compute it, so that a block is one query tile of the state.
  Halide::Func tiles;
  // Tuple(max, sum, acc) over (dv, qi, qt, lead..., batch); softmax-free: acc alone. Packed
  // (state_lanes > 0): Tuple(max, sum, acc_0, ..., acc_k) over (lane, qi, qt, lead..., batch), V's
  // column lane + state_lanes·j in acc_j (interleaved: a vector of lanes holds adjacent columns), or
  // lane·(k + 1) + j (blocked: a lane holds adjacent columns, as a GPU thread's register tile).
  // The running max and sum are one row's, alike in every column: packed, the fold rescales them
  // (an exp, selects) once per row and lane, not once per column, and they are stored once per lane.
  Halide::Func state;
  int state_lanes = 0;
  bool blocked_state = false;
  // V's column of accumulator j in lane `lane` of the packed state.
  Halide::Expr state_column(const Halide::Expr& lane, int j) const;
  Halide::Var state_column() const { return state_lanes > 0 ? lane : dv; }
  flash_step full, partial;
  // Vars, innermost first: output (dv, q, lead..., batch); state (state_column(), qi, qt, lead..., batch);
  // per-tile Funcs (kvi or lane or dv, qi, t, qt, lead..., batch).
  Halide::Var dv, q, qi, qt, kvi, lane, t;
  std::vector<Halide::Var> lead;  // innermost first
  Halide::Var batch;
  bool batched = false;
  int q_tile = 0, kv_tile = 0, vector = 0;  // q_tile: the most rows per query tile; kv_tile: keys per full tile (partial.tile per partial one)
  int dv_size = 0;   // width of V, 0 if not static
  int dv_known = 0;  // width of V if static or bound when compiling, else 0
  Halide::Expr nk;   // number of keys
  Halide::Expr dv_extent;  // width of V: a constant, or read off V at the call
  // With flash_problem::value_exponents: () true when every value in V is finite; the partial
  // tiles' P·V is the plain product where it holds (a specialisation in the schedule).
  Halide::Func value_exponents, values_finite;
  Halide::Expr few_queries;  // flash_problem::few_queries: the schedule specialises on it
  // Where a paired product (bfloat16 dot products) runs as partial dot products instead (fewer
  // queries still: generic_lowering's paired products), a version of its own; else undefined.
  Halide::Expr paired_dots;
  Halide::Expr q_rows;       // rows per query tile: q_tile, or N_Q where few_queries holds
  std::int64_t band = 0;  // a query keeps at most this many consecutive keys (mask_bounds.hpp); 0: unbounded
  bool diagonal = false;  // an edge of the kept keys moves with the query (causal; mask_bounds.hpp)
};

// partial_tile divides kv_tile (0: kv_tile); both are multiples of vector. state_lanes > 0 packs the
// state (flash_funcs::state) where V's width is known when compiling (static or bound), a multiple
// of it, and there is a softmax; otherwise, or with 0, the state is over dv; blocked_state packs
// each lane's columns together (flash_funcs::state). tiles_from_band: key tiles start at each query
// tile's first kept key (mask_bounds.hpp's first_kept_key), else at key 0 (the GPU schedules, which
// unroll a tile's keys: from a band's start bounds inference cannot prove the extent constant).
flash_funcs flash_attention(const flash_problem& p, int q_tile, int kv_tile, int partial_tile, int vector,
                            int state_lanes = 0, bool tiles_from_band = false, bool blocked_state = false);

}  // namespace attn::gen
