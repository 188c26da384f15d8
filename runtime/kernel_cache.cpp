#include "kernel_cache.hpp"

#include "environment.hpp"
#include "limits.hpp"

namespace attn::detail {

kernel_cache::kernel_ptr kernel_cache::get(const std::string& key, const std::function<kernel_ptr()>& compile) {
  std::promise<kernel_ptr> promise;
  std::shared_future<kernel_ptr> found;
  {
    std::lock_guard lock(mutex_);
    if (auto it = entries_.find(key); it != entries_.end()) {
      recent_.splice(recent_.begin(), recent_, it->second.recent);
      found = it->second.kernel;
    } else {
      recent_.push_front(key);
      entries_.emplace(key, entry{promise.get_future().share(), recent_.begin(), false});
    }
  }
  if (found.valid()) return found.get();  // compiled, or being compiled by another thread
  try {
    kernel_ptr k = compile();
    promise.set_value(k);
    std::lock_guard lock(mutex_);
    entries_.at(key).ready = true;  // only this thread removes an entry that is not ready
    evict_locked();
    return k;
  } catch (...) {
    {
      std::lock_guard lock(mutex_);
      auto it = entries_.find(key);
      recent_.erase(it->second.recent);
      entries_.erase(it);  // a later call may try again
    }
    promise.set_exception(std::current_exception());
    throw;
  }
}

void kernel_cache::evict_locked() {
  auto it = recent_.end();
  while (entries_.size() > limit_ && it != recent_.begin()) {
    --it;
    auto e = entries_.find(*it);
    if (!e->second.ready) continue;  // its compiling thread still needs the entry
    entries_.erase(e);
    it = recent_.erase(it);
  }
}

std::size_t kernel_cache::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

std::size_t kernel_cache::limit() const {
  std::lock_guard lock(mutex_);
  return limit_;
}

void kernel_cache::set_limit(std::size_t limit) {
  std::lock_guard lock(mutex_);
  limit_ = limit;
  evict_locked();
}

namespace {

std::size_t default_limit() {
  return number_from_environment("ATTN_KERNEL_CACHE_LIMIT", quantity::count).value_or(128);  // ~1.3 MB of code each
}

}  // namespace

kernel_cache& kernel_cache::process() {
  static kernel_cache c(default_limit());
  return c;
}

}  // namespace attn::detail

namespace attn {

void set_kernel_cache_limit(std::size_t kernels) { detail::kernel_cache::process().set_limit(kernels); }
std::size_t kernel_cache_limit() { return detail::kernel_cache::process().limit(); }

}  // namespace attn
