#pragma once
// The fused backward of an attention (backward_pattern.hpp), FlashAttention-2's algorithm generic
// over the score and the mask: the pair nodes (scores, P = exp(S - lse), dP = dO·Vᵀ, dS and what
// the masks and modifiers make of it) are computed tile by tile by the generic rules, never
// stored whole, and summed into the exits in two passes:
//   by queries: per query tile, the key tiles in order: the row exits (dQ' = dS·K');
//   by keys:    per key tile, the query tiles in order: the column exits (dV = Pᵀ·dO, dK').
// Each pass recomputes the tiles it needs (no atomics, no T×T buffer): the same gradients,
// bitwise, for any thread count. The forward's output and log-sum-exp come from its fused
// kernel in the same pipeline; softmax's row term Σ_k P·dP is rowsum(dO ∘ O). Tiles that the
// mask removes entirely are skipped (mask_bounds.hpp), in both passes.
#include <vector>
#include <Halide.h>
#include "generators/fused/backward_pattern.hpp"
#include "generators/lowering/stage.hpp"

namespace attn::gen {

class generic_lowering;
struct lowering_state;

// One pass: the sums of its exits over the other tiles, per tile of its own.
struct backward_pass {
  bool rows = false;  // by queries (row exits) or by keys (column exits)
  // Tuple, one element per exit of the pass: (d, i, tile, lead innermost first..., batch), i the
  // query (row pass) or key within the tile; updated once per tile of the other kind, in order.
  Halide::Func acc;
  Halide::RDom r;  // over the other kind's tiles
  Halide::Var d{"d"}, i{"i"}, tile{"tile"};
  int tile_rows = 0;    // queries or keys per own tile
  int width_known = 0;  // the exits' widest d if every width is known when compiling, else 0
  // Computed per (tile, r): the pair values each exit reads ((kv, q, lead..., batch), 0 outside the
  // queries and keys), then each exit's product of them with its other operand, (d, i, t, tile, lead..., batch).
  std::vector<Halide::Func> values, products;
  std::vector<Halide::RDom> contracted;  // each product's reduction over the tile's other dim
  std::vector<Halide::Func> finite;      // weighted exits: () the other operand is all finite; else undefined
  std::vector<stage> pairwise;           // per-tile Funcs of the pair nodes (products, stored copies, P)
};

struct backward_funcs {
  backward_pass by_query, by_key;
  std::vector<Halide::Var> lead;  // innermost first
  Halide::Var batch;
  bool batched = false;
  Halide::Func row_dot;  // rowsum(dO ∘ O), as the node's Func
  std::vector<Halide::Func> exits;  // the exit nodes' Funcs, read off the passes
};

// Lowers m: the exits' and the row term's Funcs go to lowering_state::funcs (the rest of the
// gradient reads them like any node), the passes to lowered::backward.
void lower_fused_backward(generic_lowering& rules, lowering_state& s, const backward_match& m);

}  // namespace attn::gen
