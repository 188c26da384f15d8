// bfloat16 against float32 tensors, the same kernels otherwise: prefill (full and causal attention,
// H = 8, T x T; causal with grouped key/value heads, GQA 8/2) and decode (a few queries against a
// long key/value cache, also GQA 8/2). Each case's two kernels run alternately, one call each per
// round; the table takes each one's best round. Prints a Markdown table; scripts/precision_bench.sh
// runs it and files it in docs/performance.md.
//   precision_bench [--quick] [--rounds N] [--target TARGET]
//     --target   both kernels compiled for this Halide target instead of the host's, e.g.
//                x86-64-linux-avx2-fma-f16c: what a CPU with those features only runs (here, on
//                this CPU's cores)
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>
#include "dsl/dsl.hpp"
#include "runtime/jit.hpp"

namespace {

using namespace attn::dsl;
using attn::bfloat16;
using attn::tensor;

constexpr auto H = head_dim<"H", 8>;
constexpr auto NQ = dim<"NQ">;
constexpr auto NK = dim<"NK">;

template <class T>
tensor<T> random_tensor(std::vector<std::int64_t> sizes, std::mt19937& rng) {
  tensor<T> t(std::move(sizes));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (T& x : t.values()) x = T(u(rng));
  return t;
}

double seconds_of(const auto& call) {
  const auto t0 = std::chrono::steady_clock::now();
  call();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The memory's side of a decode: every byte of K and V read once (xor-ed as 64-bit words, the
// same loop for either element type), `threads` threads taking a share each. Returns the xor.
template <class T>
std::uint64_t read_all(const tensor<T>& k, const tensor<T>& v, int threads) {
  std::vector<std::uint64_t> folds(static_cast<std::size_t>(threads));
  auto share = [&](int t) {
    std::uint64_t fold = 0;
    for (const tensor<T>* x : {&k, &v}) {
      const std::size_t n = x->values().size() * sizeof(T) / sizeof(std::uint64_t), from = n * t / threads, to = n * (t + 1) / threads;
      const auto* words = reinterpret_cast<const std::uint64_t*>(x->values().data());
      for (std::size_t i = from; i < to; ++i) fold ^= words[i];
    }
    folds[static_cast<std::size_t>(t)] = fold;
  };
  std::vector<std::thread> team;
  for (int t = 1; t < threads; ++t) team.emplace_back(share, t);
  share(0);
  for (std::thread& t : team) t.join();
  std::uint64_t fold = 0;
  for (std::uint64_t x : folds) fold ^= x;
  return fold;
}

// The best time of each kernel over `rounds` rounds, alternating; a first call of each compiles.
template <class K32, class K16, class... A32, class... A16>
std::pair<double, double> best_times(const K32& k32, const K16& k16, int rounds, const std::tuple<A32...>& a32, const std::tuple<A16...>& a16) {
  auto run32 = [&] { std::apply([&](const auto&... a) { (void)k32(a...); }, a32); };
  auto run16 = [&] { std::apply([&](const auto&... a) { (void)k16(a...); }, a16); };
  run32();
  run16();
  double b32 = 1e30, b16 = 1e30;
  for (int r = 0; r < rounds; ++r) {
    b32 = std::min(b32, seconds_of(run32));
    b16 = std::min(b16, seconds_of(run16));
  }
  return {b32, b16};
}

// K and V of `kv_heads` heads, each read by 8 / kv_heads query heads (GQA; MQA with 1).
template <std::int64_t KvHeads, class Keys>
auto grouped(Keys keys) {
  if constexpr (KvHeads == 8) return keys;
  else return repeat_heads(keys, H);
}

template <bool Causal>
auto expression(auto q, auto k, auto v) {
  if constexpr (Causal) return combine(softmax(causal(scaled_scores(q, k))), v);
  else return combine(softmax(scaled_scores(q, k)), v);
}

// One row: every tensor of the bfloat16 kernel is bfloat16 (the queries and the output too). Prefill binds N_Q
// (the queries known when compiling: Q·Kᵀ and P·V on bfloat16 dot products where the CPU has them);
// decode takes it at the call (Q·Kᵀ on the dot products, K's pairs copied per key tile; V converted
// as loaded; the cache read once). K and V have KvHeads heads (8: one per query head).
template <std::int64_t D, bool Causal, std::int64_t KvHeads = 8>
void row(const char* what, std::int64_t nq, std::int64_t nk, bool bind_queries, int rounds, const std::string& target, std::mt19937& rng) {
  constexpr auto Dh = dim<"Dh", D>;
  constexpr auto G = [] {
    if constexpr (KvHeads == 8) return H;
    else return head_dim<"G", KvHeads>;
  }();
  attn::jit_options o;
  if (bind_queries) o.bind = {{"NQ", nq}};
  if (!target.empty()) o.target = target;
  const auto k32 = attn::jit(expression<Causal>(input<"q">(H, NQ, Dh), grouped<KvHeads>(input<"k">(G, NK, Dh)), grouped<KvHeads>(input<"v">(G, NK, Dh))), o);
  const auto k16 = attn::jit(expression<Causal>(input<"q", bf16>(H, NQ, Dh), grouped<KvHeads>(input<"k", bf16>(G, NK, Dh)),
                                                grouped<KvHeads>(input<"v", bf16>(G, NK, Dh))),
                             o);
  // Which products run on bfloat16 dot products (describe()'s words), or none: every tensor converted as loaded.
  const std::string how = k16.compiled().describe(), mark = "products=bfloat16 dot products (";
  const std::size_t at = how.find(mark);
  const std::string products = at == std::string::npos ? "converted" : how.substr(at + mark.size(), how.find(", vdpbf16ps", at) - at - mark.size());
  const auto q = random_tensor<float>({1, 8, nq, D}, rng), k = random_tensor<float>({1, KvHeads, nk, D}, rng),
             v = random_tensor<float>({1, KvHeads, nk, D}, rng);
  const auto qb = random_tensor<bfloat16>({1, 8, nq, D}, rng), kb = random_tensor<bfloat16>({1, KvHeads, nk, D}, rng),
             vb = random_tensor<bfloat16>({1, KvHeads, nk, D}, rng);
  const auto [t32, t16] = best_times(k32, k16, rounds, std::tuple{q, k, v}, std::tuple{qb, kb, vb});
  // A decode reads K and V once: their bytes read alone, float32 then bfloat16 alternating as the
  // kernels did, one tensor at a time as the kernels read them: what half the bytes give such a read.
  std::string reads = "-";
  if (!bind_queries) {
    const int threads = std::getenv("HL_NUM_THREADS") ? std::max(1, std::atoi(std::getenv("HL_NUM_THREADS"))) : 2;
    volatile std::uint64_t fold = 0;  // stored, so that the reads are made
    const auto [r32, r16] = best_times([&] { fold = read_all(k, v, threads); }, [&] { fold = read_all(kb, vb, threads); }, rounds,
                                       std::tuple{}, std::tuple{});
    char ratio[16];
    std::snprintf(ratio, sizeof ratio, "%.2fx", r32 / r16);
    reads = ratio;
  }
  std::printf("| %s | %lld | %lld | %lld | %s | %.3f | %.3f | %.2fx | %s |\n", what, static_cast<long long>(nq), static_cast<long long>(nk),
              static_cast<long long>(D), products.c_str(), t32 * 1e3, t16 * 1e3, t32 / t16, reads.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int rounds = 5;
  std::string target;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") quick = true;
    else if (a == "--rounds" && i + 1 < argc) rounds = std::max(1, std::atoi(argv[++i]));
    else if (a == "--target" && i + 1 < argc) target = argv[++i];
    else {
      std::fprintf(stderr, "usage: precision_bench [--quick] [--rounds N] [--target TARGET]\n");
      return 2;
    }
  }
  std::mt19937 rng(1);
  std::printf("| case | queries | keys | Dh | bfloat16 dot products | float32 ms | bfloat16 ms | bfloat16 speed-up | K and V read alone: bfloat16 speed-up |\n"
              "|---|---|---|---|---|---|---|---|---|\n");
  const std::vector<std::int64_t> lengths = quick ? std::vector<std::int64_t>{256} : std::vector<std::int64_t>{1024, 2048, 4096};
  for (std::int64_t t : lengths) {
    row<64, false>("prefill, full", t, t, true, rounds, target, rng);
    row<128, false>("prefill, full", t, t, true, rounds, target, rng);
    row<64, true>("prefill, causal", t, t, true, rounds, target, rng);
    row<128, true>("prefill, causal", t, t, true, rounds, target, rng);
    row<128, true, 2>("prefill, causal, GQA 8/2", t, t, true, rounds, target, rng);
  }
  const std::vector<std::int64_t> caches = quick ? std::vector<std::int64_t>{2048} : std::vector<std::int64_t>{8192, 32768};
  const int decode_rounds = quick ? 2 : 4 * rounds;
  for (std::int64_t n : caches) {
    for (std::int64_t queries : {1, 8}) row<128, false>("decode", queries, n, false, decode_rounds, target, rng);
    row<128, false, 2>("decode, GQA 8/2", 8, n, false, decode_rounds, target, rng);
  }
}
