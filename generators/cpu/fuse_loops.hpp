#pragma once
// Loop helpers of the CPU schedules: one loop from several (the schedules fuse outer dims: heads,
// batch, tiles, into a single parallel loop; rows kept apart: parallel_rows), and loops left
// unpartitioned.
#include <vector>
#include <Halide.h>

namespace attn::gen {

// Fuses adjacent loop vars (innermost first) of a Func or Stage into one loop and returns it.
template <class FuncOrStage>
Halide::Var fuse_all(FuncOrStage f, const std::vector<Halide::Var>& vars) {
  Halide::Var acc = vars.front();
  for (std::size_t j = 1; j < vars.size(); ++j) {
    Halide::Var fused(vars[j].name() + "_f");
    f.fuse(acc, vars[j], fused);
    acc = fused;
  }
  return acc;
}

// Rows, and the dims outside them (innermost first: heads, batch), as two nested parallel loops.
// One loop fused over both would hide from Halide which row an iteration computes: loop
// partitioning then guards every tile, and helpers computed per row are sized for every row.
template <class FuncOrStage>
void parallel_rows(FuncOrStage f, const Halide::Var& rows, const std::vector<Halide::Var>& outer) {
  f.parallel(rows);
  if (!outer.empty()) f.parallel(fuse_all(f, outer));
}

// Every stage of f (when defined) without loop partitioning: nested guarded tails (register tiles
// in tiles) partitioned grow Halide's compile time without bound, and run as fast unpartitioned.
inline void never_partition(Halide::Func f) {
  if (!f.defined()) return;
  f.never_partition_all();
  for (int i = 0; i < f.num_update_definitions(); ++i) f.update(i).never_partition_all();
}

}  // namespace attn::gen
