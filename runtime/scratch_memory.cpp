#include "scratch_memory.hpp"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>
#include "environment.hpp"
#include "limits.hpp"

namespace attn {

namespace {

constexpr std::size_t alignment = 128, header = 128;  // the header holds the block's capacity
constexpr std::size_t large = std::size_t(1) << 20;   // blocks from here on are kept when freed

std::size_t limit_from_environment() {
  return detail::number_from_environment("ATTN_SCRATCH_CACHE", detail::quantity::bytes).value_or(std::size_t(512) << 20);
}

std::atomic<std::size_t>& limit() {
  static std::atomic<std::size_t> l{limit_from_environment()};
  return l;
}

struct block {
  char* base;
  std::size_t capacity;
};

class scratch_cache {
 public:
  static scratch_cache& process() {
    static scratch_cache* c = new scratch_cache;  // never destroyed: kernels may free at exit
    return *c;
  }

  // The smallest kept block that fits without wasting more than the request, or {nullptr, 0}.
  block take(std::size_t capacity) {
    std::lock_guard lock(mutex_);
    std::size_t best = kept_.size();
    for (std::size_t i = 0; i < kept_.size(); ++i)
      if (kept_[i].capacity >= capacity && kept_[i].capacity <= 2 * capacity &&
          (best == kept_.size() || kept_[i].capacity < kept_[best].capacity))
        best = i;
    if (best == kept_.size()) return {nullptr, 0};
    const block b = kept_[best];
    bytes_ -= b.capacity;
    kept_.erase(kept_.begin() + static_cast<std::ptrdiff_t>(best));
    return b;
  }

  // Keeps the block (freed at once if it alone is over the limit), dropping the oldest kept ones
  // to stay within the limit.
  void give(char* base, std::size_t capacity) {
    std::vector<char*> dropped;
    {
      std::lock_guard lock(mutex_);
      kept_.push_back({base, capacity});
      bytes_ += capacity;
      if (capacity > limit().load()) {
        kept_.pop_back();
        bytes_ -= capacity;
        dropped.push_back(base);
      }
      evict_over_limit(dropped);
    }
    for (char* d : dropped) std::free(d);
  }

  // Frees the oldest kept blocks until the rest fit the limit.
  void trim() {
    std::vector<char*> dropped;
    {
      std::lock_guard lock(mutex_);
      evict_over_limit(dropped);
    }
    for (char* d : dropped) std::free(d);
  }

  std::size_t bytes() {
    std::lock_guard lock(mutex_);
    return bytes_;
  }

 private:
  void evict_over_limit(std::vector<char*>& dropped) {
    while (bytes_ > limit().load() && !kept_.empty()) {
      dropped.push_back(kept_.front().base);
      bytes_ -= kept_.front().capacity;
      kept_.erase(kept_.begin());
    }
  }

  std::mutex mutex_;
  std::vector<block> kept_;  // oldest first
  std::size_t bytes_ = 0;
};

}  // namespace

void set_scratch_cache_limit(std::size_t bytes) {
  limit().store(bytes);
  scratch_cache::process().trim();
}

std::size_t scratch_cache_limit() { return limit().load(); }

namespace detail {

void* scratch_malloc(std::size_t bytes) {
  if (bytes > SIZE_MAX - header - (std::size_t(1) << 16)) return nullptr;
  // Large blocks in 64 KiB steps, so that calls with slightly different sizes share blocks.
  const std::size_t step = bytes >= large ? std::size_t(1) << 16 : alignment;
  block b{nullptr, (bytes + step - 1) / step * step};
  if (b.capacity >= large) b = scratch_cache::process().take(b.capacity);
  if (b.base == nullptr) {
    b.capacity = (bytes + step - 1) / step * step;
    b.base = static_cast<char*>(std::aligned_alloc(alignment, header + b.capacity));
    if (b.base == nullptr) return nullptr;
  }
  *reinterpret_cast<std::size_t*>(b.base) = b.capacity;
  return b.base + header;
}

void scratch_free(void* p) {
  if (p == nullptr) return;
  char* base = static_cast<char*>(p) - header;
  const std::size_t capacity = *reinterpret_cast<std::size_t*>(base);
  if (capacity >= large) scratch_cache::process().give(base, capacity);
  else std::free(base);
}

std::size_t scratch_cached_bytes() { return scratch_cache::process().bytes(); }

}  // namespace detail

}  // namespace attn
