#pragma once
// The machine's measured float FMA peak (GFLOP/s): many independent multiply-add chains the
// compiler vectorises, run on `threads` threads at once (default: every hardware thread).
#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

namespace bench {

inline double chains(long iterations) {
  constexpr int lanes = 256;  // independent accumulators: enough to hide FMA latency
  alignas(64) float acc[lanes], mul[lanes], add[lanes];
  for (int i = 0; i < lanes; ++i) acc[i] = 0.0f, mul[i] = 0.999f + 1e-6f * float(i), add[i] = 1e-3f;
  for (long it = 0; it < iterations; ++it)
#pragma GCC unroll 16
    for (int i = 0; i < lanes; ++i) acc[i] = acc[i] * mul[i] + add[i];
  double s = 0;
  for (float a : acc) s += a;
  return s;
}

inline double measure_fma_peak_gflops(unsigned threads = std::max(1u, std::thread::hardware_concurrency())) {
  threads = std::max(1u, threads);
  const long iterations = 2'000'000;
  std::vector<std::thread> pool;
  std::vector<double> sink(threads);
  auto t0 = std::chrono::steady_clock::now();
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back([&, t] { sink[t] = chains(iterations); });
  for (auto& th : pool) th.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  volatile double keep = sink[0];
  (void)keep;
  return 2.0 * 256 * double(iterations) * threads / seconds / 1e9;
}

}  // namespace bench
