#include "shared_object_kernel.hpp"

#include <dlfcn.h>
#include <unistd.h>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <optional>
#include "child_process.hpp"
#include "errors.hpp"
#include "private_temp_dir.hpp"
#include "scratch_memory.hpp"


namespace attn::detail {

namespace {

constexpr const char* entry = "attn_kernel";

// Halide's runtime calls this with the user context the call passed: our message string.
void collect_error(void* user_context, const char* msg) {
  if (user_context != nullptr) static_cast<std::string*>(user_context)->append(msg);
}

// The C++ driver this library was built with (it knows where libc and libpthread are), unless
// ATTN_LINKER names another.
std::string linker() {
  if (const char* l = std::getenv("ATTN_LINKER"); l && *l) return l;
  return ATTN_DEFAULT_LINKER;
}

}  // namespace

void link_shared_object(const std::filesystem::path& object, const std::filesystem::path& so_path,
                        const std::vector<std::string>& exports) {
  const std::filesystem::path script = so_path.parent_path() / (so_path.stem().string() + ".map"),
                              log = so_path.parent_path() / (so_path.stem().string() + ".log");
  {
    std::ofstream map(script);
    map << "{ global: ";
    for (const std::string& e : exports) map << e << "; ";
    map << "local: *; };\n";
  }
  const std::string cmd = linker();
  std::string why;
  const std::optional<int> status = run_program({cmd, "-shared", "-o", so_path.string(), object.string(),
                                                 "-Wl,--version-script=" + script.string(), "-lpthread", "-ldl", "-lm"},
                                                log, why);
  if (!status) throw link_failure("cannot run the linker '" + cmd + "': " + why);
  if (*status != 0) throw link_failure("linking with '" + cmd + "' failed: " + read_text(log));
}

std::shared_ptr<const shared_object> shared_object::load(const std::filesystem::path& path) {
  // The loader knows objects by the name they were opened under: a fresh hard link gives this
  // file a name never used before, so an earlier object of the same path is never taken for it.
  // (A folder we cannot write in is one only root can change: its files are loaded as named.)
  static std::atomic<unsigned long> counter{0};
  std::optional<private_temp_dir> fresh;
  std::filesystem::path name = path;
  try {
    fresh.emplace(path.parent_path(), ".load-");
    const std::filesystem::path link = fresh->path() / ("k" + std::to_string(counter++) + ".so");
    if (::link(path.c_str(), link.c_str()) == 0) name = link;
  } catch (const error&) {
  }
  void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) throw error(std::string("cannot load: ") + dlerror());
  return std::shared_ptr<const shared_object>(new shared_object(handle));
}

shared_object::~shared_object() { dlclose(handle_); }

void* shared_object::symbol(const std::string& name) const { return dlsym(handle_, name.c_str()); }

std::shared_ptr<const shared_object_kernel> shared_object_kernel::load(const std::filesystem::path& path, std::size_t buffers,
                                                                       const parallel_runtime& pool) {
  auto object = shared_object::load(path);
  const auto fn = reinterpret_cast<argv_fn>(object->symbol(std::string(entry) + "_argv"));
  const auto metadata = reinterpret_cast<const halide_filter_metadata_t* (*)()>(object->symbol(std::string(entry) + "_metadata"));
  const auto set_handler = reinterpret_cast<halide_error_handler_t (*)(halide_error_handler_t)>(object->symbol("halide_set_error_handler"));
  const auto set_malloc = reinterpret_cast<halide_malloc_t (*)(halide_malloc_t)>(object->symbol("halide_set_custom_malloc"));
  const auto set_free = reinterpret_cast<halide_free_t (*)(halide_free_t)>(object->symbol("halide_set_custom_free"));
  const auto set_parallel = reinterpret_cast<decltype(&halide_set_custom_parallel_runtime)>(object->symbol("halide_set_custom_parallel_runtime"));
  if (!fn || !metadata || !set_handler || !set_malloc || !set_free || !set_parallel)
    throw error("not an attnforge kernel (entry points missing)");
  // The user context comes first, then one buffer per tensor.
  if (metadata()->num_arguments != static_cast<int>(buffers) + 1)
    throw error("kernel takes " + std::to_string(metadata()->num_arguments - 1) + " tensors, expected " + std::to_string(buffers));
  // This object's own runtime: none of these affects another kernel.
  set_handler(&collect_error);
  // Its intermediates come from the scratch cache, as the JIT's do (scratch_memory.hpp).
  set_malloc([](void*, std::size_t bytes) { return scratch_malloc(bytes); });
  set_free([](void*, void* p) { scratch_free(p); });
  set_parallel(pool.do_par_for, pool.do_task, pool.do_loop_task, pool.do_parallel_tasks, pool.semaphore_init,
               pool.semaphore_try_acquire, pool.semaphore_release);
  return std::shared_ptr<const shared_object_kernel>(new shared_object_kernel(std::move(object), fn));
}
int shared_object_kernel::call(halide_buffer_t* const* buffers, std::size_t count, std::string& message) const {
  std::vector<void*> argv(count + 1);
  void* user_context = &message;
  argv[0] = &user_context;  // scalars by address; buffers as themselves
  for (std::size_t i = 0; i < count; ++i) argv[i + 1] = buffers[i];
  return fn_(argv.data());
}

void compile_shared_object(const Halide::Pipeline& pipeline, const std::vector<Halide::Argument>& arguments,
                           const Halide::Target& target, const std::filesystem::path& so_path) {
  const std::filesystem::path object = so_path.parent_path() / (so_path.stem().string() + ".o");
  try {
    Halide::Pipeline p = pipeline;  // compile_to_object is not const; the pipeline is shared
    p.compile_to_object(object.string(), arguments, entry, target.with_feature(Halide::Target::UserContext));
  } catch (const Halide::Error& e) {
    throw compile_error(std::string("Halide: ") + e.what());
  }
  link_shared_object(object, so_path,
                     {entry, std::string(entry) + "_argv", std::string(entry) + "_metadata", "halide_set_error_handler",
                      "halide_set_custom_malloc", "halide_set_custom_free", "halide_set_custom_parallel_runtime"});
}

}  // namespace attn::detail
