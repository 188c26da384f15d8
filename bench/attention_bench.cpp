// Speed of JIT-compiled attention on this CPU, case by case, through both lowerings:
//   <case>/T:<T>/Dh:<Dh>/fused    jit_options{.path = automatic}: the fused kernel when the expression is
//                                 attention (the label, kernel.compiled().describe(), says which path ran)
//   <case>/T:<T>/Dh:<Dh>/generic  jit_options{.path = generic}
// Cases (H = 8 heads, batch 1, float32, q, k, v of shape (H, T, Dh)): full, causal, sliding_window_256,
// alibi_causal, softcap_causal (cap 20), and mha_proj (x (T, 512), W_Q, W_K, W_V, W_O 512 × 512, 8 heads).
// And relu, ReLU attention (weights relu(s)/T, no mask): the fused kernel's tiles and products with
// no softmax (no maxima, exp, sums or rescaling), how fast full attention would be were its softmax
// free; compare.py times it beside each full case (bench/cases.py NO_SOFTMAX), with no peer of its own.
// GFLOP/s count 4·Dh·H per kept (query, key) pair (T² full, T(T+1)/2 causal, Σ min(i+1, 256) in the
// window), plus 4 · 2·T·D² for the projections of mha_proj; bench/cases.py counts the same way.
// The FMA peak is measured on the kernels' thread count (HL_NUM_THREADS, else every hardware thread)
// at the start of the run (the JSON context's fma_peak_gflops) and again after each case, keeping the
// best so far (each run's fma_peak counter; peak_fraction divides by it): a start that landed in a busy
// moment on a shared machine once read 263 of 540 GFLOP/s. compare_table.py takes the best of all.
//   build/bench/attention_bench [--benchmark_filter='causal/T:512/'] [--benchmark_format=json]
// scripts/compare.sh runs it next to PyTorch and prints the table (--update-docs: into docs/performance.md).
#include <benchmark/benchmark.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include "fma_peak.hpp"
#include "runtime/jit.hpp"

using namespace attn::dsl;

namespace {

double peak_gflops = 0;
unsigned peak_threads = 1;

void measure_peak() {
  for (int i = 0; i < 5; ++i) peak_gflops = std::max(peak_gflops, bench::measure_fma_peak_gflops(peak_threads));
}

constexpr auto T = dim<"T">;
constexpr auto H = head_dim<"H", 8>;
constexpr std::int64_t heads = 8;
constexpr int window = 256;
constexpr float cap = 20.0f;
constexpr std::int64_t Ts[] = {512, 1024, 2048, 4096};

enum class variant { full, causal, sliding_window, alibi_causal, softcap_causal, relu };
constexpr const char* variant_name[] = {"full", "causal", "sliding_window_256", "alibi_causal", "softcap_causal", "relu"};

// softmax(mods(q·kᵀ/√Dh))·v over inputs of shape (H, T, Dh); H is a heads dim, so `head` (ALiBi) indexes it.
template <variant V, std::int64_t Dh_size>
constexpr auto attention() {
  constexpr auto Dh = dim<"Dh", Dh_size>;
  constexpr auto q = input<"q">(H, T, Dh);
  constexpr auto k = input<"k">(H, T, Dh);
  constexpr auto v = input<"v">(H, T, Dh);
  constexpr auto s = scaled_scores(q, k);
  if constexpr (V == variant::full) return combine(softmax(s), v);
  else if constexpr (V == variant::causal) return combine(softmax(causal(s)), v);
  else if constexpr (V == variant::sliding_window) return combine(softmax(sliding_window(s, window)), v);
  else if constexpr (V == variant::alibi_causal) return combine(softmax(causal(alibi(s, H))), v);
  else if constexpr (V == variant::relu) return variants::relu_attention(s, v);
  else return combine(softmax(causal(softcap(s, cap))), v);
}

constexpr auto mha_proj() {
  constexpr auto D = dim<"D", 512>;
  return variants::multi_head_self_attention(input<"x">(T, D), weight<"wq">(D, D), weight<"wk">(D, D),
                                             weight<"wv">(D, D), weight<"wo">(D, D), H);
}

// (query, key) pairs the mask keeps; each costs 2·Dh for q·k and 2·Dh for weight·v, per head.
double kept_pairs(variant v, std::int64_t t) {
  const double n = double(t);
  if (v == variant::full || v == variant::relu) return n * n;
  if (v != variant::sliding_window) return n * (n + 1) / 2;
  const double w = double(std::min<std::int64_t>(window, t));
  return w * n - w * (w - 1) / 2;  // Σ_i min(i + 1, w)
}

attn::tensor<float> random_tensor(std::vector<std::int64_t> sizes, unsigned seed, float scale) {
  attn::tensor<float> t(std::move(sizes));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  for (float& x : t.values()) x = normal(rng);
  return t;
}

// Inputs made once per shape: the largest are 50 MB and slow to draw.
const std::vector<attn::tensor<float>>& inputs(const std::vector<std::vector<std::int64_t>>& shapes) {
  static std::map<std::vector<std::vector<std::int64_t>>, std::vector<attn::tensor<float>>> made;
  auto& ts = made[shapes];
  if (ts.empty())
    for (std::size_t i = 0; i < shapes.size(); ++i)
      ts.push_back(random_tensor(shapes[i], unsigned(i + 1), i == 0 || shapes[i].size() != 2 ? 1.0f : 0.04f));
  return ts;
}

template <class E, std::size_t... I>
void run(benchmark::State& state, const E& expr, attn::lowering path, double flops,
         const std::vector<attn::tensor<float>>& in, std::index_sequence<I...>) {
  std::optional<attn::kernel<E>> kernel;
  attn::tensor<float> result;
  try {
    kernel.emplace(attn::jit(expr, {.path = path}));
    result = (*kernel)(in[I]...);  // compiled by jit; this warms up and sizes the output
  } catch (const std::exception& e) {  // one case that cannot compile must not stop the others
    state.SkipWithError(e.what());
    return;
  }
  for (auto _ : state) kernel->into(result.view(), in[I]...);
  state.SetLabel(kernel->compiled().describe());
  using benchmark::Counter;
  state.counters["flops"] = flops;  // per call
  state.counters["GFLOP/s"] = Counter(flops / 1e9, Counter::kIsIterationInvariantRate);
  measure_peak();
  state.counters["fma_peak"] = peak_gflops;
  state.counters["peak_fraction"] = Counter(flops / 1e9 / peak_gflops, Counter::kIsIterationInvariantRate);
}

const char* path_name(attn::lowering p) { return p == attn::lowering::generic ? "generic" : "fused"; }

template <variant V, std::int64_t Dh>
void register_attention(std::int64_t t, attn::lowering path) {
  const std::string name = std::string(variant_name[int(V)]) + "/T:" + std::to_string(t) + "/Dh:" +
                           std::to_string(Dh) + "/" + path_name(path);
  benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
    const std::vector<std::int64_t> qkv{heads, t, Dh};
    const double flops = 4.0 * double(heads * Dh) * kept_pairs(V, t);
    run(state, attention<V, Dh>(), path, flops, inputs({qkv, qkv, qkv}), std::make_index_sequence<3>{});
  })->Unit(benchmark::kMillisecond)->UseRealTime();
}

void register_mha(std::int64_t t, attn::lowering path) {
  const std::string name = "mha_proj/T:" + std::to_string(t) + "/Dh:64/" + path_name(path);
  benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
    constexpr std::int64_t D = 512;
    const double n = double(t), flops = 4 * 2 * n * D * D + 4.0 * double(D) * n * n;  // projections + attention
    run(state, mha_proj(), path, flops, inputs({{t, D}, {D, D}, {D, D}, {D, D}, {D, D}}), std::make_index_sequence<5>{});
  })->Unit(benchmark::kMillisecond)->UseRealTime();
}

void register_all() {
  for (std::int64_t t : Ts)
    for (attn::lowering path : {attn::lowering::automatic, attn::lowering::generic}) {
      register_attention<variant::full, 64>(t, path);
      register_attention<variant::full, 128>(t, path);
      register_attention<variant::causal, 64>(t, path);
      register_attention<variant::causal, 128>(t, path);
      register_attention<variant::sliding_window, 64>(t, path);
      register_attention<variant::alibi_causal, 64>(t, path);
      register_attention<variant::softcap_causal, 64>(t, path);
      register_mha(t, path);
      register_attention<variant::relu, 64>(t, path);
      register_attention<variant::relu, 128>(t, path);
    }
}

// The kernels' thread count: Halide's HL_NUM_THREADS, else every hardware thread (Halide's default).
unsigned kernel_threads() {
  const char* env = std::getenv("HL_NUM_THREADS");
  const int n = env ? std::atoi(env) : 0;
  return n > 0 ? unsigned(n) : std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace

int main(int argc, char** argv) {
  const unsigned threads = peak_threads = kernel_threads();
  measure_peak();
  // stderr: stdout may be the JSON report.
  std::fprintf(stderr, "measured FMA peak at the start: %.1f GFLOP/s on %u threads\n", peak_gflops, threads);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("fma_peak_gflops", std::to_string(peak_gflops));
  benchmark::AddCustomContext("threads", std::to_string(threads));
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
