#pragma once
// A halide_buffer_t over a caller's dense row-major array: how C++ code calls an attnforge
// kernel built ahead of time. Include a generated kernel header first (it declares
// halide_buffer_t); nothing here needs Halide or attnforge at run time.
//
//   std::vector<float> q(8 * 128 * 64), out(q.size());
//   attn::aot::kernel_buffer qb(q.data(), {1, 8, 128, 64}), ob(out.data(), {1, 8, 128, 64});
//   int rc = causal_attention(qb, kb, vb, ob);   // sizes row-major, batch first: as written in the header
//   if (rc != 0) std::fprintf(stderr, "%s\n", causal_attention_error());
//
// A halide_buffer_t holds sizes and strides as int32: a size or a stride (the product of the
// sizes inside it) above 2^31 - 1 cannot be passed, and the constructor throws std::length_error
// naming it rather than let it wrap.
#ifndef HALIDE_HALIDERUNTIME_H
#error "include the generated kernel header (it declares halide_buffer_t) before attn/kernel_buffer.hpp"
#endif
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>
#include "generators/aot/call_context.h"
#include "runtime/half_floats.hpp"

namespace attn::aot {

class kernel_buffer {
 public:
  // `sizes` row-major (outermost first), as the generated header lists them.
  kernel_buffer(float* data, std::initializer_list<std::int64_t> sizes) : kernel_buffer(data, halide_type_float, 32, sizes) {}
  kernel_buffer(std::int32_t* data, std::initializer_list<std::int64_t> sizes) : kernel_buffer(data, halide_type_int, 32, sizes) {}
  kernel_buffer(bfloat16* data, std::initializer_list<std::int64_t> sizes) : kernel_buffer(data, halide_type_bfloat, 16, sizes) {}
  kernel_buffer(float16* data, std::initializer_list<std::int64_t> sizes) : kernel_buffer(data, halide_type_float, 16, sizes) {}
  kernel_buffer(const kernel_buffer&) = delete;
  kernel_buffer& operator=(const kernel_buffer&) = delete;

  // A kernel built for a GPU target (cuda, opencl) copies inputs to the device itself and leaves
  // its outputs there (device_dirty), so that the next kernel can read them where they are;
  // copy_to_host() brings this buffer's values back: 0, or a halide_error_code_t and then
  // error() says why. The device copy is freed with the kernel_buffer. Both go through the
  // buffer's device interface, with a user_context in which the error handler the kernels
  // install keeps Halide's message (call_context.h): an error neither prints nor aborts.
  int copy_to_host() {
    const bool on_device = buffer_.device_interface != nullptr && (buffer_.flags & halide_buffer_flag_device_dirty) != 0;
    if (!on_device) return 0;
    attn_call call = new_call();
    const int rc = buffer_.device_interface->copy_to_host(&call, &buffer_);
    error_ = rc == 0 ? "" : "copy to host failed (Halide error " + std::to_string(rc) + "): " + (call.reported ? call.message : "no message");
    return rc;
  }
  const std::string& error() const { return error_; }
  ~kernel_buffer() {
    if (buffer_.device_interface == nullptr) return;
    attn_call call = new_call();  // a failure to free cannot be reported from here
    buffer_.device_interface->device_free(&call, &buffer_);
  }

  operator halide_buffer_t*() { return &buffer_; }

 private:
  kernel_buffer(void* data, halide_type_code_t code, std::uint8_t bits, std::initializer_list<std::int64_t> sizes) : dims_(sizes.size()) {
    // Halide lists dims innermost first.
    std::int64_t stride = 1;  // stays below 2^62: each factor is checked to fit int32 first
    std::size_t k = 0;
    for (auto it = std::rbegin(sizes); it != std::rend(sizes); ++it, ++k) {
      const std::size_t axis = sizes.size() - 1 - k;  // row-major, as the caller wrote it
      dims_[k].min = 0;
      dims_[k].extent = int32_or_throw(*it, "size", axis, sizes.size());
      dims_[k].stride = int32_or_throw(stride, "stride (the product of the sizes after it)", axis, sizes.size());
      dims_[k].flags = 0;
      stride *= *it < 0 ? 0 : *it;
    }
    buffer_.host = static_cast<std::uint8_t*>(data);
    buffer_.type.code = code;
    buffer_.type.bits = bits;
    buffer_.type.lanes = 1;
    buffer_.dimensions = static_cast<std::int32_t>(dims_.size());
    buffer_.dim = dims_.data();
    // The values are the caller's, on the host: a GPU kernel copies them to the device first.
    buffer_.flags = halide_buffer_flag_host_dirty;
  }
  static attn_call new_call() {
    attn_call call{};
    call.magic = ATTN_CALL_MAGIC;
    return call;
  }
  static std::int32_t int32_or_throw(std::int64_t v, const char* what, std::size_t axis, std::size_t rank) {
    if (v > std::numeric_limits<std::int32_t>::max() || v < std::numeric_limits<std::int32_t>::min())
      throw std::length_error("kernel_buffer: axis " + std::to_string(axis) + " of " + std::to_string(rank) + " (row-major): " + what + " " +
                              std::to_string(v) + " does not fit the int32 of a halide_buffer_t (at most 2147483647)");
    return static_cast<std::int32_t>(v);
  }
  std::vector<halide_dimension_t> dims_;
  halide_buffer_t buffer_{};
  std::string error_;
};

}  // namespace attn::aot
