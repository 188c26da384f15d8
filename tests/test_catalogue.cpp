// PyTorch attention-gym's catalogue (dsl/attention_gym.hpp, masks.hpp, score_mod.hpp), each entry
// against the double reference with its predicate or modifier written out independently here,
// through the fused lowering (default and random schedules) and the generic one, with a batch of 1
// and of 3, T odd and even, and 2 heads where `head` matters.
#define BOOST_TEST_MODULE catalogue
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include "dsl/dsl.hpp"
#include "runtime/jit.hpp"
#include "support/random_schedule.hpp"
#include "support/reference.hpp"

namespace {

using namespace attn::dsl;
namespace ref = attn::ref;
using attn::tensor;
using idx_t = ref::index;

constexpr auto T = dim<"T">;
constexpr auto H = head_dim<"H", 2>;
constexpr auto Dk = dim<"Dk", 8>;
constexpr auto q = input<"q">(H, T, Dk);
constexpr auto k = input<"k">(H, T, Dk);
constexpr auto v = input<"v">(H, T, Dk);
constexpr auto s = scaled_scores(q, k);

template <class S>
constexpr auto attention(const S& scores) { return combine(softmax(scores), v); }

using keep_fn = std::function<bool(idx_t b, idx_t i, idx_t j, idx_t h)>;
using mod_fn = std::function<double(double score, idx_t i, idx_t j, idx_t h)>;

// extra(b) per batch item: the ids / lengths tensors, filled by `prepare(batch, t, rng)`.
template <class E, class Prepare, class Call>
void expect_catalogue(const E& e, const std::string& what, const std::vector<idx_t>& lengths, const keep_fn& keep,
                      const mod_fn& mod, Prepare prepare, Call call) {
  // The default schedule, a random one (tiles of 4 to 128 keys: a NATTEN mask once lost a key tile
  // at tiles of 4 only), and the generic lowering.
  static std::mt19937 schedules(5);
  const std::string random = ref::random_schedule(schedules);
  for (const auto& [path, schedule] : {std::pair{attn::lowering::automatic, std::string("default")},
                                       std::pair{attn::lowering::automatic, random}, std::pair{attn::lowering::generic, std::string("default")}}) {
    const auto kern = attn::jit(e, {.path = path, .schedule = schedule});
    if (path == attn::lowering::automatic) BOOST_TEST(kern.compiled().describe().starts_with("path=fused"), what);
    std::mt19937 rng(9);
    for (idx_t t : lengths)
      for (idx_t batch : {0, 3}) {
        const auto shape = ref::with_batch(batch, {2, t, 8});
        const tensor<float> tq = ref::random_tensor(shape, rng), tk = ref::random_tensor(shape, rng),
                            tv = ref::random_tensor(shape, rng);
        prepare(batch, t, rng);
        const tensor<float> got = call(kern, tq, tk, tv);
        for (idx_t b = 0; b < std::max<idx_t>(batch, 1); ++b)
          for (idx_t h = 0; h < 2; ++h) {
            const auto reference = [&](auto acc) {
              using Acc = decltype(acc);
              const ref::mask_pred kp = [&](idx_t i, idx_t j, idx_t hh) { return keep(b, i, j, hh); };
              const ref::score_mod<Acc> md = [&](Acc x, idx_t i, idx_t j, idx_t hh) { return static_cast<Acc>(mod(x, i, j, hh)); };
              const idx_t at = (b * 2 + h) * t * 8;
              const auto slice = [&](const tensor<float>& x) {
                ref::mat<Acc> m(t, 8);
                for (idx_t i = 0; i < t * 8; ++i) m.a[static_cast<std::size_t>(i)] = static_cast<Acc>(x.data()[at + i]);
                return m;
              };
              return ref::scaled_dot_product(slice(tq), slice(tk), slice(tv), ref::inv_sqrt(8), kp, md, h).output;
            };
            const ref::comparison c =
                ref::compare(got.data() + (b * 2 + h) * t * 8, t * 8, reference(double{}), reference(float{}));
            BOOST_CHECK_MESSAGE(c.ok, what << " [" << kern.compiled().describe() << "] T=" << t << " B=" << batch << " item "
                                           << b << " head " << h << ": " << c.describe());
          }
      }
  }
}

const mod_fn no_mod = [](double x, idx_t, idx_t, idx_t) { return x; };
const auto no_extra = [](idx_t, idx_t, std::mt19937&) {};
const auto qkv_only = [](const auto& kern, const auto& a, const auto& b, const auto& c) { return kern(a, b, c); };
const std::vector<idx_t> lengths_1d = {1, 6, 17, 40};

}  // namespace

BOOST_AUTO_TEST_CASE(causal_and_sliding_window) {
  expect_catalogue(attention(causal(s)), "causal", lengths_1d, [](idx_t, idx_t i, idx_t j, idx_t) { return j <= i; }, no_mod,
                   no_extra, qkv_only);
  expect_catalogue(attention(sliding_window(s, 5)), "sliding window 5", lengths_1d,
                   [](idx_t, idx_t i, idx_t j, idx_t) { return j <= i && i - j < 5; }, no_mod, no_extra, qkv_only);
}

BOOST_AUTO_TEST_CASE(global_plus_sliding_window) {
  expect_catalogue(attention(global_sliding_window(s, 2, 4)), "global 2 + sliding window 4", lengths_1d,
                   [](idx_t, idx_t i, idx_t j, idx_t) { return (j <= i && i - j < 4) || j < 2 || i < 2; }, no_mod, no_extra,
                   qkv_only);
}

BOOST_AUTO_TEST_CASE(prefix_lm_fixed_and_per_sequence) {
  expect_catalogue(attention(prefix_lm(s, 5)), "prefix-LM 5", lengths_1d,
                   [](idx_t, idx_t i, idx_t j, idx_t) { return j <= i || j < 5; }, no_mod, no_extra, qkv_only);
  tensor<std::int32_t> prefix({1});
  expect_catalogue(attention(prefix_lm(s, lengths<"prefix">)), "prefix-LM per sequence", lengths_1d,
                   [&](idx_t b, idx_t i, idx_t j, idx_t) { return j <= i || j < prefix.data()[prefix.sizes().empty() ? 0 : b]; },
                   no_mod,
                   [&](idx_t batch, idx_t t, std::mt19937& rng) {
                     prefix = tensor<std::int32_t>(batch == 0 ? std::vector<idx_t>{} : std::vector<idx_t>{batch});
                     for (idx_t b = 0; b < std::max<idx_t>(batch, 1); ++b) prefix.data()[b] = static_cast<std::int32_t>(rng() % (t + 1));
                   },
                   [&](const auto& kern, const auto& a, const auto& b, const auto& c) { return kern(a, b, c, prefix); });
}

BOOST_AUTO_TEST_CASE(document_masking_and_shared_prefix) {
  tensor<std::int32_t> ids({1});
  const auto id = [&](idx_t b, idx_t i) { return ids.data()[b * ids.sizes().back() + i]; };
  const auto rising_ids = [&](idx_t batch, idx_t t, std::mt19937& rng) {
    ids = tensor<std::int32_t>(ref::with_batch(batch, {t}));
    for (idx_t b = 0; b < std::max<idx_t>(batch, 1); ++b) {
      std::int32_t next = 0;
      for (idx_t i = 0; i < t; ++i) ids.data()[b * t + i] = next += (rng() % 5 == 0);
    }
  };
  const auto with_ids = [&](const auto& kern, const auto& a, const auto& b, const auto& c) { return kern(a, b, c, ids); };
  expect_catalogue(attention(document_causal(s, int_input<"doc">(T))), "document masking", lengths_1d,
                   [&](idx_t b, idx_t i, idx_t j, idx_t) { return j <= i && id(b, i) == id(b, j); }, no_mod, rising_ids, with_ids);
  expect_catalogue(attention(shared_prefix(s, int_input<"branch">(T))), "shared prefix", lengths_1d,
                   [&](idx_t b, idx_t i, idx_t j, idx_t) { return j <= i && (id(b, j) == 0 || id(b, j) == id(b, i)); }, no_mod,
                   rising_ids, with_ids);
}

BOOST_AUTO_TEST_CASE(dilated_sliding_window_mask) {
  expect_catalogue(attention(dilated_sliding_window(s, 6, 3)), "dilated sliding window 6/3", lengths_1d,
                   [](idx_t, idx_t i, idx_t j, idx_t) { return std::abs(i - j) <= 6 && std::abs(i - j) % 3 == 0; }, no_mod,
                   no_extra, qkv_only);
}

BOOST_AUTO_TEST_CASE(natten_2d_and_sliding_tiles) {
  // NATTEN on 5 × 4 and 6 × 4 canvases with a 3 × 3 kernel; the window moves inward at the borders.
  const auto natten = [](idx_t w, idx_t hgt) {
    return [w, hgt](idx_t, idx_t i, idx_t j, idx_t) {
      const idx_t kw = 3, kh = 3;
      const idx_t cx = std::clamp(i % w, kw / 2, w - 1 - kw / 2), cy = std::clamp(i / w, kh / 2, hgt - 1 - kh / 2);
      return std::abs(cx - j % w) <= kw / 2 && std::abs(cy - j / w) <= kh / 2;
    };
  };
  expect_catalogue(attention(natten_2d(s, 5, 4, 3, 3)), "NATTEN 5x4 kernel 3x3", {20}, natten(5, 4), no_mod, no_extra, qkv_only);
  expect_catalogue(attention(natten_2d(s, 6, 4, 3, 3)), "NATTEN 6x4 kernel 3x3", {24}, natten(6, 4), no_mod, no_extra, qkv_only);
  // The same rows written with float division by hand: (q - q mod 6) / 6 must be exact in both
  // lowerings (the predicate is computed without fast-math rewrites).
  const auto row_of = [](const auto& i) { return (i - i % 6) / 6; };
  const auto by_hand = abs(min(max(q_idx % 6, 1), 4) - kv_idx % 6) <= 1 && abs(min(max(row_of(q_idx), 1), 2) - row_of(kv_idx)) <= 1;
  expect_catalogue(attention(mask(s, by_hand)), "NATTEN 6x4 by hand, float division", {24}, natten(6, 4), no_mod, no_extra, qkv_only);
  // STA on an 8 × 6 canvas of 2 × 2 tiles (4 × 3 tiles), a kernel of 3 × 3 tiles.
  const auto sta = [](idx_t, idx_t i, idx_t j, idx_t) {
    const idx_t tiles_w = 4, tiles_h = 3, kernel = 3, qt = i / 4, kt = j / 4;
    const idx_t cx = std::clamp(qt % tiles_w, kernel / 2, tiles_w - 1 - kernel / 2);
    const idx_t cy = std::clamp(qt / tiles_w, kernel / 2, tiles_h - 1 - kernel / 2);
    return std::abs(cx - kt % tiles_w) <= kernel / 2 && std::abs(cy - kt / tiles_w) <= kernel / 2;
  };
  expect_catalogue(attention(sliding_tile_2d(s, 8, 6, 2, 3)), "STA 8x6 tiles 2x2 kernel 3", {48}, sta, no_mod, no_extra, qkv_only);
}

BOOST_AUTO_TEST_CASE(block_causal_mask) {
  const auto block_keep = [](idx_t, idx_t i, idx_t j, idx_t) { return j / 4 <= i / 4; };
  expect_catalogue(attention(block_causal(s, 4)), "block-causal 4", lengths_1d, block_keep, no_mod, no_extra, qkv_only);
  // The same through float remainders: Halide's simplifier rewrites float x - x % c to x, so the
  // lowering must never hand it a float % (generators/lowering/generic_lowering.cpp, remainder()).
  const auto half_q = q_idx * 0.5f;
  const auto half_kv = kv_idx * 0.5f;
  expect_catalogue(attention(mask(s, half_kv - half_kv % 2 <= half_q - half_q % 2)), "block-causal 4 in floats", lengths_1d,
                   block_keep, no_mod, no_extra, qkv_only);
}

BOOST_AUTO_TEST_CASE(score_modifiers) {
  const auto causal_keep = [](idx_t, idx_t i, idx_t j, idx_t) { return j <= i; };
  expect_catalogue(attention(causal(alibi(s, H))), "ALiBi + causal", lengths_1d, causal_keep,
                   [](double x, idx_t i, idx_t j, idx_t h) { return x - ref::alibi_slope(h, 2) * static_cast<double>(i - j); },
                   no_extra, qkv_only);
  expect_catalogue(attention(causal(softcap(s, 2.0f))), "softcap 2 + causal", lengths_1d, causal_keep,
                   [](double x, idx_t, idx_t, idx_t) { return 2.0 * std::tanh(x / 2.0); }, no_extra, qkv_only);
  expect_catalogue(attention(relative_bias(s, 0.25f)), "relative position bias", lengths_1d,
                   [](idx_t, idx_t, idx_t, idx_t) { return true; },
                   [](double x, idx_t i, idx_t j, idx_t) { return x + 0.25 * static_cast<double>(j - i); }, no_extra, qkv_only);
  // Sandwich: a table by distance (16 entries; farther pairs read the last).
  const std::vector<float> table = sandwich_table(16, 8);
  tensor<float> sandwich_bias({16});
  std::copy(table.begin(), table.end(), sandwich_bias.data());
  expect_catalogue(attention(sandwich(s, weight<"sandwich">(dim<"Dist", 16>))), "sandwich", lengths_1d,
                   [](idx_t, idx_t, idx_t, idx_t) { return true; },
                   [&](double x, idx_t i, idx_t j, idx_t) {
                     double bias = 0;  // Σ cos(d / 10000^(2m/8)), m < 4, at d = min(|i - j|, 15)
                     for (int m = 0; m < 4; ++m) bias += std::cos(static_cast<double>(std::min<idx_t>(std::abs(i - j), 15)) / std::pow(10000.0, 2.0 * m / 8));
                     return x + bias;
                   },
                   no_extra, [&](const auto& kern, const auto& a, const auto& b, const auto& c) { return kern(a, b, c, sandwich_bias); });
}

BOOST_AUTO_TEST_CASE(t5_buckets_per_head) {
  // A (buckets, heads) table: each head its own bias per bucket.
  constexpr auto B = dim<"Buckets", 8>;
  constexpr auto e = attention(modify(s, score + gather(weight<"t5">(B, H), t5_bucket<false>(8, 20), head)));
  std::mt19937 rng(3);
  const tensor<float> table = ref::random_tensor({8, 2}, rng, 2.0f);
  const auto bucket = [](idx_t i, idx_t j) {  // unidirectional: n = max(i - j, 0); 4 exact buckets
    const idx_t n = std::max<idx_t>(i - j, 0), exact = 4, per_side = 8;
    if (n < exact) return n;
    return std::min<idx_t>(static_cast<idx_t>(exact + std::log(double(n) / exact) / std::log(20.0 / exact) * (per_side - exact)),
                           per_side - 1);
  };
  expect_catalogue(e, "T5 buckets per head", lengths_1d, [](idx_t, idx_t, idx_t, idx_t) { return true; },
                   [&](double x, idx_t i, idx_t j, idx_t h) { return x + table.data()[bucket(i, j) * 2 + h]; }, no_extra,
                   [&](const auto& kern, const auto& a, const auto& b, const auto& c) { return kern(a, b, c, table); });
}
