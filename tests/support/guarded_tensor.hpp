#pragma once
// A copy of a tensor placed against a page no access is allowed to (PROT_NONE), right after its
// last element or right before its first: a kernel that reads or writes outside the tensor faults
// there, in the call that does it. Past an ordinary buffer the same access is silent: garbage read
// (masked or not) or another buffer overwritten.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <stdexcept>

#include "runtime/tensor.hpp"

namespace attn::ref {

enum class guard { after, before };

template <class T>
class guarded_tensor {
 public:
  guarded_tensor(const tensor<T>& t, guard side) {
    const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    const std::size_t bytes = t.values().size() * sizeof(T), pages = (bytes + page - 1) / page + 1;
    length_ = (pages + 1) * page;
    base_ = static_cast<char*>(mmap(nullptr, length_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (base_ == MAP_FAILED) throw std::runtime_error("guarded_tensor: mmap failed");
    char* const fence = side == guard::after ? base_ + pages * page : base_;
    if (mprotect(fence, page, PROT_NONE) != 0) throw std::runtime_error("guarded_tensor: mprotect failed");
    char* const data = side == guard::after ? fence - bytes : base_ + page;
    if (bytes != 0) std::memcpy(data, t.data(), bytes);
    view_ = t.view();
    view_.data = data;
  }
  guarded_tensor(const guarded_tensor&) = delete;
  guarded_tensor& operator=(const guarded_tensor&) = delete;
  ~guarded_tensor() { munmap(base_, length_); }

  const tensor_view& view() const { return view_; }
  const T* data() const { return static_cast<const T*>(view_.data); }

 private:
  char* base_ = nullptr;
  std::size_t length_ = 0;
  tensor_view view_;
};

}  // namespace attn::ref
