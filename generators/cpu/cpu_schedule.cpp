#include "generators/cpu/cpu_schedule.hpp"

#include "generators/cpu/fuse_loops.hpp"
#include "generators/cpu/matmul_schedule.hpp"
#include "generators/cpu/pair_copy.hpp"

namespace attn::gen {

using namespace Halide;

namespace {

// Pair indices per parallel task of a copy in pairs of a tensor's other dim than its last.
constexpr int pairs_per_block = 32;

// Vectorise the innermost var, run the rest as one parallel loop; returns that loop's var.
VarOrRVar vectorize_and_parallelize(Func f, const std::vector<Var>& vars, int vec) {
  f.vectorize(vars.front(), vec, TailStrategy::GuardWithIf);
  if (vars.size() < 2) return Var::outermost();
  VarOrRVar outer = fuse_all(f, std::vector<Var>(vars.begin() + 1, vars.end()));
  f.parallel(outer);
  return outer;
}

// A transpose (the innermost two dims swapped) in square tiles of one vector: contiguous stores,
// each vector's elements loaded one per row (inserted from memory: float32 rows loaded whole and
// transposed in registers were 1.8x slower, K of 8 heads x 1024 x 64 alone).
void transpose_in_tiles(Func f, const std::vector<Var>& vars, int vec) {
  Var xi("xi"), yo("yo"), yi("yi");
  f.split(vars[0], vars[0], xi, vec, TailStrategy::GuardWithIf)
      .split(vars[1], yo, yi, vec, TailStrategy::GuardWithIf)
      .reorder(xi, yi, vars[0], yo)
      .vectorize(xi)
      .unroll(yi);
  std::vector<Var> outer{yo};
  outer.insert(outer.end(), vars.begin() + 2, vars.end());
  f.parallel(fuse_all(f, outer));
}

}  // namespace

void schedule_cpu(lowered& l, const Target& target) {
  const int vec = target.natural_vector_size<float>();
  for (lowered::stage& st : l.stages) {
    Func f = st.func;
    const std::vector<Var>& v = st.vars;  // innermost first
    f.compute_root();
    switch (st.kind) {
      case lowered::stage::layout:
        if (v.size() >= 2) transpose_in_tiles(f, v, vec);
        else vectorize_and_parallelize(f, v, vec);
        break;
      case lowered::stage::product: {
        // Register-tiled (matmul_schedule.hpp); the product then lives in the returned Func.
        const Func stored = apply_matmul_schedule(st, default_matmul_schedule(shape_of(st), target));
        if (st.right_finite.defined()) {  // the plain product where the right operand is finite
          st.right_finite.compute_root();
          f.update().specialize(st.right_finite());
        }
        replace_output(l, f, stored);
        break;
      }
      case lowered::stage::sum: {
        // Every element its own sum: the elements in parallel (the outer dims as one loop), vectors
        // of them through the sum unless the innermost dim is a size-1 axis (a row's sum).
        vectorize_and_parallelize(f, v, vec);
        if (v.empty()) break;
        Stage sum = f.update();
        if (v.size() == 1 && (st.extents.empty() || st.extents.front() != 1)) {
          // One sum per column over every row of a tensor (all_finite): the columns' vectors inside
          // the rows, so that the rows are read in memory order, once.
          Var outer("columns"), inner("column");
          sum.split(v.front(), outer, inner, vec, TailStrategy::GuardWithIf).vectorize(inner);
          std::vector<VarOrRVar> order{inner, outer};
          for (const RVar& r : f.rvars(0)) order.push_back(r);
          sum.reorder(order);
          break;
        }
        if (st.extents.empty() || st.extents.front() != 1) {
          sum.vectorize(v.front(), vec, TailStrategy::GuardWithIf);
          if (v.size() >= 2) sum.parallel(fuse_all(sum, std::vector<Var>(v.begin() + 1, v.end())));
          break;
        }
        if (v.size() < 2) break;
        // A sum per row (a unit innermost dim): a vector of rows through the sum, vectors_per_task
        // of them per task (a task per row was mostly the thread pool's overhead).
        constexpr int vectors_per_task = 8;
        Var blocks("row_blocks"), rows("rows");
        sum.split(v[1], blocks, rows, vectors_per_task * vec, TailStrategy::GuardWithIf)
            .vectorize(rows, vec, TailStrategy::GuardWithIf);
        std::vector<Var> tasks{blocks};
        tasks.insert(tasks.end(), v.begin() + 2, v.end());
        sum.parallel(fuse_all(sum, tasks));
        break;
      }
      case lowered::stage::pairs: {
        // Blocks of pair indices per task (a task per pair index was mostly the thread pool's overhead).
        const int pair_count = st.extents.size() > 2 ? static_cast<int>(st.extents[2]) : 0;
        const pair_blocks b = split_pair_copy(f, st.source, vec, pairs_per_block, true, pair_count);
        std::vector<Var> tasks{b.pairs};
        tasks.insert(tasks.end(), v.begin() + 3, v.end());  // lead..., batch
        f.parallel(fuse_all(f, tasks));
        break;
      }
      case lowered::stage::scatter:
        vectorize_and_parallelize(f, v, vec);
        f.update().unscheduled();  // one serial pass (stage.hpp)
        break;
      case lowered::stage::softmax_row: {
        f.vectorize(v.front(), vec, TailStrategy::GuardWithIf);
        // The row's helpers computed per row (at a row of one loop fused with heads and batch,
        // Halide sized them for every row: a T x T buffer allocated per row).
        for (Func helper : {st.row_max, st.row_exp, st.row_sum}) {
          if (v.size() >= 2) helper.compute_at(f, v[1]);
          else helper.compute_root();
        }
        if (v.size() >= 2) parallel_rows(f, v[1], std::vector<Var>(v.begin() + 2, v.end()));
        st.row_exp.vectorize(v.front(), vec, TailStrategy::GuardWithIf);
        break;
      }
      case lowered::stage::row_reduction: {
        // One row per iteration, its max and sum computed there, as the softmax's.
        if (v.empty()) break;  // a scalar: the softmax of a vector
        for (Func helper : {st.row_max, st.row_sum}) helper.compute_at(f, v[0]);
        parallel_rows(f, v[0], std::vector<Var>(v.begin() + 1, v.end()));
        break;
      }
    }
  }
}

}  // namespace attn::gen
