#pragma once
// The CPU schedule of the fused attention pipeline: a function of (algorithm, parameters,
// target). Tasks (batch × lead dims × query tiles) run in parallel; inside a task, key tiles
// run in order and every per-tile Func lives in that loop, so memory stays O(tile).
#include <Halide.h>
#include "generators/fused/flash_algorithm.hpp"
#include "generators/cpu/flash_schedule.hpp"

namespace attn::gen {

void schedule_flash_cpu(flash_funcs& f, const flash_schedule& s, const Halide::Target& target);

}  // namespace attn::gen
