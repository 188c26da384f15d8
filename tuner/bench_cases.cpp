#include "bench_cases.hpp"

#include <algorithm>
#include <stdexcept>
#include "dsl/dsl.hpp"

namespace attn::tune {

namespace {

using namespace attn::dsl;

constexpr auto T = dim<"T">;
constexpr auto H = head_dim<"H", 8>;
constexpr std::int64_t heads = 8;
constexpr int window = 256;

// softmax(mods(q·kᵀ/√Dh))·v, as bench/attention_bench.cpp writes it.
template <std::int64_t Dh_size>
ir::graph attention(const std::string& name) {
  constexpr auto Dh = dim<"Dh", Dh_size>;
  constexpr auto q = input<"q">(H, T, Dh);
  constexpr auto k = input<"k">(H, T, Dh);
  constexpr auto v = input<"v">(H, T, Dh);
  constexpr auto s = scaled_scores(q, k);
  if (name == "full") return to_ir(combine(softmax(s), v));
  if (name == "causal") return to_ir(combine(softmax(causal(s)), v));
  if (name == "sliding_window_256") return to_ir(combine(softmax(sliding_window(s, window)), v));
  if (name == "alibi_causal") return to_ir(combine(softmax(causal(alibi(s, H))), v));
  if (name == "softcap_causal") return to_ir(combine(softmax(causal(softcap(s, 20.0f))), v));
  std::string known;
  for (const std::string& n : bench_case_names()) known += " " + n;
  throw std::invalid_argument("unknown case '" + name + "' (known:" + known + ")");
}

double kept_pairs(const std::string& name, std::int64_t t) {
  const double n = double(t);
  if (name == "full") return n * n;
  if (name != "sliding_window_256") return n * (n + 1) / 2;
  const double w = double(std::min<std::int64_t>(window, t));
  return w * n - w * (w - 1) / 2;
}

}  // namespace

const std::vector<std::string>& bench_case_names() {
  static const std::vector<std::string> names{"full", "causal", "sliding_window_256", "alibi_causal", "softcap_causal"};
  return names;
}

bench_case make_bench_case(const std::string& name, std::int64_t t, std::int64_t dh) {
  if (dh != 64 && dh != 128) throw std::invalid_argument("Dh must be 64 or 128, got " + std::to_string(dh));
  if (t < 1) throw std::invalid_argument("T must be positive, got " + std::to_string(t));
  bench_case c{name, dh == 64 ? attention<64>(name) : attention<128>(name), 0};
  c.flops = 4.0 * double(heads * dh) * kept_pairs(name, t);
  return c;
}

}  // namespace attn::tune
