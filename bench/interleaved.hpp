#pragma once
// Timing helpers for benchmarks that compare kernels in one run on a noisy, shared machine:
// random inputs, and the best time of each kernel with the kernels called in turn (a busy spell
// then slows all of them, not one).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <vector>
#include "runtime/tensor.hpp"

namespace bench {

inline attn::tensor<float> random_tensor(std::vector<std::int64_t> sizes, unsigned seed) {
  attn::tensor<float> t(std::move(sizes));
  std::mt19937 r(seed);
  std::normal_distribution<float> n;
  for (auto& x : t.values()) x = n(r);
  return t;
}

// Calls each kernel once per round; the best time of each, in seconds.
template <class... Calls> std::vector<double> best_of_rounds(int rounds, const Calls&... calls) {
  std::vector<double> best(sizeof...(Calls), 1e9);
  for (int r = 0; r < rounds; ++r) {
    std::size_t i = 0;
    ([&] {
      const auto t0 = std::chrono::steady_clock::now();
      calls();
      best[i] = std::min(best[i], std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      ++i;
    }(), ...);
  }
  return best;
}

}  // namespace bench
