#include "disk_kernel.hpp"

#include <atomic>
#include <optional>
#include "attn_build_digest.hpp"
#include "cache_dir.hpp"
#include "disk_cache.hpp"
#include "errors.hpp"
#include "parallel_runtime.hpp"
#include "private_temp_dir.hpp"

namespace attn::detail {

std::string disk_cache_version() {
  return "halide-" + std::to_string(HALIDE_VERSION_MAJOR) + "." + std::to_string(HALIDE_VERSION_MINOR) + "." +
         std::to_string(HALIDE_VERSION_PATCH) + " attnforge-" + ATTN_BUILD_DIGEST;
}

namespace {

std::shared_ptr<const shared_object_kernel> load_entry(const std::filesystem::path& path, std::size_t buffers,
                                                       const parallel_runtime& pool) {
  try {
    return shared_object_kernel::load(path, buffers, pool);
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
  const std::optional<disk_cache> cache = disk_cache::open(*dir, disk_cache_version());
  if (!cache) return nullptr;
  const parallel_runtime* pool = shared_parallel_runtime(*cache, target);
  if (pool == nullptr) return nullptr;
  const std::size_t buffers = arguments.size() + pipeline.outputs().size();  // inputs, then outputs
  const std::string full_key = key + "|resolved_target=" + target.to_string();
  if (auto path = cache->find(full_key))
    if (auto k = load_entry(*path, buffers, *pool)) return k;

  const auto work = cache->work_folder();
  if (!work) return nullptr;
  static std::atomic<unsigned long> counter{0};
  const std::filesystem::path so = work->path() / ("kernel" + std::to_string(counter++) + ".so");
  if (before_compile) before_compile();
  try {
    compile_shared_object(pipeline, arguments, target, so);
  } catch (const link_failure& e) {
    report_once("link", std::string(e.what()) + ": kernels are compiled in this process and not kept");
    return nullptr;
  }
  if (cache->store(full_key, so))
    if (auto path = cache->find(full_key))
      if (auto k = load_entry(*path, buffers, *pool)) return k;
  try {
    return shared_object_kernel::load(so, buffers, *pool);  // not kept; mapped while loaded
  } catch (const error& e) {
    report_once("load", std::string("a freshly linked kernel ") + e.what() + ": kernels are compiled in this process instead");
    return nullptr;
  }
}

}  // namespace attn::detail
