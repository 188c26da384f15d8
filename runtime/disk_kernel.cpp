#include "disk_kernel.hpp"

#include <atomic>
#include <map>
#include <mutex>
#include "attn_build_digest.hpp"
#include "cache_dir.hpp"
#include "disk_cache.hpp"
#include "errors.hpp"
#include "private_temp_dir.hpp"

namespace attn::detail {

std::string disk_cache_version() {
  return "halide-" + std::to_string(HALIDE_VERSION_MAJOR) + "." + std::to_string(HALIDE_VERSION_MINOR) + "." +
         std::to_string(HALIDE_VERSION_PATCH) + " attnforge-" + ATTN_BUILD_DIGEST;
}

namespace {

// The dynamic loader hands back an already loaded object for a path it has seen, whatever the
// file holds now: remember which key each cache path was loaded for, so that a path reused by
// another key (a hash collision, repaired entry) is never taken for the first one.
std::mutex loaded_mutex;
std::map<std::string, std::string> loaded_keys;  // guarded by loaded_mutex

bool loadable_as(const std::filesystem::path& path, const std::string& key) {
  std::lock_guard lock(loaded_mutex);
  const auto [it, fresh] = loaded_keys.emplace(path.string(), key);
  return fresh || it->second == key;
}

std::shared_ptr<const shared_object_kernel> load_entry(const std::filesystem::path& path, const std::string& key,
                                                       std::size_t buffers) {
  if (!loadable_as(path, key)) return nullptr;
  try {
    return shared_object_kernel::load(path, buffers);
  } catch (const error& e) {
    report_once("load:" + path.string(), "entry " + path.string() + " " + e.what() + ": recompiling");
    return nullptr;
  }
}

}  // namespace

std::shared_ptr<const shared_object_kernel> disk_kernel(const Halide::Pipeline& pipeline,
                                                        const std::vector<Halide::Argument>& arguments,
                                                        const Halide::Target& target, const std::string& key,
                                                        const std::function<void()>& before_compile) {
  const auto dir = kernel_cache_dir();
  if (!dir || target.has_gpu_feature()) return nullptr;
  const disk_cache cache(*dir, disk_cache_version());
  const std::size_t buffers = arguments.size() + pipeline.outputs().size();  // inputs, then outputs
  const std::string full_key = key + "|resolved_target=" + target.to_string();
  if (auto path = cache.find(full_key))
    if (auto k = load_entry(*path, full_key, buffers)) return k;

  const private_temp_dir temp;
  // A name never used before in this process: the loader must not confuse it with an earlier one.
  static std::atomic<unsigned long> counter{0};
  const std::filesystem::path so = temp.path() / ("kernel" + std::to_string(counter++) + ".so");
  if (before_compile) before_compile();
  try {
    compile_shared_object(pipeline, arguments, target, so);
  } catch (const link_failure& e) {
    report_once("link", std::string(e.what()) + ": kernels are compiled in this process and not kept");
    return nullptr;
  }
  if (cache.store(full_key, so))
    if (auto path = cache.find(full_key))
      if (auto k = load_entry(*path, full_key, buffers)) return k;
  try {
    return shared_object_kernel::load(so, buffers);  // not kept; mapped until exit
  } catch (const error& e) {
    report_once("load", std::string("a freshly linked kernel ") + e.what() + ": kernels are compiled in this process instead");
    return nullptr;
  }
}

}  // namespace attn::detail
