#include "flash_cpu_schedule.hpp"

#include "fuse_loops.hpp"

namespace attn::gen {

using namespace Halide;

namespace {

// f(x, ...) += ... with x vectorised in `vectors` unrolled vectors and y unrolled by `rows`,
// the reduction `r` outside them: a register tile of accumulators.
void register_tile(Stage u, const VarOrRVar& x, const VarOrRVar& y, const RVar& r, int vector, int vectors, int rows) {
  Var xo, xi, xv, yo, yi;
  u.split(x, xo, xi, vector * vectors, TailStrategy::GuardWithIf)
      .split(xi, xi, xv, vector, TailStrategy::GuardWithIf)
      .split(y, yo, yi, rows, TailStrategy::GuardWithIf)
      .reorder(xv, xi, yi, r, xo, yo)
      .vectorize(xv)
      .unroll(xi)
      .unroll(yi);
}

void schedule_pairwise(stage& st, const LoopLevel& at, const flash_schedule& s) {
  st.func.compute_at(at).store_at(at);
  st.func.vectorize(st.vars.front(), s.vector, TailStrategy::GuardWithIf);
  if (st.kind == stage::product) {
    register_tile(st.func.update(), st.vars[0], st.vars[1], st.reduction.x, s.vector, s.kv_vectors, s.q_unroll);
  } else if (st.kind == stage::softmax_row) {
    for (Func helper : {st.row_max, st.row_exp, st.row_sum}) helper.compute_at(at);
  }
}

void schedule_step(flash_funcs& f, flash_step& step, const flash_schedule& s) {
  const int v = s.vector;
  Stage u = f.state.update(step.update - 1);
  u.reorder(f.dv, f.qi, step.r.x).vectorize(f.dv, v, TailStrategy::GuardWithIf);
  const LoopLevel at(f.state, step.r.x);

  for (stage& pw : step.pairwise) schedule_pairwise(pw, at, s);
  for (Func per_key : {step.score, step.prob}) per_key.compute_at(at).vectorize(f.kvi, v, TailStrategy::GuardWithIf);
  for (Func lanes : {step.max_lanes, step.sum_lanes}) {
    lanes.compute_at(at).vectorize(f.lane);
    lanes.update().reorder(f.lane, step.in_lane.x, f.qi).vectorize(f.lane);
  }
  for (Func row : {step.max, step.sum}) row.compute_at(at);
  // P·V: dv in registers (⌈Dv / vector⌉ vectors) × q_unroll rows, keys outside.
  const int dv_vectors = f.dv_size > 0 ? (f.dv_size + v - 1) / v : 4;
  step.pv.compute_at(at).vectorize(f.dv, v, TailStrategy::GuardWithIf);
  register_tile(step.pv.update(), f.dv, f.qi, step.keys.x, v, dv_vectors, s.q_unroll);
}

}  // namespace

void schedule_flash_cpu(flash_funcs& f, const flash_schedule& s, const Target&) {
  Func out = f.output;
  Var qo("qo"), qin("qin");
  out.compute_root().split(f.q, qo, qin, f.q_tile, TailStrategy::GuardWithIf).reorder(f.dv, qin, qo);
  // One task per (query tile, lead dims, batch item), all in one parallel loop.
  std::vector<Var> tasks{qo};
  tasks.insert(tasks.end(), f.lead.begin(), f.lead.end());
  if (f.batched) tasks.push_back(f.batch);
  const Var task = fuse_all(out, tasks);
  out.parallel(task).vectorize(f.dv, s.vector, TailStrategy::GuardWithIf);
  if (f.dv_size > 0) out.bound(f.dv, 0, f.dv_size);

  f.state.compute_at(out, task).vectorize(f.dv, s.vector, TailStrategy::GuardWithIf);
  schedule_step(f, f.full, s);
  schedule_step(f, f.partial, s);
}

}  // namespace attn::gen
