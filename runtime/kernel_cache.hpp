#pragma once
// The process's JIT cache: compiled kernels by exact key, least recently used dropped first once
// there are more than the limit (attn::set_kernel_cache_limit). Callers hold shared_ptrs, so a
// dropped kernel lives on until its last user lets go. A kernel being compiled is never dropped;
// a second caller asking for it waits for that one compilation.
#include <functional>
#include <future>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include "kernel.hpp"

namespace attn::detail {

class kernel_cache {
 public:
  using kernel_ptr = std::shared_ptr<const compiled_kernel>;

  explicit kernel_cache(std::size_t limit) : limit_(limit) {}

  // The kernel for `key`: cached, being compiled by another thread, or compiled now by `compile`
  // (whose exception reaches every caller waiting for it; nothing is cached then).
  kernel_ptr get(const std::string& key, const std::function<kernel_ptr()>& compile);

  std::size_t size() const;
  std::size_t limit() const;
  void set_limit(std::size_t limit);

  // The one cache of this process.
  static kernel_cache& process();

 private:
  struct entry {
    std::shared_future<kernel_ptr> kernel;
    std::list<std::string>::iterator recent;  // position in recent_
    bool ready = false;
  };
  void evict_locked();

  mutable std::mutex mutex_;
  std::map<std::string, entry, std::less<>> entries_;
  std::list<std::string> recent_;  // most recently used first
  std::size_t limit_;
};

}  // namespace attn::detail
