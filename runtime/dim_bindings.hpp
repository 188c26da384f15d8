#pragma once
// jit_options::bind checked against the expression when compiling: a dim the expression lacks,
// a static dim bound to another size, a size outside [1, 2^31 - 1] or two sizes for one dim
// are errors (argument_error / shape_error), never silently ignored.
#include <span>
#include "dsl/dim.hpp"
#include "dsl/ir.hpp"
#include "tensor_checks.hpp"

namespace attn::detail {

// The run-time dims the bindings fix (a static dim bound to its own size adds nothing).
dim_sizes checked_bindings(const ir::graph& g, std::span<const dsl::dim_binding> bind);

}  // namespace attn::detail
