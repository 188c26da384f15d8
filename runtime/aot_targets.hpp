#pragma once
// The targets of a library built ahead of time, parsed and checked before any code is generated:
// LLVM aborts the process, rather than reporting an error, on some targets Halide accepts.
// Refused, with a compile_error naming the target: an unknown target, an architecture attnforge's
// kernels are not known to build for (RISC-V: Halide 21's vector code generation fails an LLVM
// assertion on them), an architecture this libHalide was built without, a target given twice,
// and several targets for different machines (one library holds one architecture, bit width and OS).
#include <string>
#include <vector>
#include <Halide.h>

namespace attn::detail {

// "host" (alone or with features: "host-cuda") is this machine's target.
std::vector<Halide::Target> aot_targets(const std::vector<std::string>& spelled);

}  // namespace attn::detail
