#include "flash_schedule.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace attn::gen {

namespace {

struct field {
  const char* name;
  int flash_schedule::*member;
  int min, max;
};
constexpr field fields[] = {
    {"q_tile", &flash_schedule::q_tile, 1, 4096},       {"kv_tile", &flash_schedule::kv_tile, 1, 65536},
    {"q_unroll", &flash_schedule::q_unroll, 1, 32},     {"kv_vectors", &flash_schedule::kv_vectors, 1, 16},
    {"vector", &flash_schedule::vector, 1, 64},         {"stage_kv", &flash_schedule::stage_kv, 0, 1},
    {"pv_keys", &flash_schedule::pv_keys, 0, 65536},    {"row_block", &flash_schedule::row_block, 0, 4096},
    {"pv_rows", &flash_schedule::pv_rows, 0, 32},
};

}  // namespace

std::string to_string(const flash_schedule& s) {
  std::string t;
  for (const field& f : fields) t += (t.empty() ? "" : " ") + std::string(f.name) + "=" + std::to_string(s.*f.member);
  return t;
}

flash_schedule parse_flash_schedule(const std::string& text, flash_schedule s) {
  std::istringstream in(text);
  std::string item;
  while (in >> item) {
    const auto eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const field* f = nullptr;
    for (const field& candidate : fields)
      if (key == candidate.name) f = &candidate;
    if (f == nullptr || eq == std::string::npos)
      throw std::invalid_argument("schedule: unknown parameter '" + key + "' (known: " + to_string(flash_schedule{}) + ")");
    std::size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(item.substr(eq + 1), &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() - eq - 1 || v < f->min || v > f->max)
      throw std::invalid_argument("schedule: " + key + " must be an integer in [" + std::to_string(f->min) + ", " +
                                  std::to_string(f->max) + "], got '" + item.substr(eq + 1) + "'");
    s.*f->member = v;
  }
  if (s.kv_tile % s.vector != 0)
    throw std::invalid_argument("schedule: kv_tile (" + std::to_string(s.kv_tile) + ") must be a multiple of vector (" +
                                std::to_string(s.vector) + ")");
  return s;
}

flash_schedule default_flash_schedule(std::int64_t nq, std::int64_t nk, std::int64_t dv, int vector) {
  flash_schedule s;
  s.vector = vector;
  // Short sequences: smaller tiles, so that masks still skip work and tails stay small.
  const std::int64_t longest = std::max(nq, nk);
  s.kv_tile = longest > 0 && longest <= 256 ? 4 * vector : 16 * vector;
  s.q_tile = nq > 0 && nq <= 96 ? 12 : 48;
  // Register tiles of 24 accumulators (of 32 vector registers on AVX-512): Q·Kᵀ is q_unroll rows
  // × kv_vectors vectors of keys; P·V is q_unroll rows × ⌈Dv / vector⌉ vectors.
  const std::int64_t dv_vectors = dv > 0 ? (dv + vector - 1) / vector : 4;
  s.q_unroll = 6;
  s.kv_vectors = 4;
  // Softmax passes over one register tile's rows while their scores are in L1 (~10% at T = 2048).
  s.row_block = s.q_unroll;
  if (dv_vectors > 4) {
    // Wide V (Dh = 128: 8 vectors a row): fewer rows per P·V register tile, and V in blocks of 32
    // keys (16 KiB) that stay in L1 for the 4 register tiles of a 12-row block, so P·V is not
    // bound by L2 bandwidth (~20% at T = 2048, Dh = 128).
    s.pv_rows = static_cast<int>(std::max<std::int64_t>(1, 24 / dv_vectors));
    s.row_block = 2 * s.q_unroll;
    s.pv_keys = 32;
  }
  return s;
}

flash_schedule banded(flash_schedule s, std::int64_t band) {
  if (band <= 0) return s;
  const std::int64_t quarter = (band / 4 + s.vector - 1) / s.vector * s.vector;
  s.kv_tile = static_cast<int>(std::clamp<std::int64_t>(quarter, 4 * s.vector, s.kv_tile));
  s.q_tile = std::min(s.q_tile, 4 * s.q_unroll);
  return s;
}

}  // namespace attn::gen
