#pragma once
// A product's register tile on the CPU, shared by the fused forward and backward schedules.
#include <string>
#include <vector>
#include <Halide.h>
#include "generators/lowering/stage.hpp"

namespace attn::gen {

enum block_order { rows_outside, key_blocks_outside };

// f(x, ...) (+)= ... with x vectorised in `vectors` unrolled vectors and y unrolled by `rows`
// (an update's reduction `r` outside them): a register tile. The blocks of x are walked inside
// the blocks of y, or outside them (one block of the right operand reused by every row). Returns
// the innermost loop over the register tiles (a Func computed at it is one register tile's).
// `rows_tail`: how y's last block runs where the rows are no whole number of blocks (RoundUp: past
// the last row, into storage and from inputs that allow it).
inline Halide::Var register_tile(Halide::Stage u, const Halide::VarOrRVar& x, const Halide::VarOrRVar& y,
                                 const std::vector<Halide::RVar>& r, int vector, int vectors, int rows,
                                 block_order order = rows_outside,
                                 Halide::TailStrategy rows_tail = Halide::TailStrategy::GuardWithIf) {
  using namespace Halide;
  Var xo("blocks_" + x.name()), xi, xv;
  // y's blocks and rows: RVars where y is one (an update's reduction)
  const VarOrRVar yo("blocks_" + y.name(), y.is_rvar), yi(y.name() + "_rows", y.is_rvar);
  u.split(x, xo, xi, vector * vectors, TailStrategy::GuardWithIf)
      .split(xi, xi, xv, vector, TailStrategy::GuardWithIf)
      .split(y, yo, yi, rows, rows_tail);
  std::vector<VarOrRVar> loops{xv, xi, yi};
  loops.insert(loops.end(), r.begin(), r.end());
  if (order == rows_outside) loops.insert(loops.end(), {xo, yo});
  else loops.insert(loops.end(), {yo, xo});
  u.reorder(loops).vectorize(xv).unroll(xi).unroll(yi);
  return order == rows_outside ? xo : Var(yo.name());
}

// A product's update as a register tile: paired products (stage::paired, bfloat16) contract the
// pairs (reduction.y) in the tile, each pair's two (reduction.x) innermost, vectorised with the
// keys atomically: a vector reduction of 2 lanes, which x86 with AVX512-BF16 runs as vdpbf16ps.
inline Halide::Var register_tile_product(const stage& st, const Halide::VarOrRVar& x, const Halide::VarOrRVar& y, int vector, int vectors,
                                  int rows, block_order order = rows_outside) {
  Halide::Stage u = Halide::Func(st.func).update();
  if (!st.paired) return register_tile(u, x, y, {st.reduction.x}, vector, vectors, rows, order);
  const Halide::Var blocks = register_tile(u, x, y, {st.reduction.y}, vector, vectors, rows, order);
  u.atomic().vectorize(st.reduction.x);
  return blocks;
}

}  // namespace attn::gen
