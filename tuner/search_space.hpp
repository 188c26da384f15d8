#pragma once
// The fused schedules the tuner tries: a grid pruned to register tiles that fit in the vector
// registers and tiles that divide evenly, and the neighbours of a good schedule (one parameter
// one step away on a finer scale) for local refinement around the leaders.
#include <cstdint>
#include <vector>
#include "generators/flash_schedule.hpp"

namespace attn::tune {

// What the pruning needs to know about the attention being tuned.
struct attention_sizes {
  std::int64_t nq = 0, nk = 0, dv = 0;  // queries, keys, width of V
  int vector = 16;                      // floats per vector on the target
};

// Register tiles within budget (28 accumulators of 32 registers with 16-float vectors, 14 of 16
// otherwise; P·V's tile holds V's whole row, or one row of part of it where no whole row fits), q_tile a multiple of q_unroll, kv_tile a multiple of the Q·Kᵀ tile's keys, pv_keys
// smaller than kv_tile and dividing it, partial_tile (when not 0) dividing it, and tiles no larger than the
// problem (rounded up to a power of two).
bool plausible(const gen::flash_schedule& s, const attention_sizes& a);

// q_tile ∈ {12, 24, 48, 96}, kv_tile ∈ {64, 128, 192, 256, 384, 512}, partial_tile ∈ {0, 64},
// q_unroll ∈ {3, 4, 6, 8}, kv_vectors ∈ {2, 3, 4}, pv_keys ∈ {0, 32, 64}, stage_kv ∈ {0, 1},
// row_block ∈ {0, 6, 8, 12}, pv_rows ∈ {0, 3}, vector = a.vector; the plausible ones.
std::vector<gen::flash_schedule> pruned_grid(const attention_sizes& a);

// The plausible schedules one step away from s along one parameter's finer scale.
std::vector<gen::flash_schedule> neighbours(const gen::flash_schedule& s, const attention_sizes& a);

}  // namespace attn::tune
