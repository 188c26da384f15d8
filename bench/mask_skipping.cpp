// How much work masks skip: the fused kernel at T = 4096, H = 8, Dh = 64 for full attention, causal,
// a sliding window of 256 and key padding to half the length; best of 7 calls each, the four
// kernels called in turn (a busy spell on a shared machine then slows all four, not one).
//   build/bench/mask_skipping ["schedule parameters"]   (default: the default schedules)
#include <cstdio>
#include <vector>
#include "interleaved.hpp"
#include "runtime/jit.hpp"
using namespace attn::dsl;
constexpr auto T = dim<"T">;
constexpr auto H = head_dim<"H", 8>;
constexpr auto Dh = dim<"Dh", 64>;
constexpr auto q = input<"q">(H, T, Dh);
constexpr auto k = input<"k">(H, T, Dh);
constexpr auto v = input<"v">(H, T, Dh);
constexpr auto s = scaled_scores(q, k);
using bench::best_of_rounds;
using bench::random_tensor;

int main(int argc, char** argv) {
  const attn::jit_options o{.schedule = argc > 1 ? argv[1] : "default"};
  const std::int64_t t = 4096;
  auto Q = random_tensor({1, 8, t, 64}, 1), K = random_tensor({1, 8, t, 64}, 2), V = random_tensor({1, 8, t, 64}, 3);
  attn::tensor<std::int32_t> len({1}); len.data()[0] = t / 2;
  const auto full_k = attn::jit(combine(softmax(s), v), o);
  const auto causal_k = attn::jit(combine(softmax(causal(s)), v), o);
  const auto window_k = attn::jit(combine(softmax(sliding_window(s, 256)), v), o);
  const auto padded_k = attn::jit(combine(softmax(key_padding(s, lengths<"len">)), v), o);
  auto out = full_k(Q, K, V);
  const std::vector<double> b = best_of_rounds(
      7, [&] { full_k.into(out.view(), Q, K, V); }, [&] { causal_k.into(out.view(), Q, K, V); },
      [&] { window_k.into(out.view(), Q, K, V); }, [&] { padded_k.into(out.view(), Q, K, V, len); });
  const double full = b[0], causal_ = b[1], window = b[2], padded = b[3];
  std::printf("schedule %s\n", o.schedule.c_str());
  std::printf("T=4096 H=8 Dh=64 fused, best of 7: full %.1f ms; causal %.1f ms (%.2fx faster); sliding window 256 %.1f ms (%.2fx); key padding to half %.1f ms (%.2fx)\n",
              full * 1e3, causal_ * 1e3, full / causal_, window * 1e3, full / window, padded * 1e3, full / padded);
}
