#pragma once
// The fused backward of an attention (backward_pattern.hpp), FlashAttention-2's algorithm generic
// over the score and the mask: the pair nodes (scores, P = exp(S - lse), dP = dO·Vᵀ, dS and what
// the masks and modifiers make of it) are computed tile by tile by the generic rules, never
// stored whole, and summed into the exits (row exits: dQ' = dS·K'; column exits: dV = Pᵀ·dO,
// dK' = dSᵀ·Q') in a fixed order (backward_order): no atomics and no T×T buffer, the same
// gradients, bitwise, for any thread count. The forward's output and log-sum-exp are read from
// what the forward saved (ir::saved_tensor), or where the output is not O, come from the forward's
// fused kernel in the same pipeline; softmax's row term Σ_k P·dP is rowsum(dO ∘ O). Tiles that the
// mask removes entirely are skipped (mask_bounds.hpp).
#include <vector>
#include <Halide.h>
#include "generators/fused/backward_pattern.hpp"
#include "generators/lowering/stage.hpp"

namespace attn::gen {

class generic_lowering;
struct lowering_state;

// How the exits' sums run. by_query: per query tile (parallel), the key tiles in order: the row
// exits. by_key: per key tile (parallel), the query tiles in order: the column exits. Each of those
// two recomputes its tiles. sweep: per lead dims and batch item (parallel), every (query tile, key
// tile) in order, key tiles outside, each computed once and added to both kinds of exits (as
// PyTorch's CPU backward: fewer products, parallel over heads only).
enum class backward_order { by_query, by_key, sweep };

struct backward_pass {
  backward_order order = backward_order::by_query;
  // The sums, one element per exit of the pass. by_query, by_key: a Tuple over (d, i, tile, lead
  // innermost first..., batch), i the query or key within the pass's own tile, updated once per
  // tile of the other kind (r.x). sweep: (d, row, exit, lead..., batch), updated per (key tile,
  // query tile) (r[3], r[2]), for each exit (r[1]) and row of the tile (r[0]).
  Halide::Func acc;
  Halide::RDom r;
  Halide::Var d{"d"}, i{"i"}, tile{"tile"};
  int width_known = 0;  // the exits' widest d if every width is known when compiling, else 0
  std::vector<int> exits;  // backward_match::exits' indices, in the order of the sums
  // backward_match::reductions' indices summed here (in one pass only), their sums after the
  // exits': each takes blocks of tile_rows cells, a block's cells in the rows of one sum.
  std::vector<int> reductions;
  // Per reduction: a tile's contributions summed per cell and lane, (cell, lane, kt, qt, lead...,
  // batch), one serial pass over the tile's pairs in a fixed order (the lanes summed where read).
  std::vector<Halide::Func> tile_sums;
  // On a CPU, a reduction whose cells follow the pair only through its offset kv - q (a relative
  // position table: offset_tables.hpp) first sums its tile along the diagonals, (offset, kt, qt,
  // lead..., batch), the keys of a row in vectors; its tile sums then add one sum per offset.
  std::vector<Halide::Func> offset_sums;
  // Computed per tile: copies of the pair values, (kv, q, lead..., batch), 0 outside the queries
  // and keys, for pair nodes whose own tile Func is not 0 there; then each exit's product of the
  // pair values with its other operand, (d, i, kt, qt, lead..., batch): i a row of query tile qt
  // (row exits) or of key tile kt (column exits). A sweep has one product for all its exits,
  // (d, i, slot, kt, qt, lead..., batch), computed a register tile of one slot at a time where
  // the sweep adds it.
  std::vector<Halide::Func> values, products;
  std::vector<Halide::RDom> contracted;  // each product's reduction over the tile's other dim
  std::vector<Halide::Func> finite;      // weighted exits: () their other operands are all finite; else undefined
  // Each product's other operand, (column, row, lead..., batch), and whether its rows are queries
  // (else keys): a CPU computes it per tile, so that the products' inner loops index a buffer.
  struct operand {
    Halide::Func func;
    bool query_rows;
  };
  std::vector<operand> operands;
  std::vector<stage> pairwise;           // per-tile Funcs of the pair nodes (products, stored copies, P)
  int tile_rows = 0;                     // rows of a product: the tile of its exits' kind (sweep: both)
  Halide::RVar tile_loop() const { return order == backward_order::sweep ? r[2] : r.x; }  // the tiles are computed inside it
};

struct backward_funcs {
  std::vector<backward_pass> passes;  // by_query and by_key, or one sweep
  std::vector<Halide::Var> lead;      // innermost first
  Halide::Var batch;
  bool batched = false;
  int q_tile = 0, kv_tile = 0;
  std::int64_t band = 0;  // as flash_funcs': the mask's band and diagonal (the tiles are fitted to them)
  bool diagonal = false;
  Halide::Func row_dot;  // rowsum(dO ∘ O), as the node's Func
};

// A key adds to a reduction's tile sums in lane key % scatter_lanes (backward_pass::tile_sums).
inline constexpr int scatter_lanes = 8;

// Lowers m: the exits' and the row term's Funcs go to lowering_state::funcs (the rest of the
// gradient reads them like any node), the passes to lowered::backward. On a GPU target (lowering
// options' gpu: where gpu_covers(m)) two passes with the GPU schedule's tiles.
void lower_fused_backward(generic_lowering& rules, lowering_state& s, const backward_match& m);

}  // namespace attn::gen
