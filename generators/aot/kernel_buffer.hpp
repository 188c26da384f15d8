#pragma once
// A halide_buffer_t over a caller's dense row-major array: how C++ code calls an attnforge
// kernel built ahead of time. Include a generated kernel header first (it declares
// halide_buffer_t); nothing here needs Halide or attnforge at run time.
//
//   std::vector<float> q(8 * 128 * 64), out(q.size());
//   attn::aot::kernel_buffer qb(q.data(), {1, 8, 128, 64}), ob(out.data(), {1, 8, 128, 64});
//   int rc = causal_attention(qb, kb, vb, ob);   // sizes row-major, batch first: as written in the header
#ifndef HALIDE_HALIDERUNTIME_H
#error "include the generated kernel header (it declares halide_buffer_t) before attn/kernel_buffer.hpp"
#endif
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace attn::aot {

class kernel_buffer {
 public:
  // `sizes` row-major (outermost first), as the generated header lists them.
  kernel_buffer(float* data, std::initializer_list<std::int64_t> sizes) : kernel_buffer(data, halide_type_float, sizes) {}
  kernel_buffer(std::int32_t* data, std::initializer_list<std::int64_t> sizes) : kernel_buffer(data, halide_type_int, sizes) {}
  kernel_buffer(const kernel_buffer&) = delete;
  kernel_buffer& operator=(const kernel_buffer&) = delete;

  // A kernel built for a GPU target (cuda, opencl) copies inputs to the device itself and leaves
  // its outputs there (device_dirty), so that the next kernel can read them where they are;
  // copy_to_host() brings this buffer's values back (0 or a halide_error_code_t). The device copy
  // is freed with the kernel_buffer. Both go through the buffer's device interface.
  int copy_to_host() {
    const bool on_device = buffer_.device_interface != nullptr && (buffer_.flags & halide_buffer_flag_device_dirty) != 0;
    return on_device ? buffer_.device_interface->copy_to_host(nullptr, &buffer_) : 0;
  }
  ~kernel_buffer() {
    if (buffer_.device_interface != nullptr) buffer_.device_interface->device_free(nullptr, &buffer_);
  }

  operator halide_buffer_t*() { return &buffer_; }

 private:
  kernel_buffer(void* data, halide_type_code_t code, std::initializer_list<std::int64_t> sizes) : dims_(sizes.size()) {
    // Halide lists dims innermost first.
    std::int64_t stride = 1;
    std::size_t k = 0;
    for (auto it = std::rbegin(sizes); it != std::rend(sizes); ++it, ++k) {
      dims_[k].min = 0;
      dims_[k].extent = static_cast<std::int32_t>(*it);
      dims_[k].stride = static_cast<std::int32_t>(stride);
      dims_[k].flags = 0;
      stride *= *it;
    }
    buffer_.host = static_cast<std::uint8_t*>(data);
    buffer_.type.code = code;
    buffer_.type.bits = 32;
    buffer_.type.lanes = 1;
    buffer_.dimensions = static_cast<std::int32_t>(dims_.size());
    buffer_.dim = dims_.data();
    // The values are the caller's, on the host: a GPU kernel copies them to the device first.
    buffer_.flags = halide_buffer_flag_host_dirty;
  }
  std::vector<halide_dimension_t> dims_;
  halide_buffer_t buffer_{};
};

}  // namespace attn::aot
