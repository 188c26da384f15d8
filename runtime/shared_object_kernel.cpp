#include "shared_object_kernel.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include "errors.hpp"
#include "scratch_memory.hpp"

extern char** environ;

namespace attn::detail {

namespace {

constexpr const char* entry = "attn_kernel";

// Halide's runtime calls this with the user context the call passed: our message string.
void collect_error(void* user_context, const char* msg) {
  if (user_context != nullptr) static_cast<std::string*>(user_context)->append(msg);
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The C++ driver this library was built with (it knows where libc and libpthread are), unless
// ATTN_LINKER names another.
std::string linker() {
  if (const char* l = std::getenv("ATTN_LINKER"); l && *l) return l;
  return ATTN_DEFAULT_LINKER;
}

void link_shared(const std::filesystem::path& object, const std::filesystem::path& so_path) {
  const std::filesystem::path script = so_path.parent_path() / "exports.map", log = so_path.parent_path() / "link.log";
  std::ofstream(script) << "{ global: " << entry << "; " << entry << "_argv; " << entry
                        << "_metadata; halide_set_error_handler; halide_set_custom_malloc; halide_set_custom_free; local: *; };\n";
  const std::string cmd = linker();
  std::vector<std::string> args{cmd, "-shared", "-o", so_path.string(), object.string(),
                                "-Wl,--version-script=" + script.string(), "-lpthread", "-ldl", "-lm"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, cmd.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) throw link_failure("cannot run the linker '" + cmd + "': " + std::strerror(spawned));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw link_failure("linking the kernel with '" + cmd + "' failed: " + read_text(log));
}

}  // namespace

std::shared_ptr<const shared_object_kernel> shared_object_kernel::load(const std::filesystem::path& path, std::size_t buffers) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) throw error(std::string("cannot load: ") + dlerror());
  // Never dlclose'd (see the header); the handle is owned by the process from here on.
  const auto fn = reinterpret_cast<argv_fn>(dlsym(handle, (std::string(entry) + "_argv").c_str()));
  const auto metadata = reinterpret_cast<const halide_filter_metadata_t* (*)()>(dlsym(handle, (std::string(entry) + "_metadata").c_str()));
  const auto set_handler = reinterpret_cast<halide_error_handler_t (*)(halide_error_handler_t)>(dlsym(handle, "halide_set_error_handler"));
  if (fn == nullptr || metadata == nullptr || set_handler == nullptr) throw error("not an attnforge kernel (entry points missing)");
  // The user context comes first, then one buffer per tensor.
  if (metadata()->num_arguments != static_cast<int>(buffers) + 1)
    throw error("kernel takes " + std::to_string(metadata()->num_arguments - 1) + " tensors, expected " + std::to_string(buffers));
  set_handler(&collect_error);  // this object's own runtime: affects no other kernel
  // Its intermediates come from the scratch cache, as the JIT's do (scratch_memory.hpp).
  const auto set_malloc = reinterpret_cast<halide_malloc_t (*)(halide_malloc_t)>(dlsym(handle, "halide_set_custom_malloc"));
  const auto set_free = reinterpret_cast<halide_free_t (*)(halide_free_t)>(dlsym(handle, "halide_set_custom_free"));
  if (set_malloc != nullptr && set_free != nullptr) {
    set_malloc([](void*, std::size_t bytes) { return scratch_malloc(bytes); });
    set_free([](void*, void* p) { scratch_free(p); });
  }
  return std::shared_ptr<const shared_object_kernel>(new shared_object_kernel(fn));
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
  link_shared(object, so_path);
}

}  // namespace attn::detail
