#pragma once
// The GPU schedule of one product stage, f(n, m, ...) += a(k, m) · b(n, k): blocks of
// threads_x × threads_y threads, each thread a tile of cols × rows outputs accumulated in
// registers over the whole reduction (unrolled, so the accumulators have constant indices).
// Other dims (heads, batch) are a third block dim. Tails are guarded. Plain parameters,
// printable and parseable through their table like matmul_schedule, with a default per shape.
#include <string>
#include <string_view>
#include <Halide.h>
#include "generators/cpu/matmul_schedule.hpp"
#include "generators/parameter_table.hpp"

namespace attn::gen {

struct matmul_gpu_schedule {
  int threads_x = 16;  // threads across the output's columns (contiguous in memory)
  int threads_y = 16;  // threads across its rows
  int cols = 4;        // columns per thread (adjacent)
  int rows = 4;        // rows per thread

  // Each parameter's name, range and place in the text; at most 1024 threads per block.
  static const parameter_table<matmul_gpu_schedule>& parameters();
  // "threads_x=16 threads_y=16 cols=4 rows=4"
  std::string to_string() const;
  // The inverse; missing parameters keep their defaults. Throws std::invalid_argument naming the
  // parameter, the value given and what is allowed (parameter_table.hpp).
  static matmul_gpu_schedule parse(std::string_view text);

  bool operator==(const matmul_gpu_schedule&) const = default;
};

// Narrow products get narrower blocks, so fewer threads idle on guarded tails.
matmul_gpu_schedule default_matmul_gpu_schedule(const matmul_shape& shape);

// As apply_matmul_schedule: returns the Func that holds the product in memory (computed at root).
Halide::Func apply_matmul_gpu_schedule(const lowered::stage& product, const matmul_gpu_schedule& s);

}  // namespace attn::gen
