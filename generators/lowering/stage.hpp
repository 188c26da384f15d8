#pragma once
// One materialised Func of a lowered pipeline and what its schedule needs to know about it.
#include <cstdint>
#include <vector>
#include <Halide.h>

namespace attn::gen {

struct stage {
  Halide::Func func;
  std::vector<Halide::Var> vars;  // innermost first, batch last
  // row_reduction: a value per softmax row from row_max and row_sum, computed per row (the log-sum-exp).
  // sum: a reduction (a sum, a maximum) over an RDom (update) into each element; scatter: a sum into elements the
  // data picks (gather's adjoint), one serial pass so that its order is fixed. pairs: a bfloat16
  // tensor (.., N, K) copied as (pair index, row, pair), vars (pair, row, pair index, lead...): the
  // right operand of a paired product.
  enum kind_t { product, softmax_row, layout, row_reduction, sum, scatter, pairs } kind;
  Halide::Func row_max, row_exp, row_sum;  // softmax helpers, computed per row
  Halide::RDom reduction;                   // products: the contracted dim (paired: x a pair's two, y the pairs)
  std::vector<std::int64_t> extents;        // per var, as vars: the size if fixed when compiling, else 0
  // Products (.., M, K)·(.., K, N): the right operand when it is a Func of its own (Kᵀ in Q·Kᵀ).
  // Its innermost dim is the output's (the keys), so a schedule may stage it per tile.
  Halide::Func right_operand{};
  // Weighted products (ir::product_kind::weighted): () true when the right operand is all finite,
  // where the guard against 0·NaN can go (a schedule may specialise on it).
  Halide::Func right_finite{};
  // Products in a fused tile whose right operand is a transpose: a copy of it, computed per key
  // tile, read where flash_funcs::few_queries holds (the shared right_operand elsewhere). Paired
  // products: the copy is of K's pairs, laid out as a pairs stage, read from tile_source (as `source`).
  Halide::Func tile_transpose{};
  Halide::Func tile_source{};
  // Products in a fused tile, where few queries read it (generic_lowering::few_query_dots): per
  // (lane, key, query, ...), partial dot products along the contracted dim, and their sums per
  // (key, query, ...), which func reads. Between them, dot_halves: the lanes added by halves (each
  // stage the previous one's two halves, down to two lanes), like dots per (lane, key, query, ...).
  Halide::Func dots{}, dot_sums{};
  std::vector<Halide::Func> dot_halves{};
  // Products in a fused tile whose left operand (the queries) is a 16-bit tensor: its rows widened
  // to float32, defined over its own dims, which a schedule computes once per query tile
  // (generic_lowering::left_operand).
  Halide::Func widened_rows{};
  // few_query_dots over bfloat16 keys: the queries' rows (float32) with each block of 2·lanes of the
  // contracted dim as its even elements, then its odd ones, as a key row's block splits in
  // registers (generic_lowering::split_rows); computed once per query tile, as widened_rows.
  Halide::Func split_rows{};
  bool paired = false;  // products: of bfloat16 pairs (reduction.x to vectorise with the keys: vdpbf16ps)
  // pairs of a tensor's last dim (a transposing copy): the tensor as the copy reads it (its rows
  // clamped), which a schedule may load in blocks of rows, to transpose in registers.
  Halide::Func source{};
};

}  // namespace attn::gen
