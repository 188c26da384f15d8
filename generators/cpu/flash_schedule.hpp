#pragma once
// The fused (flash) attention kernel's parameters: plain data, printable and parseable through
// their table (parameter_table.hpp), so a tuner can search them and a database can store them.
// Halide-free.
#include <cstdint>
#include <string>
#include "generators/parameter_table.hpp"

namespace attn::gen {

struct flash_schedule {
  int q_tile = 48;      // query rows per task (one task: a batch item, a head, a query tile)
  int kv_tile = 256;    // keys per online-softmax step (a multiple of the vector width)
  int partial_tile = 64;  // keys per step where a mask's edge or the last key cuts a key tile
                          // (a divisor of kv_tile and a multiple of vector; 0: kv_tile)
  int q_unroll = 6;     // query rows per register tile, in Q·Kᵀ and in P·V
  int kv_vectors = 4;   // vectors of keys per register tile in Q·Kᵀ
  int vector = 16;      // floats per vector
  int pv_rows = 0;      // query rows per register tile in P·V (0: q_unroll)
  int pv_keys = 0;      // P·V walks keys in blocks of this many (0: the whole key tile at once)
  int row_block = 0;    // each key tile is walked in blocks of this many query rows: score, softmax
                        // and P·V of one block while its scores are in L1 (0: the whole query tile)
  bool stage_kv = false;   // copy each key tile of Kᵀ (a product's right operand) into a padded
                           // per-task buffer, walked key block by key block (no cache-set conflicts
                           // at power-of-two lengths); the copy costs about what it saves at Dh = 64
  bool pack_state = true;  // the online softmax's state holds V's row as vectors of their own, so
                           // the running max and sum are rescaled once per row (flash_funcs::state);
                           // needs V's width known when compiling (static or bound) and a multiple
                           // of vector
  int backward_q_tile = 128;  // query rows per tile of the fused backward (its key tiles: kv_tile keys,
                             // or as many as its rows in a sweep)
  bool backward_sweep = true;  // the fused backward computes each tile once, parallel over heads and
                               // batch items only; else in two passes, each recomputing the tiles,
                               // parallel over tiles too (fused_backward.hpp)

  // Each parameter's name, range and place in the text; kv_tile a multiple of vector, partial_tile
  // dividing kv_tile and a multiple of vector (or 0).
  static const parameter_table<flash_schedule>& parameters();

  bool operator==(const flash_schedule&) const = default;
};

// "q_tile=48 kv_tile=256 partial_tile=64 q_unroll=6 kv_vectors=4 vector=16 stage_kv=0 pv_keys=0
// row_block=0 pv_rows=0 pack_state=1 backward_q_tile=128 backward_sweep=1" (flags as 0 and 1)
std::string to_string(const flash_schedule& s);

// Reads the text above; missing parameters keep the values of `base`, except that base's
// partial_tile, when not given, is fitted to the tiles given. Throws std::invalid_argument naming
// the parameter, the value given and what is allowed (parameter_table.hpp).
flash_schedule parse_flash_schedule(const std::string& text, flash_schedule base);

// A good default for these sizes (0: not known before the call) on a target with `vector` floats per vector.
flash_schedule default_flash_schedule(std::int64_t nq, std::int64_t nk, std::int64_t dv, int vector);

// Accumulators a register tile may use: 28 of 32 vector registers with 16-float vectors (AVX-512),
// 14 of 16 otherwise.
int register_budget(int vector);

// Vectors of V's row one P·V register tile holds: ⌈dv / vector⌉ (4 if dv is not known), halved
// until pv_rows (or q_unroll) rows of them fit the register budget.
int pv_tile_vectors(const flash_schedule& s, std::int64_t dv, int rows = 0);

// The default for a mask that keeps at most `band` consecutive keys per query (a sliding window):
// key tiles about a quarter of the band, so most visited tiles are full and few keys are wasted;
// partial tiles (at the band's edges) at most half a key tile.
flash_schedule banded(flash_schedule s, std::int64_t band);

// The default for a mask whose kept keys end (or start) at an edge that moves with the query
// (causal, a sliding window): query tiles of 4 register tiles of rows, so fewer of a tile's
// computed pairs lie past the edge.
flash_schedule along_diagonal(flash_schedule s);

// The default tiles fitted to an attention's mask: along_diagonal() if its kept keys have such an
// edge (`diagonal`), banded() if they form a band.
flash_schedule fitted_to_mask(flash_schedule s, std::int64_t band, bool diagonal);

}  // namespace attn::gen
