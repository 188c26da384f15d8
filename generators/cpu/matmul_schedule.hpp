#pragma once
// The CPU schedule of one product stage, f(n, m, ...) += a(k, m) · b(n, k): register-blocked,
// vectorised, parallel. A plain parameter struct (printable, parseable through its table: a tuner
// can search it, a database store it), a default per shape and target, and the function that applies it.
//
// Loop nest (innermost last; V = vector_width, W = vectors · V):
//   parallel for each outer index (heads, batch, fused)
//     parallel for each row block of `rows` rows                      (mo)
//       for each column tile of W columns                             (no)
//         acc[rows][W] = 0                      vectors · rows accumulators in vector registers
//         for k in the reduction                (not unrolled: that spills the tile's registers)
//           for each row r, each vector j (both unrolled):
//             acc[r][j·V ..] += broadcast(a(k, m0 + r)) · b(n0 + j·V .., k)    one FMA
//         product(n0 .., m0 ..) = acc           vector stores
// With col_block, the column tiles are split into blocks, outermost: every row block runs over one
// block of b's columns before the next (a block of b small enough to stay in L2), packed first
// into panels one tile wide (b_panels(lane, k, tile) = b(tile·W + lane, k)): the rows a tile
// streams over k are then contiguous.
// With k_block, a row block runs the reduction in blocks (outermost in the row block) and adds each
// block's register tile into the row block's columns in memory: for operands too large for cache.
// Tails in n and m are guarded (predicated vectors, guarded rows) so that any size runs and no
// operand is read outside its bounds; static sizes are given to Halide, so whole tiles have no tail
// code. A matrix·vector product (columns not contiguous in the operand) runs as dot products.
#include <cstdint>
#include <string>
#include <string_view>
#include <Halide.h>
#include "generators/lowering/lower.hpp"
#include "generators/parameter_table.hpp"

namespace attn::gen {

struct matmul_schedule {
  int vector_width = 16;  // floats per vector (the target's natural width)
  int vectors = 2;        // vectors across a tile's columns: the tile is vectors · vector_width wide
  int rows = 12;          // rows per tile; vectors · rows accumulators must fit the vector registers
  int k_block = 0;        // reduction block per pass over a row block's tiles; 0: the whole reduction at once
  int col_block = 0;      // columns per pass over all row blocks (b's block stays in L2); 0: all. Not with k_block
  bool parallel = true;   // row blocks (fused with heads and batch) run in parallel

  // Each parameter's name, range and place in the text (parameter_table.hpp).
  static const parameter_table<matmul_schedule>& parameters();
  // "vector_width=16 vectors=2 rows=12 k_block=0 col_block=0 parallel=1"
  std::string to_string() const;
  // The inverse of to_string; parameters in any order, separated by spaces or commas, missing ones
  // keep their defaults. Throws std::invalid_argument naming the parameter, the value given and
  // what is allowed.
  static matmul_schedule parse(std::string_view text);

  bool operator==(const matmul_schedule&) const = default;
};

// What is known of a product's sizes when compiling; 0 means known only at run time.
struct matmul_shape {
  std::int64_t rows = 0;   // m: output rows (often T)
  std::int64_t cols = 0;   // n: output columns, contiguous in memory
  std::int64_t depth = 0;  // k: the contracted dim
};

// The shape of a lowered product stage (static and bound dims; run-time ones are 0).
matmul_shape shape_of(const lowered::stage& product);

// A good schedule for this shape on this target: the vector width and register count decide the
// tile, the static sizes trim it (no tile wider than the product).
matmul_schedule default_matmul_schedule(const matmul_shape& shape, const Halide::Target& target);

// Schedules a product stage (kind == product). Returns the Func that holds the product in memory
// (computed at root): its consumers read it in place of product.func. The stage's own Func becomes
// the per-tile register accumulator, so when product.func is a pipeline output, realise the
// returned Func instead.
Halide::Func apply_matmul_schedule(const lowered::stage& product, const matmul_schedule& s);

}  // namespace attn::gen
