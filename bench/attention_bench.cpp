// Speed of JIT-compiled attention on this CPU. Reports GFLOP/s from the cost model and the
// fraction of the machine's FMA peak, measured in the same run.
//   build/bench/attention_bench
#include <benchmark/benchmark.h>
#include <random>
#include "fma_peak.hpp"
#include "runtime/jit.hpp"

using namespace attn::dsl;

namespace {

double peak_gflops = 0;

attn::tensor<float> random_tensor(std::vector<std::int64_t> sizes, unsigned seed, float scale) {
  attn::tensor<float> t(std::move(sizes));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  for (float& v : t.values()) v = normal(rng);
  return t;
}

constexpr auto T = dim<"T">;

template <class E, class... Tensors>
void run(benchmark::State& state, const E& expr, std::int64_t t, const Tensors&... inputs) {
  auto kernel = attn::jit(expr);
  auto result = kernel(inputs...);  // compiles outside the timed loop; sizes the output
  for (auto _ : state) kernel.into(result.view(), inputs...);
  state.counters["flops"] = cost(expr).at(T = t).flops;  // per call, from the cost model
}

void causal_self_attention(benchmark::State& state) {
  constexpr auto D = dim<"D", 256>;
  constexpr auto Dk = dim<"Dk", 64>;
  constexpr auto x = input<"x">(T, D);
  constexpr auto y = variants::causal_self_attention(x, weight<"wq">(D, Dk), weight<"wk">(D, Dk), weight<"wv">(D, Dk));
  const std::int64_t t = state.range(0);
  run(state, y, t, random_tensor({t, 256}, 1, 1), random_tensor({256, 64}, 2, 0.06f), random_tensor({256, 64}, 3, 0.06f),
      random_tensor({256, 64}, 4, 0.06f));
}

void multi_head_self_attention(benchmark::State& state) {
  constexpr auto D = dim<"D", 512>;
  constexpr auto H = head_dim<"H", 8>;
  constexpr auto x = input<"x">(T, D);
  constexpr auto y = variants::multi_head_self_attention(x, weight<"wq">(D, D), weight<"wk">(D, D), weight<"wv">(D, D),
                                                         weight<"wo">(D, D), H);
  const std::int64_t t = state.range(0);
  run(state, y, t, random_tensor({t, 512}, 1, 1), random_tensor({512, 512}, 2, 0.04f), random_tensor({512, 512}, 3, 0.04f),
      random_tensor({512, 512}, 4, 0.04f), random_tensor({512, 512}, 5, 0.04f));
}

}  // namespace

BENCHMARK(causal_self_attention)->Arg(128)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(multi_head_self_attention)->Arg(128)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();

// Adds the peak fraction to every row: measured GFLOP/s over the FMA peak of this run.
class peak_reporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    std::vector<Run> copy = runs;
    for (Run& r : copy)
      if (r.counters.count("flops") && r.real_accumulated_time > 0) {
        const double gflops = r.counters["flops"].value * double(r.iterations) / r.real_accumulated_time / 1e9;
        r.counters["GFLOP/s"] = gflops;
        r.counters["peak_fraction"] = gflops / peak_gflops;
      }
    ConsoleReporter::ReportRuns(copy);
  }
};

int main(int argc, char** argv) {
  peak_gflops = bench::measure_fma_peak_gflops();
  std::printf("measured FMA peak: %.1f GFLOP/s (all hardware threads)\n", peak_gflops);
  benchmark::Initialize(&argc, argv);
  peak_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
}
