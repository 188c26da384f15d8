#pragma once
// Small helpers the examples share: deterministic random tensors and printing.
#include <cstdio>
#include <random>
#include <string>
#include "runtime/tensor.hpp"

namespace examples {

inline attn::tensor<float> random_tensor(std::vector<std::int64_t> sizes, unsigned seed, float scale = 1.0f) {
  attn::tensor<float> t(std::move(sizes));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  for (float& v : t.values()) v = normal(rng);
  return t;
}

inline void print_matrix(const std::string& title, const attn::tensor<float>& m) {
  const std::int64_t rows = m.rank() >= 2 ? m.size(m.rank() - 2) : 1, cols = m.size(m.rank() - 1);
  std::printf("%s  (%lld x %lld)\n", title.c_str(), static_cast<long long>(rows), static_cast<long long>(cols));
  for (std::int64_t i = 0; i < rows; ++i) {
    std::printf("  ");
    for (std::int64_t j = 0; j < cols; ++j) std::printf("%8.4f ", m.values()[static_cast<std::size_t>(i * cols + j)]);
    std::printf("\n");
  }
}

}  // namespace examples
