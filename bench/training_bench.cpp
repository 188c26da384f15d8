// Speed of a training step of JIT-compiled attention on this CPU, case by case, in three parts:
//   <case>/T:<T>/Dh:<Dh>/forward   attn::jit(y, {.with_lse = true}): the default path (the fused kernel
//                                  for attention), with each row's log-sum-exp, which a training step saves
//   <case>/T:<T>/Dh:<Dh>/backward  attn::jit_gradients(y) called with dY, what the forward saved (its
//                                  output and log-sum-exp, computed once before timing) and the forward's
//                                  tensors: the gradient of every float tensor (the fused backward where
//                                  it covers the expression, else the generic one; the label, both
//                                  kernels' describe(), says which ran)
//   <case>/T:<T>/Dh:<Dh>/step      the forward, then the backward
// Each call writes into buffers allocated once (kernel::into_with_lse, gradient_kernel::into), as a
// training loop keeps its activations' and gradients' buffers from step to step. Cases (H = 8
// heads, batch 1, float32, q, k, v of shape (1, H, T, Dh), dY like the output): full, causal,
// alibi_causal, softcap_causal (cap 20), sliding_window_256, and t5_bias: score + table[T5 bucket
// of kv_idx - q_idx, head] (32 bidirectional buckets up to a distance of 128, no mask) with the
// table (32 × H) a weight, so its gradient is computed too. bench/cases.py lists the cases the
// table reports (training_cases); this program registers every variant at both head widths and
// every length of --lengths.
// A part that needs more memory than attnforge's budget (attn::set_memory_budget) is reported as
// an error of that benchmark ("memory_error: ..."), and the others still run.
//   build/bench/training_bench [--lengths=1024,2048,4096] [--benchmark_filter='^causal/T:1024/Dh:64/']
//   build/bench/training_bench --dump=DIR [--lengths=384]
// --dump writes, for each variant at Dh = 64 and the first length, the inputs, dY, the forward's
// output and every gradient as raw float32 files DIR/<variant>.<tensor>.f32 (row-major, shapes in
// DIR/<variant>.json), and runs no benchmark: bench/peers_training.py --check-attnforge compares
// them with PyTorch, so that both sides of the comparison compute the same thing.
// scripts/training_bench.sh runs it next to PyTorch and prints the table (--update-docs: into
// docs/performance.md).
#include <benchmark/benchmark.h>
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>
#include "runtime/gradients.hpp"
#include "runtime/jit.hpp"

using namespace attn::dsl;

namespace {

constexpr auto T = dim<"T">;
constexpr auto H = head_dim<"H", 8>;
constexpr std::int64_t heads = 8;
constexpr int window = 256;
constexpr float cap = 20.0f;
constexpr int t5_buckets = 32;  // bench/cases.py T5_BUCKETS, T5_MAX_DISTANCE
constexpr int t5_max_distance = 128;
constexpr auto R = dim<"R", t5_buckets>;

enum class variant { full, causal, alibi_causal, softcap_causal, sliding_window, t5_bias };
constexpr const char* variant_name[] = {"full", "causal", "alibi_causal", "softcap_causal", "sliding_window_256", "t5_bias"};

// The expression's tensors: q, k, v, and t5_bias's table.
template <variant V>
constexpr std::size_t arity = V == variant::t5_bias ? 4 : 3;

enum class part { forward, backward, step };
constexpr const char* part_name[] = {"forward", "backward", "step"};

// softmax(mods(q·kᵀ/√Dh))·v over inputs of shape (H, T, Dh) (and t5_bias's table); H is a heads
// dim, so `head` (ALiBi, the table's column) indexes it.
template <variant V, std::int64_t Dh_size>
constexpr auto attention() {
  constexpr auto Dh = dim<"Dh", Dh_size>;
  constexpr auto q = input<"q">(H, T, Dh);
  constexpr auto k = input<"k">(H, T, Dh);
  constexpr auto v = input<"v">(H, T, Dh);
  constexpr auto s = scaled_scores(q, k);
  if constexpr (V == variant::full) return combine(softmax(s), v);
  else if constexpr (V == variant::causal) return combine(softmax(causal(s)), v);
  else if constexpr (V == variant::alibi_causal) return combine(softmax(causal(alibi(s, H))), v);
  else if constexpr (V == variant::softcap_causal) return combine(softmax(causal(softcap(s, cap))), v);
  else if constexpr (V == variant::sliding_window) return combine(softmax(sliding_window(s, window)), v);
  else {
    constexpr auto table = weight<"table">(R, H);
    return combine(softmax(modify(s, score + gather(table, t5_bucket<true>(t5_buckets, t5_max_distance), head))), v);
  }
}

attn::tensor<float> random_tensor(std::vector<std::int64_t> sizes, unsigned seed, float scale) {
  attn::tensor<float> t(std::move(sizes));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  for (float& x : t.values()) x = normal(rng);
  return t;
}

// q, k, v, then t5_bias's table; and dY. Made once per shape: the largest are 16 MB and slow to draw.
struct case_tensors {
  std::vector<attn::tensor<float>> in;
  attn::tensor<float> dy;
};

const case_tensors& tensors(variant v, std::int64_t t, std::int64_t dh) {
  static std::map<std::tuple<variant, std::int64_t, std::int64_t>, case_tensors> made;
  case_tensors& c = made[{v, t, dh}];
  if (c.in.empty()) {
    for (unsigned i = 1; i <= 3; ++i) c.in.push_back(random_tensor({1, heads, t, dh}, i, 1.0f));
    if (v == variant::t5_bias) c.in.push_back(random_tensor({t5_buckets, heads}, 4, 0.5f));
    c.dy = random_tensor({1, heads, t, dh}, 5, 1.0f);
  }
  return c;
}

// The forward kernel (fused by default) and the backward kernel of one expression.
template <class E>
struct compiled {
  attn::kernel<E> forward;
  attn::gradient_kernel<E> backward;
  explicit compiled(const E& e) : forward(attn::jit(e, {.with_lse = true})), backward(attn::jit_gradients(e)) {}
};

template <class E, std::size_t... I>
void run(benchmark::State& state, const E& expr, part p, const case_tensors& c, std::index_sequence<I...>) {
  try {
    const compiled<E> k(expr);
    const attn::outputs y = k.forward.run(c.in[I]...);  // its buffers serve every call
    const std::array<attn::tensor<float>, sizeof...(I)> d{attn::tensor<float>(c.in[I].sizes())...};
    const std::vector<std::string> names = k.backward.parameters();
    const auto call = [&] {
      if (p != part::backward) k.forward.into_with_lse(y.output, y.lse, c.in[I]...);
      if (p != part::forward) k.backward.into({attn::named_tensor{names[I], d[I]}...}, c.dy, attn::saved{y.output, y.lse}, c.in[I]...);
    };
    call();  // before timing: checks the memory budget, warms the caches
    for (auto _ : state) call();
    state.SetLabel("forward " + k.forward.compiled().describe() + "; backward " + k.backward.describe());
  } catch (const attn::memory_error& e) {  // the generic backward's T × T intermediates past the budget
    state.SkipWithError((std::string("memory_error: ") + e.what()).c_str());
  } catch (const std::exception& e) {  // one case that cannot compile or run must not stop the others
    state.SkipWithError(e.what());
  }
}

template <variant V, std::int64_t Dh>
void register_case(std::int64_t t) {
  for (part p : {part::forward, part::backward, part::step}) {
    const std::string name = std::string(variant_name[int(V)]) + "/T:" + std::to_string(t) + "/Dh:" +
                             std::to_string(Dh) + "/" + part_name[int(p)];
    benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
      run(state, attention<V, Dh>(), p, tensors(V, t, Dh), std::make_index_sequence<arity<V>>{});
    })->Unit(benchmark::kMillisecond)->UseRealTime();
  }
}

template <variant V>
void register_variant(std::int64_t t) {
  register_case<V, 64>(t);
  register_case<V, 128>(t);
}

void register_all(const std::vector<std::int64_t>& lengths) {
  for (std::int64_t t : lengths) {
    register_variant<variant::full>(t);
    register_variant<variant::causal>(t);
    register_variant<variant::alibi_causal>(t);
    register_variant<variant::softcap_causal>(t);
    register_variant<variant::sliding_window>(t);
    register_variant<variant::t5_bias>(t);
  }
}

void write_raw(const std::string& path, const attn::tensor<float>& t) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(t.data()), std::streamsize(t.values().size() * sizeof(float)));
  if (!f) throw std::runtime_error("cannot write " + path);
}

std::string shape_json(const attn::tensor<float>& t) {
  std::string s = "[";
  for (std::int64_t n : t.sizes()) s += (s.size() > 1 ? ", " : "") + std::to_string(n);
  return s + "]";
}

// One variant's tensors, output and gradients at Dh = 64 into `dir` (see --dump above).
template <variant V, std::size_t... I>
void dump(const std::string& dir, std::int64_t t, std::index_sequence<I...>) {
  const case_tensors& c = tensors(V, t, 64);
  const compiled k(attention<V, 64>());
  const attn::outputs y = k.forward.run(c.in[I]...);
  const attn::gradients d = k.backward(c.dy, attn::saved{y.output, y.lse}, c.in[I]...);
  std::vector<std::pair<std::string, const attn::tensor<float>*>> files;
  const std::vector<std::string> names = k.forward.parameters();
  for (std::size_t i = 0; i < c.in.size(); ++i) files.emplace_back(names[i], &c.in[i]);
  files.emplace_back("dy", &c.dy);
  files.emplace_back("y", &y.output);
  for (std::size_t i = 0; i < d.size(); ++i) files.emplace_back("d_" + d.names[i], &d.values[i].as<float>());
  const std::string base = dir + "/" + variant_name[int(V)];
  std::string json = "{";
  for (const auto& [name, tensor] : files) {
    write_raw(base + "." + name + ".f32", *tensor);
    json += (json.size() > 1 ? ", \"" : "\"") + name + "\": " + shape_json(*tensor);
  }
  std::ofstream(base + ".json") << json << "}\n";
  std::fprintf(stderr, "dumped %s at T = %lld into %s\n", variant_name[int(V)], static_cast<long long>(t), dir.c_str());
}

template <variant V>
void dump(const std::string& dir, std::int64_t t) {
  dump<V>(dir, t, std::make_index_sequence<arity<V>>{});
}

// The kernels' thread count: Halide's HL_NUM_THREADS, else every hardware thread (Halide's default).
unsigned kernel_threads() {
  const char* env = std::getenv("HL_NUM_THREADS");
  const int n = env ? std::atoi(env) : 0;
  return n > 0 ? unsigned(n) : std::max(1u, std::thread::hardware_concurrency());
}

std::vector<std::int64_t> parse_lengths(std::string_view text) {
  std::vector<std::int64_t> out;
  std::stringstream s{std::string(text)};
  for (std::string item; std::getline(s, item, ',');) out.push_back(std::stoll(item));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  // Our own flags, taken out of argv before Google Benchmark reads the rest.
  std::vector<std::int64_t> lengths{1024, 2048, 4096};
  std::optional<std::string> dump_dir;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a.starts_with("--lengths=")) lengths = parse_lengths(a.substr(10));
    else if (a.starts_with("--dump=")) dump_dir = std::string(a.substr(7));
    else argv[kept++] = argv[i];
  }
  argc = kept;
  if (lengths.empty() || std::ranges::any_of(lengths, [](std::int64_t t) { return t < 1; })) {
    std::fprintf(stderr, "training_bench: --lengths wants positive sequence lengths, e.g. --lengths=1024,2048\n");
    return 2;
  }
  if (dump_dir) {
    try {
      dump<variant::full>(*dump_dir, lengths.front());
      dump<variant::causal>(*dump_dir, lengths.front());
      dump<variant::alibi_causal>(*dump_dir, lengths.front());
      dump<variant::softcap_causal>(*dump_dir, lengths.front());
      dump<variant::sliding_window>(*dump_dir, lengths.front());
      dump<variant::t5_bias>(*dump_dir, lengths.front());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "training_bench --dump: %s\n", e.what());
      return 1;
    }
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("threads", std::to_string(kernel_threads()));
  register_all(lengths);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
