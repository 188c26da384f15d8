#pragma once
// The generic GPU schedule: correct for any lowered expression, every materialised stage its own
// kernels (gpu_threads.hpp: gpu_root), products register-tiled per thread (matmul_gpu_schedule.hpp).
#include "generators/lowering/lower.hpp"

namespace attn::gen {

void schedule_gpu(lowered& l, const Halide::Target& target);

}  // namespace attn::gen
