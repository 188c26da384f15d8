#pragma once
// Calling a kernel with its tensors by name, in any order: kernel.run({{"x", X}, {"wq", WQ}}).
// Two tensors of the same shape cannot swap places unnoticed, as they can by position.
#include <span>
#include <string>
#include <string_view>
#include <vector>
#include "tensor.hpp"

namespace attn {

struct named_tensor {
  std::string_view name;
  tensor_view tensor;
};

namespace detail {

// The tensors in call order (`parameters`, kernel::parameters()). Every parameter exactly once:
// a missing, unknown or repeated name is an argument_error naming it and `call`.
std::vector<tensor_view> in_call_order(const std::vector<std::string>& parameters, std::span<const named_tensor> named,
                                       std::string_view call = "kernel call");

}  // namespace detail
}  // namespace attn
