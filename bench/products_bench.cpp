// Speed of JIT-compiled products X·W (the projections outside the fused attention core) against
// OpenBLAS's cblas_sgemm on the same shapes, both on 2 threads. Reports GFLOP/s (cost model:
// 2·T·D·N), the fraction of the machine's FMA peak measured in the same run (peak_fraction, wall
// time) and the same per CPU-second of the process (cpu_peak_fraction; peak_reporter.hpp says why:
// on a shared machine the wall time also counts the time other programs hold the cores).
//   build/bench/products_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <algorithm>
#include <cblas.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <unistd.h>
#include "peak_reporter.hpp"
#include "runtime/jit.hpp"

using namespace attn::dsl;

namespace {

constexpr int threads = 2;
constexpr auto T = dim<"T">;
constexpr auto D = dim<"D", 512>;

attn::tensor<float> random_tensor(std::vector<std::int64_t> sizes, unsigned seed, float scale) {
  attn::tensor<float> t(std::move(sizes));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  for (float& v : t.values()) v = normal(rng);
  return t;
}

// The kernel of an expression, compiled once per process; `seconds` is how long that compile took.
template <class E>
const attn::kernel<E>& compiled(const E& expr, double* seconds = nullptr) {
  static double took = 0;
  static const attn::kernel<E> k = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    attn::kernel<E> r = attn::jit(expr);
    took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  }();
  if (seconds) *seconds = took;
  return k;
}

template <std::int64_t N>
constexpr auto projection() {
  return project(input<"x">(T, D), weight<"w">(D, dim<"N", N>));
}

// attnforge: project(x, w), x (T, 512), w (512, N).
template <std::int64_t N>
void attnforge_project(benchmark::State& state) {
  const std::int64_t t = state.range(0);
  const auto expr = projection<N>();
  const auto& kernel = compiled(expr);
  const auto x = random_tensor({t, 512}, 1, 1), w = random_tensor({512, N}, 2, 0.04f);
  auto y = kernel(x, w);  // sizes the output
  for (auto _ : state) kernel.into(y.view(), x, w);
  state.counters["flops"] = cost(expr).at(T = t).flops;
}

// OpenBLAS on the same shapes, row-major, C = A·B.
template <std::int64_t N>
void openblas_sgemm(benchmark::State& state) {
  const std::int64_t t = state.range(0);
  const auto x = random_tensor({t, 512}, 1, 1), w = random_tensor({512, N}, 2, 0.04f);
  attn::tensor<float> y({t, N});
  for (auto _ : state)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(t), int(N), 512, 1.0f, x.data(), 512, w.data(), int(N), 0.0f,
                y.data(), int(N));
  state.counters["flops"] = cost(projection<N>()).at(T = t).flops;
}

// With --benchmark_repetitions, "best" (the fastest repetition) sits beside mean and median: on a
// shared machine it is the least disturbed measurement.
// OpenBLAS 0.3.21 falls back to its SSE3 ("Prescott") kernels on a CPU model it does not know (the
// development machine's Xeon, model 207); compare with its AVX-512 or AVX2 kernels instead. It picks
// them when it loads, from OPENBLAS_CORETYPE, so the program runs itself again with that set.
void use_openblas_vector_kernels(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") || std::string(openblas_get_corename()) != "Prescott") return;
  const char* core = __builtin_cpu_supports("avx512f") ? "SkylakeX" : __builtin_cpu_supports("avx2") ? "Haswell" : nullptr;
  if (!core) return;
  std::printf("OpenBLAS chose Prescott kernels for this CPU; running again with OPENBLAS_CORETYPE=%s\n", core);
  std::fflush(stdout);
  setenv("OPENBLAS_CORETYPE", core, 1);
  execv("/proc/self/exe", argv);
}

void args(benchmark::internal::Benchmark* b) {
  b->Arg(512)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime();
  b->ComputeStatistics("best", [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); });
}

}  // namespace

BENCHMARK(attnforge_project<512>)->Apply(args);
BENCHMARK(openblas_sgemm<512>)->Apply(args);
BENCHMARK(attnforge_project<64>)->Apply(args);
BENCHMARK(openblas_sgemm<64>)->Apply(args);

int main(int argc, char** argv) {
  use_openblas_vector_kernels(argv);
  std::printf("OpenBLAS: %s, kernels for %s\n", openblas_get_config(), openblas_get_corename());
  setenv("HL_NUM_THREADS", std::to_string(threads).c_str(), 0);  // Halide's thread pool, read when it starts
  openblas_set_num_threads(threads);
  double s512 = 0, s64 = 0;
  compiled(projection<512>(), &s512);
  compiled(projection<64>(), &s64);
  std::printf("JIT compile: project (T, 512)·(512, 512) %.2f s, (T, 512)·(512, 64) %.2f s\n", s512, s64);
  benchmark::Initialize(&argc, argv);
  bench::peak_reporter reporter(/*process_cpu=*/true);
  std::printf("FMA peak at the start: %.1f GFLOP/s (best of 5, all hardware threads)\n", reporter.peak_gflops());
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  reporter.measure(20);
  std::printf("FMA peak, best measured in this run: %.1f GFLOP/s (each row used the best measured up to it: peak); "
              "one core, per CPU-second: %.1f GFLOP/s\n", reporter.peak_gflops(), reporter.core_peak_gflops());
}
