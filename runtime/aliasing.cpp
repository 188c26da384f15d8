#include "aliasing.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace attn::detail {

namespace {

struct byte_range {
  std::uintptr_t first, last;  // addresses of the first byte of the lowest and the last byte of the highest element
};

byte_range range_of(const tensor_view& v) {
  const std::int64_t element = dtype_bytes(v.type);
  std::int64_t low = 0, high = 0;      // offsets in elements; views passed the int32 limits, no overflow
  for (int k = 0; k < v.rank; ++k) {
    const std::int64_t reach = (v.size(k) - 1) * v.stride(k);
    (reach < 0 ? low : high) += reach;
  }
  const auto base = reinterpret_cast<std::uintptr_t>(v.data);
  return {base + static_cast<std::uintptr_t>(low * element), base + static_cast<std::uintptr_t>(high * element + element - 1)};
}

}  // namespace

bool may_overlap(const tensor_view& a, const tensor_view& b) {
  const byte_range ra = range_of(a), rb = range_of(b);
  return ra.first <= rb.last && rb.first <= ra.last;
}

void check_no_self_overlap(const std::string& who, const tensor_view& v) {
  struct axis {
    int k;
    std::int64_t stride, size;
  };
  std::vector<axis> axes;
  for (int k = 0; k < v.rank; ++k) {
    if (v.size(k) == 1) continue;
    if (v.stride(k) == 0)
      throw argument_error(who + ": axis " + std::to_string(k) + " has stride 0 and size " + std::to_string(v.size(k)) +
                           ": its elements would all be written to one address");
    axes.push_back({k, v.stride(k) < 0 ? -v.stride(k) : v.stride(k), v.size(k)});
  }
  std::sort(axes.begin(), axes.end(), [](const axis& a, const axis& b) { return a.stride < b.stride; });
  std::int64_t reach = 0;  // farthest offset the inner axes reach
  for (std::size_t i = 0; i < axes.size(); ++i) {
    if (axes[i].stride <= reach)
      throw argument_error(who + ": axis " + std::to_string(axes[i].k) + " (stride " + std::to_string(axes[i].stride) +
                           ") steps within the " + std::to_string(reach + 1) + " elements the axes inside it span: two elements would share an address");
    reach += (axes[i].size - 1) * axes[i].stride;
  }
}

}  // namespace attn::detail
