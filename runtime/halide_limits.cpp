#include "halide_limits.hpp"

#include <cstdlib>

namespace attn::detail {

void check_halide_limits(const std::string& who, const tensor_view& v) {
  const std::string limit = std::to_string(halide_max_extent);
  std::int64_t elements = 1;
  for (int k = 0; k < v.rank; ++k) {
    const std::int64_t size = v.size(k), stride = v.stride(k);
    const std::string axis = who + ": axis " + std::to_string(k);
    if (size > halide_max_extent)
      throw shape_error(axis + " has size " + std::to_string(size) + ", above the limit " + limit + " (Halide extents are int32)");
    if (size == 1) continue;  // its stride is never used
    std::int64_t reach = 0;   // how far (in elements) the axis reaches from the start
    if (stride < -halide_max_extent || stride > halide_max_extent || __builtin_mul_overflow(std::llabs(stride), size, &reach) ||
        reach > halide_max_extent)
      throw shape_error(axis + ": stride " + std::to_string(stride) + " times size " + std::to_string(size) +
                        " exceeds the limit " + limit + " elements (Halide strides and offsets are int32)");
    elements *= size;  // <= 2^31 * 2^31 before the check below: no overflow
    if (elements > halide_max_extent)
      throw shape_error(who + ": axes 0 to " + std::to_string(k) + " hold " + std::to_string(elements) +
                        " elements, above the limit " + limit + " (Halide buffers are int32-indexed)");
  }
}

}  // namespace attn::detail
