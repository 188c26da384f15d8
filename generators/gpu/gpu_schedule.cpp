#include "generators/gpu/gpu_schedule.hpp"

#include "generators/gpu/gpu_threads.hpp"
#include "generators/gpu/matmul_gpu_schedule.hpp"

namespace attn::gen {

using namespace Halide;

void schedule_gpu(lowered& l, const Target&) {
  for (lowered::stage& st : l.stages) {
    switch (st.kind) {
      case lowered::stage::layout:
      case lowered::stage::pairs:          // made on CPU targets only (lowering_options::bf16_dot_products)
      case lowered::stage::row_reduction:  // with_lse's row max and sum
      case lowered::stage::sum:            // a thread per element sums it
        gpu_root(st.func);
        break;
      case lowered::stage::scatter:  // one serial pass in a fixed order (stage.hpp), on one GPU thread
        gpu_root(st.func, false);
        st.func.update().gpu_single_thread();
        break;
      case lowered::stage::product: {
        if (st.right_finite.defined()) gpu_root(st.right_finite);  // one thread on the device: no copy back to the host
        const Func stored = apply_matmul_gpu_schedule(st, default_matmul_gpu_schedule(shape_of(st)));
        replace_output(l, st.func, stored);
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
