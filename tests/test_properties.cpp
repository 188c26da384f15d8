// Properties every attention kernel must have, whatever its schedule: weights are distributions,
// causality, fully masked rows, large logits, strided memory, batching, threads, the JIT cache.
// Comparisons with the reference use the rule of support/reference.hpp (ref::compare): kernel error at
// most 2 × the naive float error + 1e-6 · max(1, max |reference|). Properties that compare the
// kernel with itself (strides, batching, causality) expect the same arithmetic and allow 1e-6.
#define BOOST_TEST_MODULE properties
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/jit.hpp"
#include "support/reference.hpp"

namespace {

using namespace attn::dsl;
namespace ref = attn::ref;
using attn::tensor;
using ref::index;
using ref::item;
using ref::mat;
using ref::random_tensor;
using ref::with_batch;
using qx_pair = std::pair<index, index>;

constexpr auto T = dim<"T">;
constexpr auto NQ = dim<"NQ">;
constexpr auto NX = dim<"NX">;
constexpr auto Dm = dim<"D", 12>;
constexpr auto Dk = dim<"Dk", 6>;
constexpr auto Dv = dim<"Dv", 5>;

// Causal self-attention over x (T, 12) with W_Q, W_K, W_V (12, 6).
constexpr auto x = input<"x">(T, Dm);
constexpr auto wq = weight<"wq">(Dm, Dk);
constexpr auto wk = weight<"wk">(Dm, Dk);
constexpr auto wv = weight<"wv">(Dm, Dk);
constexpr auto causal_attention = variants::causal_self_attention(x, wq, wk, wv);

// Attention on given queries (N_Q, 6), keys (N_X, 6), values (N_X, 5).
constexpr auto q = input<"q">(NQ, Dk);
constexpr auto k = input<"k">(NX, Dk);
constexpr auto v = input<"v">(NX, Dv);
constexpr auto plain_attention = scaled_dot_product_attention(q, k, v);
constexpr auto padded_attention = combine(softmax(key_padding(scaled_scores(q, k), lengths<"len">)), v);

float weight_scale(index fan_in) { return static_cast<float>(2.0 * std::sqrt(3.0 / static_cast<double>(fan_in))); }

struct causal_inputs {
  tensor<float> x, wq, wk, wv;
};

causal_inputs random_causal(index batch, index t, std::mt19937& rng) {
  return {random_tensor(with_batch(batch, {t, 12}), rng), random_tensor({12, 6}, rng, weight_scale(12)),
          random_tensor({12, 6}, rng, weight_scale(12)), random_tensor({12, 6}, rng, weight_scale(12))};
}

template <class Acc>
ref::result<Acc> causal_reference(const causal_inputs& in, index b) {
  return ref::causal_self_attention(item<Acc>(in.x, b, 2), item<Acc>(in.wq, 0, 2), item<Acc>(in.wk, 0, 2),
                                    item<Acc>(in.wv, 0, 2));
}

struct qkv {
  tensor<float> q, k, v;
};

qkv random_qkv(index batch, index nq, index nx, std::mt19937& rng, float scale = 1.0f) {
  return {random_tensor(with_batch(batch, {nq, 6}), rng, scale), random_tensor(with_batch(batch, {nx, 6}), rng, scale),
          random_tensor(with_batch(batch, {nx, 5}), rng)};
}

template <class Acc>
ref::result<Acc> qkv_reference(const qkv& in, index b, const ref::mask_pred& keep = {}) {
  return ref::scaled_dot_product(item<Acc>(in.q, b, 2), item<Acc>(in.k, b, 2), item<Acc>(in.v, b, 2), ref::inv_sqrt(6),
                                 keep);
}

// Batch item b of a (B, rows, cols) or (rows, cols) kernel result, checked by the 2× rule.
void expect_close(const tensor<float>& got, index b, const mat<double>& r, const mat<float>& f, const std::string& what) {
  const ref::comparison c = ref::compare(got.data() + b * r.size(), r.size(), r, f);
  BOOST_CHECK_MESSAGE(c.ok, what << ", batch item " << b << ": " << c.describe());
}

// ------------------------------------------------------------------ weights

BOOST_AUTO_TEST_CASE(weight_rows_sum_to_one) {
  // Each row of the softmax sums to 1: with n ≤ 33 terms, each quotient rounded once and the
  // sum rounded n times, |Σ - 1| ≤ ~3·n·2^-24 ≈ 6e-6; 1e-5 is allowed.
  constexpr double sum_tolerance = 1e-5;
  std::mt19937 rng(101);
  const auto kc = attn::jit(causal_attention, {.with_weights = true});
  for (index t : {1, 5, 17, 33})
    for (index batch : {0, 3}) {
      const causal_inputs in = random_causal(batch, t, rng);
      const attn::outputs out = kc.run(in.x, in.wq, in.wk, in.wv);
      const std::string what = "causal T=" + std::to_string(t) + " B=" + std::to_string(batch);
      BOOST_REQUIRE_MESSAGE(out.weights.sizes() == with_batch(batch, {t, t}),
                            what << ": weights shape " << ref::to_string(out.weights.sizes()));
      BOOST_REQUIRE_MESSAGE(out.output.sizes() == with_batch(batch, {t, 6}), what << ": output shape");
      for (index b = 0; b < std::max<index>(batch, 1); ++b) {
        const float* w = out.weights.data() + b * t * t;
        for (index i = 0; i < t; ++i) {
          double sum = 0;
          for (index j = 0; j < t; ++j) sum += w[i * t + j];
          BOOST_CHECK_MESSAGE(std::abs(sum - 1.0) <= sum_tolerance, what << " row " << i << " sums to " << sum);
          for (index j = i + 1; j < t; ++j)
            BOOST_CHECK_MESSAGE(w[i * t + j] == 0.0f, what << ": future weight (" << i << ", " << j << ") is " << w[i * t + j]);
        }
        const auto r = causal_reference<double>(in, b);
        const auto f = causal_reference<float>(in, b);
        expect_close(out.weights, b, r.weights, f.weights, what + " weights");
        expect_close(out.output, b, r.output, f.output, what + " output");
      }
    }

  const auto kp = attn::jit(plain_attention, {.with_weights = true});
  for (auto [nq, nx] : std::vector<qx_pair>{{1, 1}, {3, 17}, {19, 4}, {33, 9}}) {
    const qkv in = random_qkv(2, nq, nx, rng);
    const attn::outputs out = kp.run(in.q, in.k, in.v);
    const std::string what = "plain N_Q=" + std::to_string(nq) + " N_X=" + std::to_string(nx);
    BOOST_REQUIRE_MESSAGE(out.weights.sizes() == with_batch(2, {nq, nx}), what << ": weights shape");
    for (index r = 0; r < 2 * nq; ++r) {
      double sum = 0;
      for (index j = 0; j < nx; ++j) sum += out.weights.data()[r * nx + j];
      BOOST_CHECK_MESSAGE(std::abs(sum - 1.0) <= sum_tolerance, what << " row " << r << " sums to " << sum);
    }
    for (index b = 0; b < 2; ++b)
      expect_close(out.weights, b, qkv_reference<double>(in, b).weights, qkv_reference<float>(in, b).weights,
                   what + " weights");
  }

  // Multi-head: weights (B, H, T, T), one distribution per head and query.
  constexpr auto H = head_dim<"H", 3>;
  constexpr auto wd = weight<"wq">(Dm, Dm);
  constexpr auto wkd = weight<"wk">(Dm, Dm);
  constexpr auto wvd = weight<"wv">(Dm, Dm);
  constexpr auto wod = weight<"wo">(Dm, Dm);
  const auto km = attn::jit(variants::multi_head_self_attention(x, wd, wkd, wvd, wod, H), {.with_weights = true});
  for (index t : {1, 6, 19}) {
    const tensor<float> tx = random_tensor({2, t, 12}, rng);
    std::vector<tensor<float>> w;
    for (int i = 0; i < 4; ++i) w.push_back(random_tensor({12, 12}, rng, weight_scale(12)));
    const attn::outputs out = km.run(tx, w[0], w[1], w[2], w[3]);
    const std::string what = "multi-head T=" + std::to_string(t);
    BOOST_REQUIRE_MESSAGE(out.weights.sizes() == (std::vector<index>{2, 3, t, t}),
                          what << ": weights shape " << ref::to_string(out.weights.sizes()));
    for (index r = 0; r < 2 * 3 * t; ++r) {
      double sum = 0;
      for (index j = 0; j < t; ++j) sum += out.weights.data()[r * t + j];
      BOOST_CHECK_MESSAGE(std::abs(sum - 1.0) <= sum_tolerance, what << " row " << r << " sums to " << sum);
    }
    for (index b = 0; b < 2; ++b) {
      const auto reference = [&](auto acc) {
        using Acc = decltype(acc);
        return ref::multi_head_self_attention(item<Acc>(tx, b, 2), item<Acc>(w[0], 0, 2), item<Acc>(w[1], 0, 2),
                                              item<Acc>(w[2], 0, 2), item<Acc>(w[3], 0, 2), 3);
      };
      const auto r = reference(double{});
      const auto f = reference(float{});
      expect_close(out.weights, b, r.weights, f.weights, what + " weights");
      expect_close(out.output, b, r.output, f.output, what + " output");
    }
  }
}

// ------------------------------------------------------------------ causality

BOOST_AUTO_TEST_CASE(causal_output_ignores_the_future) {
  // Changing rows > i of x (future keys and values) leaves output rows ≤ i as they were:
  // masked scores are -inf, their weights exactly 0. Same arithmetic: allow 1e-6 (expect 0).
  std::mt19937 rng(102);
  const auto kc = attn::jit(causal_attention);
  for (index batch : {0, 3}) {
    constexpr index t = 17;
    const causal_inputs base = random_causal(batch, t, rng);
    const tensor<float> y0 = kc(base.x, base.wq, base.wk, base.wv);
    for (index i : {0, 1, 6, 15}) {
      causal_inputs changed = base;
      for (index b = 0; b < std::max<index>(batch, 1); ++b)
        for (index r = i + 1; r < t; ++r)
          for (index c = 0; c < 12; ++c) changed.x.data()[(b * t + r) * 12 + c] = 5.0f * (static_cast<float>(rng() % 1000) / 500.0f - 1.0f);
      const tensor<float> y1 = kc(changed.x, changed.wq, changed.wk, changed.wv);
      BOOST_REQUIRE(y1.sizes() == y0.sizes());
      double worst = 0;
      for (index b = 0; b < std::max<index>(batch, 1); ++b)
        worst = std::max(worst, ref::max_abs_difference(y0.data() + b * t * 6, y1.data() + b * t * 6, (i + 1) * 6));
      BOOST_CHECK_MESSAGE(worst <= 1e-6, "B=" << batch << ", rows > " << i << " changed: rows <= " << i
                                              << " moved by " << worst);
      if (worst != 0) BOOST_TEST_MESSAGE("causal: rows <= " << i << " moved by " << worst << " (not bit-exact)");
      // And the rows after i did change (the test would be vacuous otherwise).
      if (i + 1 < t) BOOST_CHECK(ref::max_abs_difference(y0.data() + (i + 1) * 6, y1.data() + (i + 1) * 6, 6) > 0);
    }
  }
}

// ------------------------------------------------------------------ fully masked rows

BOOST_AUTO_TEST_CASE(fully_masked_row_is_zero_not_nan) {
  std::mt19937 rng(103);
  // Key padding with lengths 0: every row of those items is fully masked.
  {
    const auto kpad = attn::jit(padded_attention, {.with_weights = true});
    const qkv in = random_qkv(3, 4, 6, rng);
    tensor<std::int32_t> len({3});
    len.values() = {0, 3, 0};
    const attn::outputs out = kpad.run(in.q, in.k, in.v, len);
    BOOST_REQUIRE(out.output.sizes() == with_batch(3, {4, 5}));
    BOOST_REQUIRE(out.weights.sizes() == with_batch(3, {4, 6}));
    BOOST_CHECK(ref::all_finite(out.output));
    BOOST_CHECK(ref::all_finite(out.weights));
    for (index b : {0, 2}) {
      for (index e = 0; e < 4 * 5; ++e) BOOST_CHECK_EQUAL(out.output.data()[b * 20 + e], 0.0f);
      for (index e = 0; e < 4 * 6; ++e) BOOST_CHECK_EQUAL(out.weights.data()[b * 24 + e], 0.0f);
    }
    const auto keep3 = [](index, index kv, index) { return kv < 3; };
    expect_close(out.output, 1, qkv_reference<double>(in, 1, keep3).output, qkv_reference<float>(in, 1, keep3).output,
                 "key padding, length 3");
  }
  // A strict causal predicate: row 0 sees no key at all.
  {
    const auto kstrict = attn::jit(combine(softmax(mask(scaled_scores(q, k), kv_idx < q_idx)), v), {.with_weights = true});
    const qkv in = random_qkv(0, 5, 5, rng);
    const attn::outputs out = kstrict.run(in.q, in.k, in.v);
    BOOST_REQUIRE(out.output.sizes() == with_batch(0, {5, 5}));
    BOOST_CHECK(ref::all_finite(out.output));
    BOOST_CHECK(ref::all_finite(out.weights));
    for (index e = 0; e < 5; ++e) BOOST_CHECK_EQUAL(out.output.data()[e], 0.0f);
    for (index e = 0; e < 5; ++e) BOOST_CHECK_EQUAL(out.weights.data()[e], 0.0f);
    const auto strict = [](index qi, index kv, index) { return kv < qi; };
    expect_close(out.output, 0, qkv_reference<double>(in, 0, strict).output, qkv_reference<float>(in, 0, strict).output,
                 "strict causal");
  }
}

// ------------------------------------------------------------------ large logits

BOOST_AUTO_TEST_CASE(logits_of_1e4_stay_finite_and_correct) {
  // Without subtracting the row maximum, exp(1e4) overflows (inf/inf = NaN) and exp(-1e4)
  // underflows (0/0 = NaN). The 2× rule still applies: score rounding (1e4 · 2^-24 ≈ 6e-4) hits
  // the naive float as much as the kernel.
  std::mt19937 rng(104);
  const auto kp = attn::jit(plain_attention, {.with_weights = true});
  // Random queries and keys of ±173: scores q·k/√6 with a standard deviation of ~1e4.
  for (auto [nq, nx] : std::vector<qx_pair>{{1, 1}, {4, 7}, {9, 16}, {17, 3}}) {
    const qkv in = random_qkv(3, nq, nx, rng, 173.0f);
    const attn::outputs out = kp.run(in.q, in.k, in.v);
    BOOST_CHECK(ref::all_finite(out.output));
    BOOST_CHECK(ref::all_finite(out.weights));
    for (index b = 0; b < 3; ++b) {
      const auto r = qkv_reference<double>(in, b);
      const auto f = qkv_reference<float>(in, b);
      BOOST_TEST_MESSAGE("large logits: max |score| ~ " << ref::max_abs(ref::matmul(item<double>(in.q, b, 2), ref::transpose(item<double>(in.k, b, 2)))) / std::sqrt(6.0));
      expect_close(out.output, b, r.output, f.output, "random logits ~1e4, N_Q=" + std::to_string(nq) + " N_X=" + std::to_string(nx));
      expect_close(out.weights, b, r.weights, f.weights, "random logits ~1e4 (weights)");
    }
  }
  // Every key the same vector u; query rows +c·u and -c·u with c·|u|²/√6 = 1e4: a row of equal
  // scores +1e4 and a row of equal scores -1e4. Both must give uniform weights (the mean of V).
  {
    constexpr index nx = 9;
    qkv in = random_qkv(0, 2, nx, rng);
    std::vector<float> u(6);
    double norm2 = 0;
    for (std::size_t c = 0; c < 6; ++c) {
      u[c] = 0.5f + 0.1f * static_cast<float>(c);
      norm2 += double(u[c]) * u[c];
    }
    const double scale = 1e4 * std::sqrt(6.0) / norm2;
    for (index j = 0; j < nx; ++j)
      for (index c = 0; c < 6; ++c) in.k.data()[j * 6 + c] = u[static_cast<std::size_t>(c)];
    for (index c = 0; c < 6; ++c) {
      in.q.data()[c] = static_cast<float>(scale * u[static_cast<std::size_t>(c)]);
      in.q.data()[6 + c] = static_cast<float>(-scale * u[static_cast<std::size_t>(c)]);
    }
    const attn::outputs out = kp.run(in.q, in.k, in.v);
    BOOST_CHECK(ref::all_finite(out.output));
    BOOST_CHECK(ref::all_finite(out.weights));
    // The nine equal dot products may round differently in the kernel (vector lanes, FMA):
    // up to ~6 ulps of 1e4 (6e-3), so weights within 2% of 1/9 and outputs within 0.02.
    for (index e = 0; e < 2 * nx; ++e)
      BOOST_CHECK_CLOSE(out.weights.data()[e], 1.0f / static_cast<float>(nx), 2.0);  // percent
    const auto r = qkv_reference<double>(in, 0);
    const double err = ref::max_abs_error(out.output.data(), r.output.size(), r.output);
    BOOST_CHECK_MESSAGE(err <= 0.02, "equal scores ±1e4: output error " << err);
  }
}

// ------------------------------------------------------------------ strided views

BOOST_AUTO_TEST_CASE(strided_views_match_dense) {
  // Inputs and outputs in non-dense layouts (transposed, padded rows, padded batch) must give the
  // dense call's result; the kernel computes the same arithmetic: allow 1e-6 (expect 0).
  std::mt19937 rng(105);
  const auto kc = attn::jit(causal_attention);
  for (index batch : {0, 2})
    for (index t : {1, 7, 13}) {
      const causal_inputs in = random_causal(batch, t, rng);
      const tensor<float> dense = kc(in.x, in.wq, in.wk, in.wv);
      const index nb = std::max<index>(batch, 1);
      const std::string what = "T=" + std::to_string(t) + " B=" + std::to_string(batch);

      // x transposed in memory: element (b, r, c) at b·(12·T + 5) + c·T + r (items 5 apart).
      const index item_stride = 12 * t + 5;
      std::vector<float> xt(static_cast<std::size_t>(nb * item_stride), std::numeric_limits<float>::quiet_NaN());
      for (index b = 0; b < nb; ++b)
        for (index r = 0; r < t; ++r)
          for (index c = 0; c < 12; ++c) xt[static_cast<std::size_t>(b * item_stride + c * t + r)] = in.x.data()[(b * t + r) * 12 + c];
      const attn::tensor_view xv = batch == 0 ? attn::view(xt.data(), {t, 12}, {1, t})
                                              : attn::view(xt.data(), {batch, t, 12}, {item_stride, 1, t});
      // W_Q with rows padded to 9 floats.
      std::vector<float> wqp(12 * 9, std::numeric_limits<float>::quiet_NaN());
      for (index r = 0; r < 12; ++r)
        for (index c = 0; c < 6; ++c) wqp[static_cast<std::size_t>(r * 9 + c)] = in.wq.data()[r * 6 + c];
      const attn::tensor_view wqv = attn::view(wqp.data(), {12, 6}, {9, 1});

      // Output 1: rows padded to 8 floats (padding must stay untouched).
      constexpr float sentinel = -12345.0f;
      std::vector<float> padded(static_cast<std::size_t>(nb * t * 8), sentinel);
      const attn::tensor_view pv = batch == 0 ? attn::view(padded.data(), {t, 6}, {8, 1})
                                              : attn::view(padded.data(), {batch, t, 6}, {t * 8, 8, 1});
      kc.into(pv, xv, wqv, in.wk, in.wv);
      double worst = 0;
      bool padding_intact = true;
      for (index b = 0; b < nb; ++b)
        for (index r = 0; r < t; ++r) {
          worst = std::max(worst, ref::max_abs_difference(&padded[static_cast<std::size_t>((b * t + r) * 8)],
                                                          dense.data() + (b * t + r) * 6, 6));
          for (index c = 6; c < 8; ++c) padding_intact = padding_intact && padded[static_cast<std::size_t>((b * t + r) * 8 + c)] == sentinel;
        }
      BOOST_CHECK_MESSAGE(worst <= 1e-6, what << ": transposed x, padded W_Q and output differ from dense by " << worst);
      BOOST_CHECK_MESSAGE(padding_intact, what << ": the kernel wrote into the output's padding");

      // Output 2: transposed (column-major per item), dense inputs.
      std::vector<float> outt(static_cast<std::size_t>(nb * t * 6), sentinel);
      const attn::tensor_view tv = batch == 0 ? attn::view(outt.data(), {t, 6}, {1, t})
                                              : attn::view(outt.data(), {batch, t, 6}, {t * 6, 1, t});
      kc.into(tv, in.x, in.wq, in.wk, in.wv);
      worst = 0;
      for (index b = 0; b < nb; ++b)
        for (index r = 0; r < t; ++r)
          for (index c = 0; c < 6; ++c)
            worst = std::max(worst, std::abs(double(outt[static_cast<std::size_t>(b * t * 6 + c * t + r)]) - dense.data()[(b * t + r) * 6 + c]));
      BOOST_CHECK_MESSAGE(worst <= 1e-6, what << ": transposed output differs from dense by " << worst);
    }
}

// ------------------------------------------------------------------ batching

BOOST_AUTO_TEST_CASE(batched_call_equals_per_item_calls) {
  std::mt19937 rng(106);
  const auto kp = attn::jit(plain_attention);
  const auto kpad = attn::jit(padded_attention);
  for (auto [nq, nx] : std::vector<qx_pair>{{1, 1}, {3, 5}, {17, 9}}) {
    constexpr index batch = 3;
    const qkv in = random_qkv(batch, nq, nx, rng);
    tensor<std::int32_t> len({batch});
    len.values() = {static_cast<std::int32_t>(nx), 1, static_cast<std::int32_t>((nx + 1) / 2)};
    const tensor<float> all = kp(in.q, in.k, in.v);
    const tensor<float> all_padded = kpad(in.q, in.k, in.v, len);
    BOOST_REQUIRE(all.sizes() == with_batch(batch, {nq, 5}));
    BOOST_REQUIRE(all_padded.sizes() == with_batch(batch, {nq, 5}));
    for (index b = 0; b < batch; ++b) {
      auto slice = [b](const tensor<float>& t) {
        std::vector<index> s(t.sizes().begin() + 1, t.sizes().end());
        tensor<float> r(s);
        std::copy_n(t.data() + b * r.values().size(), r.values().size(), r.data());
        return r;
      };
      const tensor<float> one = kp(slice(in.q), slice(in.k), slice(in.v));
      tensor<std::int32_t> one_len(std::vector<index>{});
      one_len.data()[0] = len.data()[b];
      const tensor<float> one_padded = kpad(slice(in.q), slice(in.k), slice(in.v), one_len);
      BOOST_REQUIRE(one.sizes() == (std::vector<index>{nq, 5}));
      const index n = nq * 5;
      const double d = ref::max_abs_difference(all.data() + b * n, one.data(), n);
      const double dp = ref::max_abs_difference(all_padded.data() + b * n, one_padded.data(), n);
      BOOST_CHECK_MESSAGE(d <= 1e-6, "item " << b << " of a batched call differs from its own call by " << d);
      BOOST_CHECK_MESSAGE(dp <= 1e-6, "key padding: item " << b << " of a batched call differs from its own call by " << dp);
    }
  }
}

// ------------------------------------------------------------------ threads

BOOST_AUTO_TEST_CASE(one_kernel_called_from_four_threads) {
  // Boost.Test assertions are not thread-safe: threads record, the main thread checks.
  const auto kc = attn::jit(causal_attention);
  constexpr int threads = 4, calls = 12;
  struct record {
    std::string what;
    ref::comparison c;
  };
  std::vector<std::vector<record>> results(threads);
  std::vector<std::string> errors(threads);
  std::vector<std::thread> pool;
  for (int w = 0; w < threads; ++w)
    pool.emplace_back([&, w] {
      try {
        std::mt19937 rng(200 + static_cast<unsigned>(w));
        for (int i = 0; i < calls; ++i) {
          const index t = 1 + (w * 7 + i * 5) % 29, batch = i % 3;
          const causal_inputs in = random_causal(batch, t, rng);
          const tensor<float> y = kc(in.x, in.wq, in.wk, in.wv);
          for (index b = 0; b < std::max<index>(batch, 1); ++b) {
            const auto r = causal_reference<double>(in, b);
            const auto f = causal_reference<float>(in, b);
            record rec{"thread " + std::to_string(w) + " call " + std::to_string(i) + " T=" + std::to_string(t) +
                           " B=" + std::to_string(batch) + " item " + std::to_string(b),
                       {}};
            if (y.sizes() != with_batch(batch, {t, 6})) {
              rec.c.ok = false;
              rec.what += ": output shape " + ref::to_string(y.sizes());
            } else {
              rec.c = ref::compare(y.data() + b * t * 6, t * 6, r.output, f.output);
            }
            results[static_cast<std::size_t>(w)].push_back(rec);
          }
        }
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(w)] = e.what();
      }
    });
  for (auto& th : pool) th.join();
  for (int w = 0; w < threads; ++w) {
    BOOST_CHECK_MESSAGE(errors[static_cast<std::size_t>(w)].empty(), "thread " << w << " threw: " << errors[static_cast<std::size_t>(w)]);
    for (const record& r : results[static_cast<std::size_t>(w)]) BOOST_CHECK_MESSAGE(r.c.ok, r.what << ": " << r.c.describe());
  }
  std::size_t calls_checked = 0;
  for (const auto& r : results) calls_checked += r.size();
  BOOST_CHECK_GE(calls_checked, static_cast<std::size_t>(threads * calls));
}

// ------------------------------------------------------------------ the JIT cache

BOOST_AUTO_TEST_CASE(jit_cache_reuses_compiled_kernels) {
  // An expression no other test compiles: a relative bias with slope 0.125.
  const auto expr = [] { return combine(softmax(relative_bias(scaled_scores(q, k), 0.125f)), v); };
  const std::size_t before = attn::compiled_kernel::cache_size();
  const auto k1 = attn::jit(expr());
  BOOST_CHECK_EQUAL(attn::compiled_kernel::cache_size(), before + 1);
  const auto k2 = attn::jit(expr());  // built again, equal: the same kernel
  BOOST_CHECK_EQUAL(attn::compiled_kernel::cache_size(), before + 1);
  BOOST_CHECK(&k1.compiled() == &k2.compiled());
  // Other options are another kernel, cached in turn.
  const auto k3 = attn::jit(expr(), {.with_weights = true});
  BOOST_CHECK_EQUAL(attn::compiled_kernel::cache_size(), before + 2);
  const auto k4 = attn::jit(expr(), {.with_weights = true});
  BOOST_CHECK_EQUAL(attn::compiled_kernel::cache_size(), before + 2);
  BOOST_CHECK(&k3.compiled() == &k4.compiled());
  BOOST_CHECK(&k1.compiled() != &k3.compiled());
  // Another constant is another expression.
  const auto k5 = attn::jit(combine(softmax(relative_bias(scaled_scores(q, k), 0.375f)), v));
  BOOST_CHECK_EQUAL(attn::compiled_kernel::cache_size(), before + 3);
  BOOST_CHECK(&k5.compiled() != &k1.compiled());

  // jit() of one new expression from 4 threads at once: one compilation, one shared kernel.
  const auto fresh = [] { return combine(softmax(softcap(scaled_scores(q, k), 7.5f)), v); };
  const std::size_t before_threads = attn::compiled_kernel::cache_size();
  std::vector<const attn::compiled_kernel*> got(4, nullptr);
  std::vector<std::thread> pool;
  std::atomic<int> failures{0};
  for (std::size_t w = 0; w < 4; ++w)
    pool.emplace_back([&, w] {
      try {
        got[w] = &attn::jit(fresh()).compiled();
      } catch (...) {
        ++failures;
      }
    });
  for (auto& th : pool) th.join();
  BOOST_CHECK_EQUAL(failures.load(), 0);
  BOOST_CHECK_EQUAL(attn::compiled_kernel::cache_size(), before_threads + 1);
  for (std::size_t w = 1; w < 4; ++w) BOOST_CHECK(got[w] == got[0]);
}

}  // namespace

// A score modifier written over a mask must not bring masked keys back: softcap(causal(S))
// and causal(softcap(S)) give the same weights (masked scores stay -inf through modify).
BOOST_AUTO_TEST_CASE(modifier_over_mask_keeps_masked_keys_masked) {
  constexpr auto T = dim<"T">;
  constexpr auto x = input<"x">(T, dim<"D", 4>);
  auto outer = attn::jit(softmax(softcap(causal(scaled_scores(x, x)), 2.0f)));
  auto inner = attn::jit(softmax(causal(softcap(scaled_scores(x, x), 2.0f))));
  std::mt19937 rng(11);
  const auto X = random_tensor({5, 4}, rng);
  const auto a = outer(X), b = inner(X);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 5; ++j) {
      BOOST_TEST(a(i, j) == b(i, j), boost::test_tools::tolerance(1e-6f));
      if (j > i) BOOST_TEST(a(i, j) == 0.0f);
    }
}
