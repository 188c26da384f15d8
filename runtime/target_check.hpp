#pragma once
// The JIT runs what it compiles in this process, so it can only take targets this CPU runs:
// same architecture, bit width and OS as the host, and no instruction-set feature the host lacks.
// Anything else would crash inside LLVM or at the first call; it is a compile_error instead
// (other architectures are for ahead-of-time compilation).
#include <string>
#include <Halide.h>

namespace attn::detail {

// compile_error naming `spelled` (the target as the user wrote it) and what the host lacks.
void check_jit_can_run(const Halide::Target& target, const std::string& spelled);

}  // namespace attn::detail
