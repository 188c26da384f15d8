#pragma once
// The CPU schedule of the fused backward (fused_backward.hpp): each pass one parallel loop over
// its own tiles (with the lead dims and the batch), the other kind's tiles in order inside; per
// tile, the pair nodes' products and the exits' products register-tiled as the forward's are.
#include <Halide.h>
#include "generators/cpu/flash_schedule.hpp"
#include "generators/fused/fused_backward.hpp"

namespace attn::gen {

void schedule_flash_backward_cpu(backward_funcs& b, const flash_schedule& s, const Halide::Target& target);

}  // namespace attn::gen
