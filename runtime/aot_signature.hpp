#pragma once
// The tensors of a kernel built ahead of time, in its C function's parameter order: the inputs
// (kernel::parameters()' order), the output, then the weights and the log-sum-exp when built with
// them. Each with its element type, whether it has a batch dim, and its dims row-major with who
// sets each size. One description for the header's comment and the entry point's checks.
#include <cstdint>
#include <string>
#include <vector>
#include "aot_compile.hpp"
#include "tensor.hpp"

namespace attn::detail {

struct aot_dim {
  enum class set_by { caller, expression, binding };  // binding: attn-gen --bind, when built
  std::string name;
  std::int64_t size = 0;  // 0 when set by the caller
  set_by by = set_by::caller;
};

struct aot_tensor {
  std::string name;
  bool output = false;
  dtype type = dtype::f32;
  bool batched = false;   // a batch dim before the others (outermost)
  std::vector<aot_dim> dims;  // row-major, without the batch
  std::string note;       // what an extra output holds, for the header
};

// Throws argument_error / shape_error for bad bindings or options (as generate()).
std::vector<aot_tensor> aot_signature(const ir::graph& g, const aot::options& o);

}  // namespace attn::detail
