#pragma once
// The inputs both programs use: fixed pseudo-random values in [-1, 1), no library needed.
#include <cstdint>
#include <vector>

namespace consumer {

constexpr std::int64_t T = 37, Dh = 32;
constexpr std::int64_t causal_heads = 8, my_heads = 4;  // causal_attention has 8 heads, my::causal_alibi 4

inline std::vector<float> values(std::int64_t n, std::uint32_t seed) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) / 8388608.0f - 1.0f;
  }
  return v;
}

}  // namespace consumer
