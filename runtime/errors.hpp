#pragma once
// Typed run-time errors. Messages name the tensor, the dim, what was expected and what was given.
// Every error but internal_error is the caller's to correct: a tensor, an option, a target, a file.
#include <stdexcept>
#include <string>

namespace attn {

struct error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Wrong rank or size, or two tensors disagreeing on a shared dim.
struct shape_error : error {
  using error::error;
};
// A tensor of the wrong element type.
struct dtype_error : error {
  using error::error;
};
// Wrong number of tensors, a null pointer, an output that overlaps nothing sensible.
struct argument_error : error {
  using error::error;
};
// Halide refused the pipeline, or the target is unknown or cannot run on this machine.
struct compile_error : error {
  using error::error;
};
// A call would need more memory than the budget (attn::set_memory_budget) or than Halide can
// address in one buffer.
struct memory_error : error {
  using error::error;
};
// A broken invariant inside attnforge, not a mistake of the caller's: a bug in attnforge, please
// report it (the message says so). The lowering (generators/, below the runtime) reports such a
// break as std::logic_error; attn::jit and attn::aot::generate turn it into this error.
struct internal_error : error {
  explicit internal_error(const std::string& what)
      : error("attnforge internal error: " + what + " (a bug in attnforge, please report it)") {}
};

}  // namespace attn
