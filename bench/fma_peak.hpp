#pragma once
// The machine's measured float FMA peak (GFLOP/s): many independent multiply-add chains the
// compiler vectorises, run on `threads` threads at once (default: every hardware thread).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <immintrin.h>
#include <thread>
#include <vector>

namespace bench {

// Independent FMA chains, as many vectors as the register file holds with room to spare (more
// would spill: an array of 256 floats is 32 AVX2 registers of 16, and then the loop measured the
// loads and stores, 62 GFLOP/s on a machine whose kernels ran at 85). Explicit FMA instructions:
// ISO C++ mode does not contract a * b + c.
#if defined(__AVX512F__)
constexpr int fma_width = 16, fma_vectors = 24;
using fma_vector = __m512;
inline fma_vector fma_step(fma_vector a, fma_vector b, fma_vector c) { return _mm512_fmadd_ps(a, b, c); }
inline fma_vector fma_splat(float x) { return _mm512_set1_ps(x); }
#elif defined(__FMA__)
constexpr int fma_width = 8, fma_vectors = 12;
using fma_vector = __m256;
inline fma_vector fma_step(fma_vector a, fma_vector b, fma_vector c) { return _mm256_fmadd_ps(a, b, c); }
inline fma_vector fma_splat(float x) { return _mm256_set1_ps(x); }
#else
#error "fma_peak.hpp: needs FMA (x86-64 with -march=native on an FMA machine)"
#endif

constexpr int lanes = fma_width * fma_vectors;  // floats updated per iteration

inline double chains(long iterations) {
  fma_vector acc[fma_vectors];
  for (int v = 0; v < fma_vectors; ++v) acc[v] = fma_splat(1e-3f * float(v));
  const fma_vector mul = fma_splat(0.999f), add = fma_splat(1e-3f);
  for (long it = 0; it < iterations; ++it)
#pragma GCC unroll 32
    for (int v = 0; v < fma_vectors; ++v) acc[v] = fma_step(acc[v], mul, add);
  alignas(64) float out[fma_width];
  double s = 0;
  for (int v = 0; v < fma_vectors; ++v) {
    std::memcpy(out, &acc[v], sizeof out);
    for (float a : out) s += a;
  }
  return s;
}

inline double measure_fma_peak_gflops(unsigned threads = std::max(1u, std::thread::hardware_concurrency())) {
  threads = std::max(1u, threads);
  const long iterations = 2'000'000 * 256 / lanes;
  std::vector<std::thread> pool;
  std::vector<double> sink(threads);
  auto t0 = std::chrono::steady_clock::now();
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back([&, t] { sink[t] = chains(iterations); });
  for (auto& th : pool) th.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  volatile double keep = sink[0];
  (void)keep;
  return 2.0 * lanes * double(iterations) * threads / seconds / 1e9;
}

}  // namespace bench
