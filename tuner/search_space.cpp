#include "search_space.hpp"

#include <algorithm>
#include <bit>

namespace attn::tune {

namespace {

using gen::flash_schedule;

struct axis {
  int flash_schedule::*member;
  std::vector<int> grid, fine;  // the grid's values; the refinement's finer scale
};

const std::vector<axis>& axes() {
  static const std::vector<axis> a{
      {&flash_schedule::q_tile, {12, 24, 48, 96}, {6, 12, 18, 24, 30, 36, 48, 60, 72, 96, 120, 144, 192}},
      {&flash_schedule::kv_tile, {64, 128, 192, 256, 384, 512}, {32, 48, 64, 96, 128, 160, 192, 256, 320, 384, 512, 768, 1024}},
      {&flash_schedule::partial_tile, {0, 64}, {0, 16, 32, 64, 128}},
      {&flash_schedule::q_unroll, {3, 4, 6, 8}, {2, 3, 4, 5, 6, 7, 8}},
      {&flash_schedule::kv_vectors, {2, 3, 4}, {1, 2, 3, 4, 5}},
      {&flash_schedule::pv_keys, {0, 32, 64}, {0, 16, 32, 64, 128}},
      {&flash_schedule::stage_kv, {0, 1}, {0, 1}},
      {&flash_schedule::row_block, {0, 6, 8, 12}, {0, 3, 4, 6, 8, 12, 16, 24}},
      {&flash_schedule::pv_rows, {0, 3}, {0, 1, 2, 3, 4, 6}},
  };
  return a;
}

}  // namespace

bool plausible(const flash_schedule& s, const attention_sizes& a) {
  const int budget = gen::register_budget(a.vector);
  const auto ceil2 = [](std::int64_t n) { return n > 0 ? std::int64_t(std::bit_ceil(std::uint64_t(n))) : std::int64_t(1) << 40; };
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
  std::vector<flash_schedule> out{flash_schedule{}};
  out.front().vector = a.vector;
  for (const axis& ax : axes()) {  // the cartesian product, one axis at a time
    std::vector<flash_schedule> next;
    for (const flash_schedule& s : out)
      for (int v : ax.grid) {
        flash_schedule t = s;
        t.*ax.member = v;
        next.push_back(t);
      }
    out = std::move(next);
  }
  std::erase_if(out, [&](const flash_schedule& s) { return !plausible(s, a); });
  return out;
}

std::vector<flash_schedule> neighbours(const flash_schedule& s, const attention_sizes& a) {
  std::vector<flash_schedule> out;
  for (const axis& ax : axes()) {
    const int v = s.*ax.member;
    // The nearest finer-scale values below and above v (v itself may be off the scale).
    auto above = std::upper_bound(ax.fine.begin(), ax.fine.end(), v);
    auto below = std::lower_bound(ax.fine.begin(), ax.fine.end(), v);
    std::vector<int> near;
    if (above != ax.fine.end()) near.push_back(*above);
    if (below != ax.fine.begin()) near.push_back(*std::prev(below));
    for (int n : near) {
      flash_schedule t = s;
      t.*ax.member = n;
      if (plausible(t, a) && std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
    }
  }
  return out;
}

}  // namespace attn::tune
