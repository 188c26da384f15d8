#include "search_space.hpp"

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <string_view>
#include "runtime/errors.hpp"

namespace attn::tune {

namespace {

using gen::flash_gpu_schedule;
using gen::flash_schedule;

struct axis {
  std::string_view parameter;   // its name in the schedule's table
  std::vector<int> grid, fine;  // the grid's values; the refinement's finer scale
};

const std::vector<axis>& cpu_axes() {
  static const std::vector<axis> a{
      {"q_tile", {12, 24, 48, 96}, {6, 12, 18, 24, 30, 36, 48, 60, 72, 96, 120, 144, 192}},
      {"kv_tile", {64, 128, 192, 256, 384, 512}, {32, 48, 64, 96, 128, 160, 192, 256, 320, 384, 512, 768, 1024}},
      {"partial_tile", {0, 64}, {0, 16, 32, 64, 128}},
      {"q_unroll", {3, 4, 6, 8}, {2, 3, 4, 5, 6, 7, 8}},
      {"kv_vectors", {2, 3, 4}, {1, 2, 3, 4, 5}},
      {"pv_keys", {0, 32, 64}, {0, 16, 32, 64, 128}},
      {"stage_kv", {0, 1}, {0, 1}},
      {"row_block", {0, 6, 8, 12}, {0, 3, 4, 6, 8, 12, 16, 24}},
      {"pv_rows", {0, 3}, {0, 1, 2, 3, 4, 6}},
  };
  return a;
}

const std::vector<axis>& gpu_axes() {
  static const std::vector<axis> a{
      {"shared", {0, 1, 2}, {0, 1, 2}},
      {"q_tile", {4, 8, 16, 32, 64, 128}, {1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256}},
      {"kv_tile", {16, 32, 64, 128}, {8, 16, 24, 32, 48, 64, 96, 128, 256}},
      {"threads", {4, 8, 16, 32}, {1, 2, 4, 8, 16, 32, 64}},
      {"stage_k", {0, 1}, {0, 1}},
      {"stage_v", {0, 1}, {0, 1}},
      {"unroll", {0, 1}, {0, 1}},
      {"thread_rows", {2, 4, 8}, {1, 2, 4, 8, 16}},
      {"stage_q", {0, 1}, {0, 1}},
  };
  return a;
}

template <class S>
const gen::parameter<S>& parameter_of(const axis& ax) {
  const gen::parameter<S>* p = S::parameters().find(ax.parameter);
  if (p == nullptr) throw internal_error("search space: the schedule has no parameter " + std::string(ax.parameter));
  return *p;
}

// The fused backward's tiles (CPU): its query tile, whether it sweeps (the key tiles then the same),
// and the key tile where it does not; the forward's parameters stay the default's.
const std::vector<axis>& backward_axes() {
  static const std::vector<axis> a{
      {"backward_q_tile", {32, 64, 128, 256}, {16, 32, 48, 64, 96, 128, 192, 256, 384}},
      {"backward_sweep", {0, 1}, {0, 1}},
      {"kv_tile", {64, 128, 256}, {32, 48, 64, 96, 128, 192, 256, 384, 512}},
  };
  return a;
}

// The fused backward's tiles and threads (GPU): a block per tile of each pass; the forward's
// parameters stay the default's.
const std::vector<axis>& gpu_backward_axes() {
  static const std::vector<axis> a{
      {"q_tile", {16, 32, 64}, {8, 16, 24, 32, 48, 64, 96, 128}},
      {"kv_tile", {16, 32, 64}, {8, 16, 24, 32, 48, 64, 96, 128}},
      {"threads", {4, 8, 16, 32}, {1, 2, 4, 8, 16, 32, 64}},
  };
  return a;
}

constexpr std::int64_t shared_limit = 48 << 10;  // CUDA's static shared memory per block

template <class S>
using plausibility = bool (*)(const S&, const attention_sizes&);

// The cartesian product of the axes' grids over `start`, one axis at a time; the plausible ones.
template <class S>
std::vector<S> grid_of(const std::vector<axis>& axes, const S& start, const attention_sizes& a, plausibility<S> keep) {
  std::vector<S> out{start};
  for (const axis& ax : axes) {
    const gen::parameter<S>& p = parameter_of<S>(ax);
    std::vector<S> next;
    for (const S& s : out)
      for (int v : ax.grid) {
        S t = s;
        p.set(t, v);
        next.push_back(t);
      }
    out = std::move(next);
  }
  std::erase_if(out, [&](const S& s) { return !keep(s, a); });
  return out;
}

template <class S>
std::vector<S> neighbours_of(const std::vector<axis>& axes, const S& s, const attention_sizes& a, plausibility<S> keep) {
  std::vector<S> out;
  for (const axis& ax : axes) {
    const gen::parameter<S>& p = parameter_of<S>(ax);
    const int v = p.get(s);
    // The nearest finer-scale values below and above v (v itself may be off the scale).
    auto above = std::upper_bound(ax.fine.begin(), ax.fine.end(), v);
    auto below = std::lower_bound(ax.fine.begin(), ax.fine.end(), v);
    std::vector<int> near;
    if (above != ax.fine.end()) near.push_back(*above);
    if (below != ax.fine.begin()) near.push_back(*std::prev(below));
    for (int n : near) {
      S t = s;
      p.set(t, n);
      if (keep(t, a) && std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
    }
  }
  return out;
}

// n rounded up to a power of two; unknown (0): no bound.
std::int64_t ceil2(std::int64_t n) { return n > 0 ? std::int64_t(std::bit_ceil(std::uint64_t(n))) : std::int64_t(1) << 40; }

template <class S>
std::vector<std::string> texts(const std::vector<S>& schedules) {
  std::vector<std::string> t;
  for (const S& s : schedules) t.push_back(to_string(s));
  return t;
}

}  // namespace

bool plausible(const flash_schedule& s, const attention_sizes& a) {
  const int budget = gen::register_budget(a.vector);
  const int pv_rows = s.pv_rows > 0 ? s.pv_rows : s.q_unroll;
  // The P·V tile as the schedule builds it: pv_rows rows of V's row, or of a part of it that fits.
  return s.vector == a.vector && s.q_unroll * s.kv_vectors <= budget && pv_rows * gen::pv_tile_vectors(s, a.dv) <= budget &&
         s.q_tile % s.q_unroll == 0 && s.kv_tile % (s.kv_vectors * s.vector) == 0 &&
         (s.pv_keys == 0 || (s.pv_keys < s.kv_tile && s.kv_tile % s.pv_keys == 0)) &&
         (s.partial_tile == 0 || (s.partial_tile <= s.kv_tile && s.kv_tile % s.partial_tile == 0 && s.partial_tile % s.vector == 0)) &&
         (s.row_block == 0 || (s.row_block < s.q_tile && s.q_tile % s.row_block == 0 && s.row_block % s.q_unroll == 0)) &&
         s.kv_tile <= std::max<std::int64_t>(ceil2(a.nk), 4 * a.vector) && s.q_tile <= std::max<std::int64_t>(ceil2(a.nq), 12);
}

std::vector<flash_schedule> pruned_grid(const attention_sizes& a) {
  flash_schedule start;
  start.vector = a.vector;
  return grid_of<flash_schedule>(cpu_axes(), start, a, plausible);
}

std::vector<flash_schedule> neighbours(const flash_schedule& s, const attention_sizes& a) {
  return neighbours_of<flash_schedule>(cpu_axes(), s, a, plausible);
}

bool plausible_backward(const flash_schedule& s, const attention_sizes& a) {
  try {
    flash_schedule::parameters().check(s);  // the rules between parameters (kv_tile against partial_tile, ...)
  } catch (const std::invalid_argument&) {
    return false;
  }
  return s.vector == a.vector && s.kv_tile % s.vector == 0 && (!s.backward_sweep || s.backward_q_tile % s.vector == 0) &&
         s.backward_q_tile <= std::max<std::int64_t>(ceil2(a.nq), s.vector) &&
         s.kv_tile <= std::max<std::int64_t>(ceil2(a.nk), 4 * s.vector);
}

std::vector<flash_schedule> pruned_backward_grid(const flash_schedule& start, const attention_sizes& a) {
  return grid_of<flash_schedule>(backward_axes(), start, a, plausible_backward);
}

std::vector<flash_schedule> backward_neighbours(const flash_schedule& s, const attention_sizes& a) {
  return neighbours_of<flash_schedule>(backward_axes(), s, a, plausible_backward);
}

bool plausible(const flash_gpu_schedule& s, const attention_sizes& a) {
  const flash_gpu_schedule unused;                 // the values of parameters a variant does not use
  const bool per_thread = s.shared == gen::flash_gpu_variant::per_thread;
  const bool tiled = s.shared == gen::flash_gpu_variant::register_tiles;
  const int block = per_thread ? s.q_tile : s.threads * (tiled ? s.q_tile / s.thread_rows : s.q_tile);
  const std::int64_t width = a.dv > 0 ? a.dv : 128;
  const bool canonical = (tiled || (s.thread_rows == unused.thread_rows && s.stage_q == unused.stage_q)) &&
                         (per_thread ? s.stage_k == unused.stage_k && s.stage_v == unused.stage_v && (!s.unroll || a.dv > 0)
                                     : s.unroll == unused.unroll && gen::shared_bytes(s, width, width) <= shared_limit);
  return canonical && block >= 32 && block <= 1024 && s.threads * s.q_tile <= 1024 && s.kv_tile % s.threads == 0 &&
         (!tiled || s.q_tile % s.thread_rows == 0) &&
         s.kv_tile <= std::max<std::int64_t>(ceil2(a.nk), 32) && s.q_tile <= std::max<std::int64_t>(ceil2(a.nq), 32);
}

std::vector<flash_gpu_schedule> pruned_gpu_grid(const attention_sizes& a) {
  return grid_of<flash_gpu_schedule>(gpu_axes(), flash_gpu_schedule{}, a, plausible);
}

std::vector<flash_gpu_schedule> neighbours(const flash_gpu_schedule& s, const attention_sizes& a) {
  return neighbours_of<flash_gpu_schedule>(gpu_axes(), s, a, plausible);
}

bool plausible_gpu_backward(const flash_gpu_schedule& s, const attention_sizes& a) {
  try {
    flash_gpu_schedule::parameters().check(s);  // the rules between parameters (kv_tile a multiple of threads, ...)
  } catch (const std::invalid_argument&) {
    return false;
  }
  // A step's shared memory: about four pair tiles (scores, P, dP, dS) and two exits' products.
  const std::int64_t width = a.dv > 0 ? a.dv : 128;
  const std::int64_t bytes = 4 * (4 * std::int64_t(s.q_tile) * s.kv_tile + 2 * std::int64_t(std::max(s.q_tile, s.kv_tile)) * width);
  return bytes <= shared_limit && s.threads * std::max(s.q_tile, s.kv_tile) >= 32 &&
         s.kv_tile <= std::max<std::int64_t>(ceil2(a.nk), 16) && s.q_tile <= std::max<std::int64_t>(ceil2(a.nq), 16);
}

std::vector<flash_gpu_schedule> pruned_gpu_backward_grid(const flash_gpu_schedule& start, const attention_sizes& a) {
  return grid_of<flash_gpu_schedule>(gpu_backward_axes(), start, a, plausible_gpu_backward);
}

std::vector<flash_gpu_schedule> gpu_backward_neighbours(const flash_gpu_schedule& s, const attention_sizes& a) {
  return neighbours_of<flash_gpu_schedule>(gpu_backward_axes(), s, a, plausible_gpu_backward);
}

std::vector<std::string> search_space::grid() const {
  if (backward_ && gpu_) return texts(pruned_gpu_backward_grid(gen::parse_flash_gpu_schedule(*backward_, {}), sizes_));
  if (backward_) return texts(pruned_backward_grid(gen::parse_flash_schedule(*backward_, {}), sizes_));
  return gpu_ ? texts(pruned_gpu_grid(sizes_)) : texts(pruned_grid(sizes_));
}

std::vector<std::string> search_space::neighbours(const std::string& schedule) const {
  if (gpu_ && backward_) return texts(gpu_backward_neighbours(gen::parse_flash_gpu_schedule(schedule, {}), sizes_));
  if (gpu_) return texts(tune::neighbours(gen::parse_flash_gpu_schedule(schedule, {}), sizes_));
  if (backward_) return texts(backward_neighbours(gen::parse_flash_schedule(schedule, {}), sizes_));
  return texts(tune::neighbours(gen::parse_flash_schedule(schedule, {}), sizes_));
}

}  // namespace attn::tune
