#pragma once
// The one translation from attn tensor views (row-major) to halide_buffer_t (innermost first).
#include <cstring>
#include <vector>
#include <HalideRuntime.h>
#include "tensor.hpp"

namespace attn::detail {

inline halide_type_t halide_type_of(dtype t) {
  constexpr halide_type_t types[] = {halide_type_t(halide_type_float, 32), halide_type_t(halide_type_int, 32),
                                     halide_type_t(halide_type_bfloat, 16), halide_type_t(halide_type_float, 16)};
  return types[static_cast<int>(t)];
}

// A halide_buffer_t over a view, with an optional leading batch dim added as (extent, stride 0):
// a tensor given without a batch dim is shared by the whole batch.
struct halide_buffer {
  halide_buffer_t buf{};
  std::vector<halide_dimension_t> dims;

  halide_buffer(const tensor_view& v, bool add_batch, std::int64_t batch) {
    for (int k = v.rank - 1; k >= 0; --k)
      dims.push_back({0, static_cast<int32_t>(v.size(k)), static_cast<int32_t>(v.size(k) == 1 ? 0 : v.stride(k)), 0});
    if (add_batch) dims.push_back({0, static_cast<int32_t>(batch), 0, 0});
    // Halide requires the innermost stride to be 1; a size-1 axis may claim it.
    if (!dims.empty() && dims.front().extent == 1) dims.front().stride = 1;
    buf.host = static_cast<uint8_t*>(v.data);
    buf.type = halide_type_of(v.type);
    buf.dimensions = static_cast<int32_t>(dims.size());
    buf.dim = dims.data();
    buf.flags = halide_buffer_flag_host_dirty;  // for a GPU kernel: the values are on the host, copy them over
  }
  // A GPU kernel allocated a device copy: free it (through the buffer's own device interface, so
  // this needs no runtime symbols).
  ~halide_buffer() {
    if (buf.device_interface != nullptr) buf.device_interface->device_free(nullptr, &buf);
  }
  // A GPU kernel leaves its outputs on the device (device_dirty): bring them back. 0 or a Halide error code.
  int copy_to_host() {
    const bool on_device = buf.device_interface != nullptr && (buf.flags & halide_buffer_flag_device_dirty) != 0;
    return on_device ? buf.device_interface->copy_to_host(nullptr, &buf) : 0;
  }
  halide_buffer(const halide_buffer&) = delete;
  halide_buffer& operator=(const halide_buffer&) = delete;
};

// Copies src into dst element by element (same sizes and element type, any strides).
inline void strided_copy(const tensor_view& src, const tensor_view& dst) {
  std::vector<std::int64_t> i(static_cast<std::size_t>(src.rank), 0);
  const std::int64_t n = src.elements(), bytes = dtype_bytes(src.type);
  for (std::int64_t e = 0; e < n; ++e) {
    std::int64_t so = 0, d_o = 0;
    for (int k = 0; k < src.rank; ++k) so += i[static_cast<std::size_t>(k)] * src.stride(k), d_o += i[static_cast<std::size_t>(k)] * dst.stride(k);
    std::memcpy(static_cast<char*>(dst.data) + d_o * bytes, static_cast<const char*>(src.data) + so * bytes, static_cast<std::size_t>(bytes));
    for (int k = src.rank - 1; k >= 0; --k) {
      if (++i[static_cast<std::size_t>(k)] < src.size(k)) break;
      i[static_cast<std::size_t>(k)] = 0;
    }
  }
}

// Does Halide accept this view as it is? (innermost stride 1, or innermost size 1)
inline bool halide_compatible(const tensor_view& v) { return v.rank == 0 || v.size(v.rank - 1) == 1 || v.stride(v.rank - 1) == 1; }

}  // namespace attn::detail
