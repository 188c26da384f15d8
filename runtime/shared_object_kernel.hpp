#pragma once
// A Halide pipeline compiled to a shared object (Halide's object file, linked by the system
// C++ driver) and loaded with dlopen: how the disk cache stores kernels and loads them in a
// later process without compiling. The object carries its own copy of Halide's runtime, bound
// to itself (a version script exports only the entry points), so it never mixes with the
// libHalide this process may have loaded for the JIT.
//
// Its parallel loops run on one thread pool shared by every loaded kernel (parallel_runtime.hpp),
// not on a pool of its own: no worker thread ever waits inside a kernel's code between calls,
// so a kernel is unloaded (dlclose) when its last owner lets go.
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>
#include <Halide.h>
#include "parallel_runtime.hpp"

namespace attn::detail {

// A dlopen'ed file, closed when the last owner lets go. It is opened under a name never used
// before in this process (a fresh hard link beside it), so the dynamic loader never hands back
// another object that once had the same path.
class shared_object {
 public:
  // Throws attn::error saying why it cannot be loaded.
  static std::shared_ptr<const shared_object> load(const std::filesystem::path& path);
  ~shared_object();
  shared_object(const shared_object&) = delete;
  shared_object& operator=(const shared_object&) = delete;

  void* symbol(const std::string& name) const;  // nullptr if absent

 private:
  explicit shared_object(void* handle) : handle_(handle) {}
  void* handle_;
};

class shared_object_kernel {
 public:
  // Loads `path` and checks it exports the kernel with `buffers` buffer arguments (inputs and
  // outputs); its parallel loops go to `pool`. Throws attn::error saying why when it cannot.
  static std::shared_ptr<const shared_object_kernel> load(const std::filesystem::path& path, std::size_t buffers,
                                                          const parallel_runtime& pool);

  // Runs the kernel; Halide's error text (if any) is appended to `message`.
  int call(halide_buffer_t* const* buffers, std::size_t count, std::string& message) const;

 private:
  using argv_fn = int (*)(void**);
  shared_object_kernel(std::shared_ptr<const shared_object> object, argv_fn f) : object_(std::move(object)), fn_(f) {}
  std::shared_ptr<const shared_object> object_;
  argv_fn fn_;
};

// The system linker is missing or failed: the kernel can still be JIT-compiled.
struct link_failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Links `object` into the shared object `so_path`, exporting only `exports` (C names).
// Throws link_failure when the linker cannot be run or fails.
void link_shared_object(const std::filesystem::path& object, const std::filesystem::path& so_path,
                        const std::vector<std::string>& exports);

// Compiles `pipeline` for `target` into the shared object `so_path` (its object file is written
// next to it). Throws attn::compile_error when Halide fails, link_failure when the linker does.
void compile_shared_object(const Halide::Pipeline& pipeline, const std::vector<Halide::Argument>& arguments,
                           const Halide::Target& target, const std::filesystem::path& so_path);

}  // namespace attn::detail
