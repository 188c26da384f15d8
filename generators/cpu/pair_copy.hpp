#pragma once
// A copy of a bfloat16 tensor in pairs (stage::pairs' layout: vars pair, row, pair index, ...) on
// the CPU, shared by the copy made once per call and the one made per key tile (decoding).
#include <Halide.h>

namespace attn::gen {

// A pairs block: `vector` rows × pairs_per_row_block pair indices, 8 pairs (16 elements) a row.
inline constexpr int pairs_per_row_block = 8;

// The loops over the blocks of rows and of pair indices; the caller orders and parallelises them.
struct pair_blocks {
  Halide::Var rows{"pairs_rows"}, pairs{"pair_blocks"};
};

// Each row's pair side by side in a vector of rows, stored interleaved. Pairs of the last dim
// (`source` defined: the tensor as the copy reads it): a block's rows loaded whole and transposed
// in registers (a 16-bit load per element otherwise), in the innermost of the two block loops:
// the blocks of rows (`rows_inside`: a task per block of pair indices) or of pair indices (a copy
// per tile: a vector of rows read whole, then the next). Pairs of the other dim: `pairs_per_block`
// pair indices a block, each pair index's rows in memory order.
inline pair_blocks split_pair_copy(Halide::Func f, Halide::Func source, int vector, int pairs_per_block, bool rows_inside,
                                   int pair_count = 0) {
  using namespace Halide;
  const std::vector<Var> v = f.args();
  pair_blocks b;
  Var row("pairs_row_vector"), block("pair_block");
  const bool transposed = source.defined();
  f.bound(v[0], 0, 2)
      .split(v[1], b.rows, row, vector, TailStrategy::GuardWithIf)
      .split(v[2], b.pairs, block, transposed ? pairs_per_row_block : pairs_per_block, TailStrategy::GuardWithIf)
      .vectorize(v[0])
      .vectorize(row);
  if (!transposed) {
    f.reorder(v[0], row, b.rows, block, b.pairs);
    return b;
  }
  if (rows_inside) f.reorder(v[0], row, block, b.rows, b.pairs);
  else f.reorder(v[0], row, block, b.pairs, b.rows);
  f.unroll(block);
  const Var along = source.args()[0], across = source.args()[1];
  source.compute_at(f, rows_inside ? b.rows : b.pairs)
      .bound_storage(along, 2 * pairs_per_row_block)
      .bound_storage(across, vector)  // a fixed block on the stack (clamped rows vary its bounds)
      .vectorize(along, 2 * pairs_per_row_block, TailStrategy::GuardWithIf);
  // The block stored rows innermost: its rows' loads, unguarded (the source clamps its rows), are
  // one interleaving store, from which each of f's vectors is two vectors interleaved. That needs
  // the block's pair indices a whole vector (its loop over them gone): a copy per tile has them, the
  // copy once per call where their count, bound here, is a whole number of blocks. Stored row by
  // row, f's vectors gathered 32-bit words one at a time (1.5x the copy's time, 16% of eight
  // queries' decoding step).
  const bool whole_blocks = !rows_inside || (pair_count > 0 && pair_count % pairs_per_row_block == 0);
  if (!whole_blocks) {
    source.unroll(across, vector, TailStrategy::GuardWithIf);
    return b;
  }
  if (rows_inside) f.bound(v[2], 0, pair_count);
  source.reorder_storage(across, along).unroll(across, vector, TailStrategy::RoundUp);
  return b;
}

}  // namespace attn::gen
