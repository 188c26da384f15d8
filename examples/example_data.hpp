#pragma once
// Small helpers the examples share: deterministic random tensors and printing.
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>
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

// A matrix with a label per row and per column (tokens, dictionary keys, features).
inline void print_labeled(const std::string& title, const attn::tensor<float>& m, const std::vector<std::string>& rows,
                          const std::vector<std::string>& cols) {
  const std::size_t c = cols.size();
  std::printf("%s  (%zu x %zu)\n%10s", title.c_str(), rows.size(), c, "");
  for (const auto& name : cols) std::printf(" %8.8s", name.c_str());
  std::printf("\n");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::printf("%10.10s", rows[i].c_str());
    for (std::size_t j = 0; j < c; ++j) std::printf(" %8.4f", m.values()[i * c + j]);
    std::printf("\n");
  }
}

// A tensor from nested rows: matrix({{1, 2}, {3, 4}}).
inline attn::tensor<float> matrix(std::initializer_list<std::initializer_list<float>> rows) {
  attn::tensor<float> t({static_cast<std::int64_t>(rows.size()), static_cast<std::int64_t>(rows.begin()->size())});
  std::size_t k = 0;
  for (const auto& r : rows) {
    if (r.size() != static_cast<std::size_t>(t.size(1))) throw std::invalid_argument("matrix: rows differ in length");
    for (float v : r) t.values()[k++] = v;
  }
  return t;
}

}  // namespace examples
