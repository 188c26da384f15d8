#include "generators/cpu/flash_schedule.hpp"

#include <algorithm>
#include <numeric>

namespace attn::gen {

namespace {

using S = flash_schedule;
constexpr parameter<S> parameters[] = {
    number<&S::q_tile>("q_tile", 1, 4096),
    number<&S::kv_tile>("kv_tile", 1, 65536),
    number<&S::partial_tile>("partial_tile", 0, 65536),
    number<&S::q_unroll>("q_unroll", 1, 32),
    number<&S::kv_vectors>("kv_vectors", 1, 16),
    number<&S::vector>("vector", 1, 64),
    choice<&S::stage_kv>("stage_kv", on_off),
    number<&S::pv_keys>("pv_keys", 0, 65536),
    number<&S::row_block>("row_block", 0, 4096),
    number<&S::pv_rows>("pv_rows", 0, 32),
    choice<&S::pack_state>("pack_state", on_off),
    number<&S::backward_q_tile>("backward_q_tile", 1, 4096),
    choice<&S::backward_sweep>("backward_sweep", on_off),
};
constexpr relation<S> relations[] = {
    {"kv_tile vector", "kv_tile must be a multiple of vector", [](const S& s) { return s.kv_tile % s.vector == 0; }},
    {"partial_tile kv_tile vector", "partial_tile must divide kv_tile and be a multiple of vector, or be 0 (kv_tile)",
     [](const S& s) { return s.partial_tile == 0 || (s.kv_tile % s.partial_tile == 0 && s.partial_tile % s.vector == 0); }},
    {"backward_q_tile vector backward_sweep", "with backward_sweep, backward_q_tile (then also its key tiles) must be a multiple of vector",
     [](const S& s) { return !s.backward_sweep || s.backward_q_tile % s.vector == 0; }},
};
constexpr parameter_table<S> table{"schedule", parameters, relations};

// The largest multiple of vector that divides kv_tile and is at most partial_tile (0 stays 0).
int fitted_partial_tile(const flash_schedule& s) {
  if (s.partial_tile == 0) return 0;
  int p = std::min(s.partial_tile, s.kv_tile) / s.vector * s.vector;
  while (p > s.vector && s.kv_tile % p != 0) p -= s.vector;
  return std::max(p, s.vector);
}

}  // namespace

const parameter_table<flash_schedule>& flash_schedule::parameters() { return table; }

std::string to_string(const flash_schedule& s) { return table.print(s); }

flash_schedule parse_flash_schedule(const std::string& text, flash_schedule s) {
  const std::vector<std::string_view> given = table.read(text, s);
  if (std::ranges::find(given, "partial_tile") == given.end()) s.partial_tile = fitted_partial_tile(s);  // base's, fitted
  table.check(s);
  return s;
}

int register_budget(int vector) { return vector >= 16 ? 28 : 14; }

int pv_tile_vectors(const flash_schedule& s, std::int64_t dv, int rows) {
  if (rows == 0) rows = s.pv_rows > 0 ? s.pv_rows : s.q_unroll;
  int vectors = dv > 0 ? static_cast<int>((dv + s.vector - 1) / s.vector) : 4;
  while (vectors > 1 && vectors * rows > register_budget(s.vector)) vectors = (vectors + 1) / 2;
  return vectors;
}

flash_schedule default_flash_schedule(std::int64_t nq, std::int64_t nk, std::int64_t dv, int vector) {
  flash_schedule s;
  s.vector = vector;
  // Short sequences: smaller tiles, so that masks still skip work and tails stay small. Keys
  // known only at the call may be many (decoding: one query against a long cache, where tiles of
  // 64 keys were 1.6x slower than 256).
  const bool short_keys = nk > 0 && nk <= 256 && (nq == 0 || nq <= 256);
  s.kv_tile = short_keys ? 4 * vector : 16 * vector;
  s.partial_tile = 4 * vector;  // one register tile of keys: where a mask or the last key cuts a tile
  s.q_tile = nq > 0 && nq <= 96 ? 12 : 48;
  // Register tiles of 24 accumulators of 32 vector registers (16-float vectors: AVX-512), 12 of
  // 16 otherwise (AVX2: 6 × 4 spilled, 6 × 2 is ~1.3× faster at T = 4096): Q·Kᵀ is q_unroll rows
  // × kv_vectors vectors of keys; P·V is q_unroll (or pv_rows) rows × ⌈Dv / vector⌉ vectors.
  const std::int64_t dv_vectors = dv > 0 ? (dv + vector - 1) / vector : 4;
  const int accumulators = vector >= 16 ? 24 : 12;
  s.q_unroll = 6;
  s.kv_vectors = accumulators / s.q_unroll;
  // Fewer queries than a register tile's rows, known when compiling (decoding a few tokens): tiles
  // of exactly those rows; six rows for one query were 1.3x slower (S = 8192, build/bench/decoding).
  if (nq > 0 && nq < s.q_unroll) s.q_tile = s.q_unroll = static_cast<int>(nq);
  // The fused backward's square tiles: a whole number of register tiles of rows (q_unroll) and an
  // even number of vectors, so that its products keep q_unroll rows and two vectors of keys or
  // more; the largest such up to 128: 96. With 16-float vectors, where lengths known when compiling
  // are padded less by tiles of 128 (powers of two): 128, as the pairs saved outweigh its products'
  // register tiles of 4 rows (full attention, T = 1024: 4-8% faster, 2048: 5%; at T = 960, 17%
  // slower); with 8-float vectors they do not (5-6% slower at T = 1024 and 2048).
  const int whole = std::lcm(s.q_unroll, 2 * vector);
  s.backward_q_tile = std::max(1, 128 / whole) * whole;
  const auto padded = [](std::int64_t n, std::int64_t tile) { return (n + tile - 1) / tile * tile; };
  if (vector >= 16 && nq > 0 && nk > 0 && padded(nq, 128) * padded(nk, 128) < padded(nq, s.backward_q_tile) * padded(nk, s.backward_q_tile))
    s.backward_q_tile = 128;
  // Softmax passes over one register tile's rows while their scores are in L1 (~10% at T = 2048).
  s.row_block = s.q_unroll;
  if (dv_vectors * s.q_unroll > accumulators) {
    // Wide V (Dh = 128: 8 vectors a row on AVX-512, 16 on AVX2): P·V register tiles keep q_unroll
    // rows and take the part of V's row that fits the registers (pv_tile_vectors: 6 × 4 vectors on
    // AVX-512, 6 × 2 on AVX2), so each vector of V loaded feeds 6 FMAs; rows in blocks of 12:
    // faster than P·V tiles of 3 rows × all of V's row. On AVX2 V stays in blocks of 32 keys
    // (16 KiB, in L1 for the 12-row block's register tiles), faster there than one row of all of V.
    s.row_block = 2 * s.q_unroll;
    if (vector < 16) s.pv_keys = 32;
  }
  return s;
}

flash_schedule banded(flash_schedule s, std::int64_t band) {
  if (band <= 0) return s;
  const std::int64_t quarter = (band / 4 + s.vector - 1) / s.vector * s.vector;
  s.kv_tile = static_cast<int>(std::clamp<std::int64_t>(quarter, 4 * s.vector, s.kv_tile));
  // Partial tiles of at most half a key tile (two vectors or more): fewer computed keys at the
  // band's edges are masked (a few percent faster for a window of 256 from T = 1024 on).
  s.partial_tile = std::max(2 * s.vector, std::min(s.partial_tile, s.kv_tile / 2));
  s.partial_tile = fitted_partial_tile(s);
  // The backward's square tiles as the forward's key tiles: a band's edges waste less (a window
  // of 256: 64 against 128 is ~10% faster at T = 1024, ~5% at 2048).
  s.backward_q_tile = std::min(s.backward_q_tile, s.kv_tile);
  return s;
}

// Masks along the diagonal (causal and its variants) take query tiles of at most 4 register tiles:
// fewer partial tiles on the diagonal, a few percent faster at T <= 1024 and as fast beyond.
// Without a mask the larger tile stays: smaller ones are slightly slower there.
flash_schedule along_diagonal(flash_schedule s) {
  s.q_tile = std::min(s.q_tile, 4 * s.q_unroll);
  return s;
}

flash_schedule fitted_to_mask(flash_schedule s, std::int64_t band, bool diagonal) {
  return banded(diagonal ? along_diagonal(s) : s, band);
}

}  // namespace attn::gen
