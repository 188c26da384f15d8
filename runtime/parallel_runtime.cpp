#include "parallel_runtime.hpp"

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include "disk_cache.hpp"
#include "errors.hpp"
#include "private_temp_dir.hpp"
#include "shared_object_kernel.hpp"

namespace attn::detail {

namespace {

const std::vector<std::string> exported{
    "halide_default_do_par_for",    "halide_default_do_task",           "halide_default_do_loop_task",
    "halide_default_do_parallel_tasks", "halide_default_semaphore_init", "halide_default_semaphore_try_acquire",
    "halide_default_semaphore_release"};

struct loaded_runtime {
  std::shared_ptr<const shared_object> object;
  parallel_runtime functions;
};

std::unique_ptr<loaded_runtime> load(const std::filesystem::path& path) {
  auto r = std::make_unique<loaded_runtime>();
  r->object = shared_object::load(path);
  auto get = [&](const std::string& name) {
    void* f = r->object->symbol(name);
    if (f == nullptr) throw error("not Halide's runtime (" + name + " missing)");
    return f;
  };
  r->functions = {reinterpret_cast<halide_do_par_for_t>(get(exported[0])),
                  reinterpret_cast<halide_do_task_t>(get(exported[1])),
                  reinterpret_cast<halide_do_loop_task_t>(get(exported[2])),
                  reinterpret_cast<halide_do_parallel_tasks_t>(get(exported[3])),
                  reinterpret_cast<halide_semaphore_init_t>(get(exported[4])),
                  reinterpret_cast<halide_semaphore_try_acquire_t>(get(exported[5])),
                  reinterpret_cast<halide_semaphore_release_t>(get(exported[6]))};
  return r;
}

std::unique_ptr<loaded_runtime> load_or_build(const disk_cache& cache, const Halide::Target& arch) {
  const std::string key = "parallel runtime|" + arch.to_string();
  if (auto path = cache.find(key)) try {
      return load(*path);
    } catch (const error& e) {
      report_once("load:" + path->string(), "entry " + path->string() + " " + e.what() + ": rebuilding it");
    }
  const auto work = cache.work_folder();
  if (!work) return nullptr;  // reported; a folder we cannot write has no use for a pool
  const std::filesystem::path object = work->path() / "runtime.o", so = work->path() / "runtime.so";
  try {
    Halide::compile_standalone_runtime(object.string(), arch);
  } catch (const Halide::Error& e) {
    throw error(std::string("Halide: ") + e.what());
  }
  link_shared_object(object, so, exported);
  if (cache.store(key, so))
    if (auto path = cache.find(key)) return load(*path);
  return load(so);  // not kept; the loader keeps it mapped after the folder goes
}

}  // namespace

const parallel_runtime* shared_parallel_runtime(const disk_cache& cache, const Halide::Target& target) {
  // Only the architecture matters to the task runtime; one pool per architecture (in practice one).
  const Halide::Target arch(target.os, target.arch, target.bits);
  static std::mutex m;
  static std::map<std::string, std::unique_ptr<loaded_runtime>> pools;  // by architecture; never unloaded
  static std::set<std::string> failed;                                   // by folder and architecture
  const std::lock_guard lock(m);
  auto& pool = pools[arch.to_string()];
  const std::string attempt = cache.dir().string() + "|" + arch.to_string();
  if (!pool && !failed.contains(attempt)) try {
      pool = load_or_build(cache, arch);
      if (!pool) failed.insert(attempt);
    } catch (const std::exception& e) {  // attn::error, link_failure
      failed.insert(attempt);
      report_once("pool:" + attempt, std::string("cannot build the thread pool that kernels loaded from disk share (") +
                                         e.what() + "): kernels are compiled in this process");
    }
  return pool ? &pool->functions : nullptr;
}

}  // namespace attn::detail
