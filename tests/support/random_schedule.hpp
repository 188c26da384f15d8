#pragma once
// A random valid fused-kernel schedule, as a user may pass one (jit_options::schedule): vectors of
// 4, 8 or 16 floats, key tiles of 1 to 8 vectors with a partial tile dividing them (or 0), any query
// tile, unroll, P·V blocking, row block, staging of Kᵀ and state layout. Only the tuner checks its
// candidates against a reference; a schedule given by hand is not checked, so every one must be right.
#include <array>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace attn::ref {

inline std::string random_schedule(std::mt19937& rng) {
  const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int vector = std::array{4, 8, 16}[static_cast<std::size_t>(pick(0, 2))];
  const int kv_tile = vector * pick(1, 8);
  std::vector<int> partial{0};
  for (int p = vector; p <= kv_tile; p += vector)
    if (kv_tile % p == 0) partial.push_back(p);
  const int q_tile = pick(1, 50);
  std::ostringstream s;
  s << "vector=" << vector << " kv_tile=" << kv_tile
    << " partial_tile=" << partial[static_cast<std::size_t>(pick(0, static_cast<int>(partial.size()) - 1))]
    << " q_tile=" << q_tile << " q_unroll=" << pick(1, 8) << " kv_vectors=" << pick(1, 4)
    << " pv_keys=" << (pick(0, 1) ? 0 : pick(1, kv_tile)) << " row_block=" << (pick(0, 1) ? 0 : pick(1, q_tile))
    << " pv_rows=" << pick(0, 6) << " stage_kv=" << pick(0, 1) << " pack_state=" << pick(0, 1);
  return s.str();
}

}  // namespace attn::ref
