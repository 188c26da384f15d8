#pragma once
// The 16-bit float elements of tensors declared bf16 or f16 (input<"k", bf16>(...)), as stored:
// made from a float by rounding to the nearest (ties to even; NaN stays NaN, past the largest
// finite value: infinity), read back as a float exactly.
#include <bit>
#include <cmath>
#include <cstdint>

namespace attn {

struct bfloat16 {
  std::uint16_t bits = 0;
  bfloat16() = default;
  explicit bfloat16(float f) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    bits = (u & 0x7fffffffu) > 0x7f800000u ? static_cast<std::uint16_t>((u >> 16) | 0x40u)
                                            : static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
  explicit operator float() const { return std::bit_cast<float>(std::uint32_t{bits} << 16); }
};

struct float16 {
  std::uint16_t bits = 0;
  float16() = default;
  explicit float16(float f) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    std::uint32_t h = 0;
    if (a > 0x7f800000u) h = 0x7e00u;                          // NaN
    else if (a >= 0x477ff000u) h = 0x7c00u;                    // rounds past 65504: infinity
    else if (a < 0x38800000u)                                  // below 2^-14: a subnormal (or 0), in units of 2^-24
      h = static_cast<std::uint32_t>(std::nearbyint(std::bit_cast<float>(a) * 16777216.0f));
    else h = (a - 0x38000000u + 0x0fffu + (((a - 0x38000000u) >> 13) & 1u)) >> 13;
    bits = static_cast<std::uint16_t>(sign | h);
  }
  explicit operator float() const {
    const std::uint32_t sign = std::uint32_t{bits & 0x8000u} << 16, e = (bits >> 10) & 0x1fu, m = bits & 0x3ffu;
    if (e == 0) return std::bit_cast<float>(sign) + (sign ? -1.0f : 1.0f) * static_cast<float>(m) * 5.9604644775390625e-8f;
    return std::bit_cast<float>(sign | (e == 31 ? 0x7f800000u | (m << 13) : ((e + 112) << 23) | (m << 13)));
  }
};

}  // namespace attn
