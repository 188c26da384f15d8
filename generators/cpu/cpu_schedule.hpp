#pragma once
// The generic CPU schedule: correct for any lowered expression, vectorised along the innermost
// dim (any size: tails are guarded) and parallel over the fused outer dims; products are
// register-tiled by matmul_schedule.hpp.
#include "generators/lowering/lower.hpp"

namespace attn::gen {

void schedule_cpu(lowered& l, const Halide::Target& target);

}  // namespace attn::gen
