#pragma once
// The GPU schedule of the fused backward (fused_backward.hpp), lowered in two passes with the GPU
// schedule's tiles: one GPU block per (own tile, lead dims and batch item) of each pass, and
// inside it a serial loop over the other kind's tiles the mask keeps. Each step's pair values (what
// the exits read: P, dS), the exits' products and a table's tile sums are computed by the block's
// threads into shared memory, Halide putting the barriers between them; the pair nodes beneath a
// pair value (scores, dP) in the registers of the thread computing it. The exits' sums stay with
// the threads that own their (column, row). No atomics: each sum is added in the same order on
// every run, whatever the GPU.
#include <Halide.h>
#include "generators/fused/fused_backward.hpp"
#include "generators/gpu/flash_gpu_schedule.hpp"

namespace attn::gen {

void schedule_flash_backward_gpu(backward_funcs& b, const flash_gpu_schedule& s);

}  // namespace attn::gen
