#pragma once
// Halide describes a buffer with int32 extents and strides and, without the large_buffers target
// feature, addresses at most 2^31 - 1 elements from its start along any axis and holds at most
// 2^31 - 1 elements. A view beyond that would be silently narrowed (a stride of 2^32 becomes 0):
// reject it, before anything runs, with a shape_error naming the tensor, the axis and the limit.
#include <cstdint>
#include <limits>
#include <string>
#include "tensor.hpp"

namespace attn::detail {

inline constexpr std::int64_t halide_max_extent = std::numeric_limits<std::int32_t>::max();

// `who` names the tensor in the message ("tensor 'x'", "output 'weights'").
void check_halide_limits(const std::string& who, const tensor_view& v);

}  // namespace attn::detail
