#pragma once
// How the GPU schedules put a stage's sites on GPU threads and blocks. Every split is guarded
// (GuardWithIf), so any size runs and nothing outside a Func's region is computed or read; the
// thread loops have constant extents, so a block's size is known when it is launched.
#include <vector>
#include <Halide.h>
#include "generators/cpu/fuse_loops.hpp"

namespace attn::gen {

// Within a block: x in chunks of tx threads, y in chunks of ty threads; what is left of x and y
// runs in serial loops inside each thread, `inner` loops (reductions) innermost, `outer` loops
// (a loop over key tiles) outside the threads, at block level.
inline void threads_2d(Halide::Stage s, const Halide::Var& x, const Halide::Var& y, int tx, int ty,
                       std::vector<Halide::VarOrRVar> inner = {}, const std::vector<Halide::VarOrRVar>& outer = {}) {
  using Halide::TailStrategy;
  Halide::Var xo(x.name() + "_o"), xi(x.name() + "_t"), yo(y.name() + "_o"), yi(y.name() + "_t");
  s.split(x, xo, xi, tx, TailStrategy::GuardWithIf).split(y, yo, yi, ty, TailStrategy::GuardWithIf);
  for (const Halide::Var& v : {xo, yo, xi, yi}) inner.emplace_back(v);
  inner.insert(inner.end(), outer.begin(), outer.end());
  s.reorder(inner).gpu_threads(xi, yi);
}

// A Func computed inside a block (compute_at a block loop or a serial loop inside one): every
// stage on the block's threads over its first two args (one arg: x only); reductions stay
// innermost, inside each thread.
inline void on_block_threads(Halide::Func f, int tx, int ty) {
  const std::vector<Halide::Var> a = f.args();
  auto one = [&](Halide::Stage s) {
    if (a.size() >= 2) {
      threads_2d(s, a[0], a[1], tx, ty);
    } else if (a.size() == 1) {
      Halide::Var o(a[0].name() + "_o"), t(a[0].name() + "_t");
      s.split(a[0], o, t, tx, Halide::TailStrategy::GuardWithIf).reorder(o, t).gpu_threads(t);
    }
  };
  one(f);
  for (int u = 0; u < f.num_update_definitions(); ++u) one(f.update(u));
}

// A Func computed at root as its own kernels: blocks of 32 × 8 threads over its first two args,
// the other args fused into a third block dim; reductions serial inside each thread. With
// updates false, its update definitions are left to the caller.
inline void gpu_root(Halide::Func f, bool updates = true) {
  using Halide::TailStrategy;
  f.compute_root();
  const std::vector<Halide::Var> a = f.args();
  auto one = [&](Halide::Stage s) {
    if (a.empty()) {
      s.gpu_single_thread();
      return;
    }
    if (a.size() == 1) {
      Halide::Var b(a[0].name() + "_b"), t(a[0].name() + "_t");
      s.split(a[0], b, t, 64, TailStrategy::GuardWithIf).gpu_blocks(b).gpu_threads(t);
      return;
    }
    Halide::Var bx(a[0].name() + "_b"), tx(a[0].name() + "_t"), by(a[1].name() + "_b"), ty(a[1].name() + "_t");
    s.split(a[0], bx, tx, 32, TailStrategy::GuardWithIf).split(a[1], by, ty, 8, TailStrategy::GuardWithIf);
    s.reorder(tx, ty, bx, by);
    if (a.size() > 2) s.gpu_blocks(bx, by, fuse_all(s, std::vector<Halide::Var>(a.begin() + 2, a.end())));
    else s.gpu_blocks(bx, by);
    s.gpu_threads(tx, ty);
  };
  one(f);
  if (updates)
    for (int u = 0; u < f.num_update_definitions(); ++u) one(f.update(u));
}

}  // namespace attn::gen
