// Decoding: a few new queries against a long key/value cache (S = 8192, H = 8, Dh = 64), the query
// count known only at the call (one kernel for every count) or fixed when compiling (one row).
// Memory-bound: GB/s counts K and V read once. Best of 15 calls, kernels called in turn.
//   build/bench/decoding                 bench/decoding_peer.py runs PyTorch's SDPA on the same shapes
#include <cstdio>
#include <vector>
#include "interleaved.hpp"
#include "runtime/jit.hpp"
using namespace attn::dsl;
constexpr auto H = head_dim<"H", 8>;
constexpr auto S = dim<"S">;
constexpr auto Dh = dim<"Dh", 64>;
constexpr auto k = input<"k">(H, S, Dh);
constexpr auto v = input<"v">(H, S, Dh);
template <class Q> constexpr auto attention(const Q& q) { return combine(softmax(scaled_scores(q, k)), v); }
using bench::best_of_rounds;
using bench::random_tensor;

int main(int argc, char** argv) {
  attn::jit_options one_row_options;  // build/bench/decoding "q_unroll=1 kv_vectors=8": the one-row kernel's schedule
  if (argc > 1) one_row_options.schedule = argv[1];
  const std::int64_t keys = 8192;
  const auto any_count = attn::jit(attention(input<"q">(H, dim<"Nq">, Dh)));
  const auto one_row = attn::jit(attention(input<"q">(H, dim<"one", 1>, Dh)), one_row_options);
  const auto K = random_tensor({1, 8, keys, 64}, 2), V = random_tensor({1, 8, keys, 64}, 3);
  const double bytes = 2.0 * 8 * keys * 64 * 4;
  std::printf("S=%lld H=8 Dh=64, best of 15; %s\n", static_cast<long long>(keys), any_count.compiled().describe().c_str());
  for (const std::int64_t nq : {1, 2, 4, 6, 48}) {
    const auto Q = random_tensor({1, 8, nq, 64}, 1);
    auto out = any_count(Q, K, V);
    std::vector<double> b;
    if (nq == 1) b = best_of_rounds(15, [&] { any_count.into(out.view(), Q, K, V); }, [&] { one_row.into(out.view(), Q, K, V); });
    else b = best_of_rounds(15, [&] { any_count.into(out.view(), Q, K, V); });
    std::printf("queries %3lld: %.3f ms (%.1f GB/s)", static_cast<long long>(nq), b[0] * 1e3, bytes / b[0] * 1e-9);
    if (nq == 1) std::printf("; one row fixed when compiling %.3f ms (%.1f GB/s)", b[1] * 1e3, bytes / b[1] * 1e-9);
    std::printf("\n");
  }
}
