#pragma once
// jit_options::bind checked against the expression when compiling: a dim the expression lacks,
// a static dim bound to another size, a size outside [1, 2^31 - 1] or two sizes for one dim
// are errors (argument_error / shape_error), never silently ignored.
#include <deque>
#include <span>
#include <string>
#include "dsl/dim.hpp"
#include "dsl/ir.hpp"
#include "tensor_checks.hpp"

namespace attn::detail {

// The run-time dims the bindings fix (a static dim bound to its own size adds nothing).
dim_sizes checked_bindings(const ir::graph& g, std::span<const dsl::dim_binding> bind);

// A command line's "T=128" -> a binding (argument_error naming `option` if it is not NAME=SIZE).
// The name's storage is appended to `names`, as a binding holds a view of it.
dsl::dim_binding parse_dim_binding(const std::string& option, const std::string& text, std::deque<std::string>& names);

}  // namespace attn::detail
