#pragma once
// One loop from several: the schedules fuse outer dims (heads, batch, tiles) into a single
// parallel loop.
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

}  // namespace attn::gen
