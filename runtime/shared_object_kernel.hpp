#pragma once
// A Halide pipeline compiled to a shared object (Halide's object file, linked by the system
// C++ driver) and loaded with dlopen: how the disk cache stores kernels and loads them in a
// later process without compiling. The object carries its own copy of Halide's runtime, bound
// to itself (-Bsymbolic semantics through a version script exporting only the entry points),
// so it never mixes with the libHalide this process may have loaded for the JIT.
// A loaded object stays mapped until the process exits: its runtime's worker threads may still
// sit in its code after a call returns, so unloading it would not be safe.
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>
#include <Halide.h>

namespace attn::detail {

class shared_object_kernel {
 public:
  // Loads `path` and checks it exports the kernel with `buffers` buffer arguments (inputs and outputs).
  // Throws attn::error saying why when it cannot.
  static std::shared_ptr<const shared_object_kernel> load(const std::filesystem::path& path, std::size_t buffers);

  // Runs the kernel; Halide's error text (if any) is appended to `message`.
  int call(halide_buffer_t* const* buffers, std::size_t count, std::string& message) const;

 private:
  using argv_fn = int (*)(void**);
  explicit shared_object_kernel(argv_fn f) : fn_(f) {}
  argv_fn fn_;
};

// The system linker is missing or failed: the kernel can still be JIT-compiled.
struct link_failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Compiles `pipeline` for `target` into the shared object `so_path` (its object file is written
// next to it). Throws attn::compile_error when Halide fails, link_failure when the linker does.
void compile_shared_object(const Halide::Pipeline& pipeline, const std::vector<Halide::Argument>& arguments,
                           const Halide::Target& target, const std::filesystem::path& so_path);

}  // namespace attn::detail
