#pragma once
// The C compiler attn-gen compiles a kernel's entry point with (aot_entry.hpp), for the kernel's
// target. Chosen, in order: the command given (attn-gen --cc), $CC, the compiler attnforge was
// built with. A clang is told the target (--target=TRIPLE), so any clang builds for any target;
// another compiler must already be one for the target: for a target that is not this machine's,
// the default compiler is refused unless it is a clang (a compile_error that says what to pass).
#include <filesystem>
#include <string>
#include <vector>
#include <Halide.h>

namespace attn::detail {

struct c_compiler {
  std::vector<std::string> command;  // the program and the arguments it was given with
  bool chosen = false;               // given (--cc, $CC), not the default
};

// `spelled`: the command as given, its words separated by spaces; empty: $CC or the default.
c_compiler find_c_compiler(const std::string& spelled);

// The command that compiles C for `target`, up to the files: the compiler, --target=TRIPLE for a
// clang and another machine, the flags. Throws compile_error if the default compiler cannot build
// for `target`; `scratch` is a folder for the compiler's output.
std::vector<std::string> c_compile_command(const c_compiler& cc, const Halide::Target& target, const std::filesystem::path& scratch);

// Compiles the C file `source` into the object `object`; compile_error with the command and its
// output when it fails (its warnings, if it succeeds, go to stderr).
void compile_c(const std::vector<std::string>& command, const std::filesystem::path& source, const std::filesystem::path& object,
               const std::filesystem::path& scratch);

}  // namespace attn::detail
