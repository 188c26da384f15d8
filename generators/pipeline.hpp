#pragma once
// An expression's IR -> a lowered, scheduled set of Halide Funcs for one target: the generic
// lowering, with every attention fused when asked (lower.hpp), and the schedules of both: the CPU
// ones, or the GPU ones when the target has a GPU feature (cuda, opencl, ...).
#include <string>
#include <Halide.h>
#include "generators/lowering/lower.hpp"

namespace attn::gen {

// The lowering alone, no schedule (every Func inline): for Halide's autoschedulers (autoschedule.hpp).
// With options.default_tiles, the tiles (which shape the fused algorithm's key loop) are fitted to
// the masks as below; lowered::tiles says which.
lowered lower_fitted(const ir::graph& g, const bound_dims& bound, const lowering_options& options);

// With options.default_tiles, an attention's tiles are fitted to its mask (fitted_to_mask: a
// band of keys per query, an edge of kept keys that moves with the query); lowered::tiles says
// which tiles were used.
lowered lower_and_schedule(const ir::graph& g, const bound_dims& bound, const lowering_options& options,
                           const Halide::Target& target);

// The fused schedule's parameters as text (GPU or CPU, whichever the lowering used).
std::string schedule_text(const lowered& l);

}  // namespace attn::gen
