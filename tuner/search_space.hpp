#pragma once
// The fused schedules the tuner tries, on a CPU and on a GPU target: a grid pruned to schedules
// that fit the target (register tiles in the vector registers, blocks within the threads and
// shared memory a GPU block may have) and tiles that divide evenly, and the neighbours of a good
// schedule (one parameter one step away on a finer scale) for local refinement around the leaders.
// The axes name the parameters of the schedule's table (parameter_table.hpp), which sets them.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include "generators/gpu/flash_gpu_schedule.hpp"
#include "generators/cpu/flash_schedule.hpp"

namespace attn::tune {

// What the pruning needs to know about the attention being tuned.
struct attention_sizes {
  std::int64_t nq = 0, nk = 0, dv = 0;  // queries, keys, width of V
  int vector = 16;                      // floats per vector on the target (CPU)
};

// CPU. Register tiles within budget (28 accumulators of 32 registers with 16-float vectors, 14 of
// 16 otherwise; P·V's tile holds V's whole row, or one row of part of it where no whole row fits),
// q_tile a multiple of q_unroll, kv_tile a multiple of the Q·Kᵀ tile's keys, pv_keys smaller than
// kv_tile and dividing it, partial_tile (when not 0) dividing it, and tiles no larger than the
// problem (rounded up to a power of two).
bool plausible(const gen::flash_schedule& s, const attention_sizes& a);

// q_tile ∈ {12, 24, 48, 96}, kv_tile ∈ {64, 128, 192, 256, 384, 512}, partial_tile ∈ {0, 64},
// q_unroll ∈ {3, 4, 6, 8}, kv_vectors ∈ {2, 3, 4}, pv_keys ∈ {0, 32, 64}, stage_kv ∈ {0, 1},
// row_block ∈ {0, 6, 8, 12}, pv_rows ∈ {0, 3}, vector = a.vector; the plausible ones.
std::vector<gen::flash_schedule> pruned_grid(const attention_sizes& a);

// The plausible schedules one step away from s along one parameter's finer scale.
std::vector<gen::flash_schedule> neighbours(const gen::flash_schedule& s, const attention_sizes& a);

// GPU. A block of 32 to 1024 threads (a warp at least: fewer leave lanes idle), kv_tile a multiple
// of threads, the shared-memory variant within 48 KiB of shared memory (shared_bytes, with Q·Kᵀ as
// deep as V is wide), tiles no larger than the problem (rounded up to a power of two); parameters
// a variant does not use at their defaults (per thread: stage_k, stage_v; shared memory: unroll;
// unroll also off where V's width is not known), so that no two candidates are the same kernel.
bool plausible(const gen::flash_gpu_schedule& s, const attention_sizes& a);

// shared ∈ {0, 1}, q_tile ∈ {4, 8, 16, 32, 64, 128}, kv_tile ∈ {16, 32, 64, 128},
// threads ∈ {4, 8, 16, 32}, stage_k, stage_v, unroll ∈ {0, 1}; the plausible ones.
std::vector<gen::flash_gpu_schedule> pruned_gpu_grid(const attention_sizes& a);

// The plausible GPU schedules one step away from s along one parameter's finer scale.
std::vector<gen::flash_gpu_schedule> neighbours(const gen::flash_gpu_schedule& s, const attention_sizes& a);

// The fused backward's (CPU): the vector and the forward's parameters as `start`'s, backward_q_tile
// ∈ {32, 64, 128, 256}, backward_sweep ∈ {0, 1}, kv_tile ∈ {64, 128, 256} (its key tiles where it
// does not sweep); schedules the parameters' rules allow, tiles that are whole vectors, no larger
// than the problem (rounded up to a power of two).
bool plausible_backward(const gen::flash_schedule& s, const attention_sizes& a);
std::vector<gen::flash_schedule> pruned_backward_grid(const gen::flash_schedule& start, const attention_sizes& a);
std::vector<gen::flash_schedule> backward_neighbours(const gen::flash_schedule& s, const attention_sizes& a);

// The fused backward's (GPU): the default's other parameters as `start`'s, q_tile and kv_tile ∈
// {16, 32, 64}, threads ∈ {4, 8, 16, 32}; schedules the parameters' rules allow, a step's tiles
// within 48 KiB of shared memory (about four pair tiles and two products as wide as V), tiles no
// larger than the problem (rounded up to a power of two).
bool plausible_gpu_backward(const gen::flash_gpu_schedule& s, const attention_sizes& a);
std::vector<gen::flash_gpu_schedule> pruned_gpu_backward_grid(const gen::flash_gpu_schedule& start, const attention_sizes& a);
std::vector<gen::flash_gpu_schedule> gpu_backward_neighbours(const gen::flash_gpu_schedule& s, const attention_sizes& a);

// The candidates above as schedule texts (jit_options::schedule), for a GPU target's fused schedule
// or a CPU target's, forward or (given the default's schedule, `backward`) backward.
class search_space {
 public:
  search_space(bool gpu, const attention_sizes& a, std::optional<std::string> backward = std::nullopt)
      : gpu_(gpu), sizes_(a), backward_(std::move(backward)) {}
  std::vector<std::string> grid() const;
  // Throws std::invalid_argument if `schedule` is not a schedule of this space's target.
  std::vector<std::string> neighbours(const std::string& schedule) const;

 private:
  bool gpu_;
  attention_sizes sizes_;
  std::optional<std::string> backward_;  // the default backward schedule the search starts from
};

}  // namespace attn::tune
