#pragma once
// Random tensors for every terminal of a graph at given sizes and batch: what the tuner runs its
// candidates on (batched tensors with a leading batch dim where the batch is more than 1). Inputs uniform in [-1, 1]; weights scaled by 1/√rows so products stay O(1);
// integer inputs: lengths (rank 0) the full length, others small values in [0, 3]. Each in its
// tensor's element type.
#include <map>
#include <string>
#include <vector>
#include "dsl/ir.hpp"
#include "runtime/tensor.hpp"

namespace attn::tune {

using dim_sizes = std::map<std::string, std::int64_t, std::less<>>;

struct kernel_inputs {
  std::vector<tensor<float>> floats;
  std::vector<tensor<std::int32_t>> ints;
  std::vector<tensor<bfloat16>> bf16s;  // tensors declared bf16 or f16: the same values, rounded
  std::vector<tensor<float16>> f16s;
  std::vector<tensor_view> views;  // one per terminal, in call order
};

// Throws std::invalid_argument naming a run-time dim missing from `sizes`.
kernel_inputs random_inputs(const ir::graph& g, const dim_sizes& sizes, unsigned seed, std::int64_t batch = 1);

}  // namespace attn::tune
