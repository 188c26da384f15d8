#include "gpu_schedule.hpp"

#include "gpu_threads.hpp"
#include "matmul_gpu_schedule.hpp"

namespace attn::gen {

using namespace Halide;

void schedule_gpu(lowered& l, const Target&) {
  for (lowered::stage& st : l.stages) {
    switch (st.kind) {
      case lowered::stage::layout:
      case lowered::stage::row_reduction:  // with_lse's row max and sum
        gpu_root(st.func);
        break;
      case lowered::stage::product: {
        const Func stored = apply_matmul_gpu_schedule(st, default_matmul_gpu_schedule(shape_of(st)));
        if (st.func.name() == l.output.name()) l.output = stored;
        break;
      }
      case lowered::stage::softmax_row:
        // Row max, exponentials, row sums and the normalised row: one kernel each, a thread per site.
        for (Func f : {st.row_max, st.row_exp, st.row_sum, st.func}) gpu_root(f);
        break;
    }
  }
}

}  // namespace attn::gen
