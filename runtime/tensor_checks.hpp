#pragma once
// Checks a call's tensors against the expression before anything runs, and binds the run-time
// dims. Every failure throws a typed error naming the tensor, the dim, expected and given.
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>
#include "dsl/ir.hpp"
#include "tensor.hpp"

namespace attn::detail {

using dim_sizes = std::map<std::string, std::int64_t, std::less<>>;

struct call_shape {
  std::int64_t batch = 1;
  bool explicit_batch = false;  // some tensor carried a batch dim: so will the outputs
  dim_sizes dims;               // every dim's size in this call
};

// The element type a terminal's tensor has: int32 for integer inputs, else the declared float type.
dtype dtype_of(const ir::node& terminal);
dtype dtype_of(ir::element e);
// Each result's element type, in ir::graph::outputs() order (ir::result_types).
std::vector<dtype> result_dtypes(const ir::graph& g);

call_shape check_inputs(const ir::graph& g, std::span<const tensor_view> inputs, const dim_sizes& bound);

// The row-major sizes of a node's result in this call (batch first, if the call has one).
std::vector<std::int64_t> result_sizes(const ir::node& n, const call_shape& call);

void check_output(const char* what, const tensor_view& v, const std::vector<std::int64_t>& expected, dtype type);

}  // namespace attn::detail
