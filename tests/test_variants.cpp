// Every named variant of the seeds, and every mask and score modifier, JIT-compiled and compared
// with the independent reference in support/reference.hpp on random inputs over many shapes.
//
// Call order (kernel::parameters()): inputs, then weights, then lengths, each by first appearance.
//
// Shapes: static dims are part of an expression's type, so each variant is instantiated for a
// few static widths (odd ones and ones that are not multiples of the vector width); run-time dims
// (T, N_Q, N_X) vary across calls of one kernel: 1, odd sizes, sizes that are not multiples of 8
// or 16, N_Q != N_X both ways; without a batch dim, and with batches of 1 and 3.
//
// Tolerance (ref::compare): per batch item, max |kernel - double reference| must be at most
//   2 · max |naive float - double reference| + 1e-6 · max(1, max |reference|).
// The naive float is the same reference algorithm run in float on the same inputs; a float kernel
// that is no more than twice as wrong passes (FlashAttention's rule). The floor, ~8 float ulps of
// an O(1) output, covers inputs on which the naive float happens to be exact (a single key gives a
// weight of exactly 1) while the kernel sums in a different order.
#define BOOST_TEST_MODULE variants
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
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

constexpr auto T = dim<"T">;
constexpr auto NQ = dim<"NQ">;
constexpr auto NX = dim<"NX">;

// (N_Q, N_X): 1, odd, N_Q != N_X both ways, not multiples of 8 or 16, one multiple of 16.
const std::vector<std::pair<index, index>> qx_sizes = {{1, 1},  {1, 7},   {3, 5},   {5, 3},  {7, 7},
                                                       {13, 1}, {17, 33}, {33, 17}, {16, 19}};
const std::vector<index> t_sizes = {1, 2, 3, 5, 7, 13, 17, 33};
// 0: no batch dim (a batch of 1, output without a batch dim); 1 and 3: a leading batch dim.
const std::vector<index> batch_sizes = {0, 1, 3};

// Weights uniform in ±2·√(3/fan_in): projections of U(-1, 1) inputs get variance 4/3, so the
// scores spread over a few units: softmax neither flat nor one-hot.
float weight_scale(index fan_in) { return static_cast<float>(2.0 * std::sqrt(3.0 / static_cast<double>(fan_in))); }

std::string case_name(const std::string& variant, index nq, index nx, index batch) {
  return variant + " N_Q=" + std::to_string(nq) + " N_X=" + std::to_string(nx) +
         (batch == 0 ? std::string(" (no batch dim)") : " B=" + std::to_string(batch));
}

template <class K>
void expect_parameters(const K& k, const std::vector<std::string>& names) {
  BOOST_TEST(k.parameters() == names, boost::test_tools::per_element());
}

// Compares a kernel output with the reference, batch item by batch item.
// reference(b, Acc{}) returns the reference output of item b as mat<Acc>:
// Acc = double is the reference, Acc = float the naive float that sets the tolerance.
template <class Reference>
void expect_matches(const tensor<float>& got, index batch, const std::vector<index>& item_shape,
                    const Reference& reference, const std::string& what) {
  const std::vector<index> want = with_batch(batch, item_shape);
  BOOST_CHECK_MESSAGE(got.sizes() == want, what << ": output shape " << ref::to_string(got.sizes()) << ", expected "
                                                << ref::to_string(want));
  if (got.sizes() != want) return;
  const index n = ref::elements(item_shape);
  for (index b = 0; b < std::max<index>(batch, 1); ++b) {
    const mat<double> r = reference(b, double{});
    const mat<float> f = reference(b, float{});
    const ref::comparison c = ref::compare(got.data() + b * n, n, r, f);
    BOOST_CHECK_MESSAGE(c.ok, what << ", batch item " << b << ": " << c.describe());
  }
}

// ------------------------------------------------------------------ the variants of the seeds

template <std::int64_t D>
void check_simplified_vector(std::uint32_t seed) {
  constexpr auto Dm = dim<"D", D>;
  const auto k = attn::jit(variants::simplified(input<"q">(Dm), input<"x">(NX, Dm)));
  expect_parameters(k, {"q", "x"});
  std::mt19937 rng(seed);
  for (index nx : t_sizes)
    for (index batch : batch_sizes) {
      const tensor<float> q = random_tensor(with_batch(batch, {D}), rng);
      const tensor<float> x = random_tensor(with_batch(batch, {nx, D}), rng);
      expect_matches(k(q, x), batch, {D}, [&](index b, auto acc) {
        using Acc = decltype(acc);
        return ref::simplified(item<Acc>(q, b, 1), item<Acc>(x, b, 2)).output;
      }, case_name("simplified, vector q, D=" + std::to_string(D), 1, nx, batch));
    }
}

// A variant of two inputs (N_Q, D) and (N_X, D) (simplified with a matrix query, Luong dot),
// over every (N_Q, N_X) and batch size; reference(a, b) gives one item's expected output.
template <std::int64_t D, class K, class Reference>
void check_two_inputs(const K& k, const Reference& reference, const std::string& label, std::uint32_t seed) {
  std::mt19937 rng(seed);
  for (auto [nq, nx] : qx_sizes)
    for (index batch : batch_sizes) {
      const tensor<float> first = random_tensor(with_batch(batch, {nq, D}), rng);
      const tensor<float> second = random_tensor(with_batch(batch, {nx, D}), rng);
      expect_matches(k(first, second), batch, {nq, D}, [&](index b, auto acc) {
        using Acc = decltype(acc);
        return reference(item<Acc>(first, b, 2), item<Acc>(second, b, 2));
      }, case_name(label + std::to_string(D), nq, nx, batch));
    }
}

template <std::int64_t D>
void check_simplified_matrix(std::uint32_t seed) {
  constexpr auto Dm = dim<"D", D>;
  const auto k = attn::jit(variants::simplified(input<"q">(NQ, Dm), input<"x">(NX, Dm)));
  expect_parameters(k, {"q", "x"});
  check_two_inputs<D>(k, [](const auto& q, const auto& x) { return ref::simplified(q, x).output; },
                      "simplified, matrix q, D=", seed);
}

BOOST_AUTO_TEST_CASE(simplified_vector_query) {
  check_simplified_vector<8>(1);
  check_simplified_vector<13>(2);
}

BOOST_AUTO_TEST_CASE(simplified_matrix_query) {
  check_simplified_matrix<8>(3);
  check_simplified_matrix<20>(4);
}

template <std::int64_t DQ, std::int64_t DX, std::int64_t DK, std::int64_t DV>
void check_standard(std::uint32_t seed) {
  constexpr auto Dq = dim<"DQ", DQ>;
  constexpr auto Dx = dim<"DX", DX>;
  constexpr auto Dk = dim<"Dk", DK>;
  constexpr auto Dv = dim<"Dv", DV>;
  const auto k = attn::jit(variants::standard(input<"q">(NQ, Dq), input<"x">(NX, Dx), weight<"wq">(Dq, Dk),
                                              weight<"wk">(Dx, Dk), weight<"wv">(Dx, Dv)));
  expect_parameters(k, {"q", "x", "wq", "wk", "wv"});
  std::mt19937 rng(seed);
  for (auto [nq, nx] : qx_sizes)
    for (index batch : batch_sizes) {
      const tensor<float> q = random_tensor(with_batch(batch, {nq, DQ}), rng);
      const tensor<float> x = random_tensor(with_batch(batch, {nx, DX}), rng);
      const tensor<float> wq = random_tensor({DQ, DK}, rng, weight_scale(DQ));
      const tensor<float> wk = random_tensor({DX, DK}, rng, weight_scale(DX));
      const tensor<float> wv = random_tensor({DX, DV}, rng, weight_scale(DX));
      expect_matches(k(q, x, wq, wk, wv), batch, {nq, DV}, [&](index b, auto acc) {
        using Acc = decltype(acc);
        return ref::standard(item<Acc>(q, b, 2), item<Acc>(x, b, 2), item<Acc>(wq, 0, 2), item<Acc>(wk, 0, 2),
                             item<Acc>(wv, 0, 2)).output;
      }, case_name("standard", nq, nx, batch));
    }
}

BOOST_AUTO_TEST_CASE(standard) {
  check_standard<8, 8, 4, 4>(5);
  check_standard<20, 13, 6, 16>(6);  // D_Q != D_X, d_k != d_v
}

template <std::int64_t D, std::int64_t DK>
void check_self_attention(std::uint32_t seed) {
  constexpr auto Dm = dim<"D", D>;
  constexpr auto Dk = dim<"Dk", DK>;
  const auto k = attn::jit(
      variants::self_attention(input<"x">(T, Dm), weight<"wq">(Dm, Dk), weight<"wk">(Dm, Dk), weight<"wv">(Dm, Dk)));
  expect_parameters(k, {"x", "wq", "wk", "wv"});
  std::mt19937 rng(seed);
  for (index t : t_sizes)
    for (index batch : batch_sizes) {
      const tensor<float> x = random_tensor(with_batch(batch, {t, D}), rng);
      const tensor<float> wq = random_tensor({D, DK}, rng, weight_scale(D));
      const tensor<float> wk = random_tensor({D, DK}, rng, weight_scale(D));
      const tensor<float> wv = random_tensor({D, DK}, rng, weight_scale(D));
      expect_matches(k(x, wq, wk, wv), batch, {t, DK}, [&](index b, auto acc) {
        using Acc = decltype(acc);
        return ref::self_attention(item<Acc>(x, b, 2), item<Acc>(wq, 0, 2), item<Acc>(wk, 0, 2), item<Acc>(wv, 0, 2))
            .output;
      }, case_name("self-attention D=" + std::to_string(D), t, t, batch));
    }
}

BOOST_AUTO_TEST_CASE(self_attention) { check_self_attention<20, 6>(7); }

BOOST_AUTO_TEST_CASE(cross_attention) {
  constexpr auto Dm = dim<"D", 12>;
  constexpr auto Dk = dim<"Dk", 5>;
  const auto k = attn::jit(variants::cross_attention(input<"decoder">(NQ, Dm), input<"encoder">(NX, Dm),
                                                     weight<"wq">(Dm, Dk), weight<"wk">(Dm, Dk), weight<"wv">(Dm, Dk)));
  expect_parameters(k, {"decoder", "encoder", "wq", "wk", "wv"});
  std::mt19937 rng(8);
  for (auto [nq, nx] : qx_sizes)
    for (index batch : batch_sizes) {
      const tensor<float> dec = random_tensor(with_batch(batch, {nq, 12}), rng);
      const tensor<float> enc = random_tensor(with_batch(batch, {nx, 12}), rng);
      const tensor<float> wq = random_tensor({12, 5}, rng, weight_scale(12));
      const tensor<float> wk = random_tensor({12, 5}, rng, weight_scale(12));
      const tensor<float> wv = random_tensor({12, 5}, rng, weight_scale(12));
      expect_matches(k(dec, enc, wq, wk, wv), batch, {nq, 5}, [&](index b, auto acc) {
        using Acc = decltype(acc);
        return ref::cross_attention(item<Acc>(dec, b, 2), item<Acc>(enc, b, 2), item<Acc>(wq, 0, 2),
                                    item<Acc>(wk, 0, 2), item<Acc>(wv, 0, 2)).output;
      }, case_name("cross-attention", nq, nx, batch));
    }
}

template <std::int64_t D, std::int64_t DK>
void check_causal_self_attention(std::uint32_t seed) {
  constexpr auto Dm = dim<"D", D>;
  constexpr auto Dk = dim<"Dk", DK>;
  const auto k = attn::jit(variants::causal_self_attention(input<"x">(T, Dm), weight<"wq">(Dm, Dk),
                                                           weight<"wk">(Dm, Dk), weight<"wv">(Dm, Dk)));
  expect_parameters(k, {"x", "wq", "wk", "wv"});
  std::mt19937 rng(seed);
  for (index t : t_sizes)
    for (index batch : batch_sizes) {
      const tensor<float> x = random_tensor(with_batch(batch, {t, D}), rng);
      const tensor<float> wq = random_tensor({D, DK}, rng, weight_scale(D));
      const tensor<float> wk = random_tensor({D, DK}, rng, weight_scale(D));
      const tensor<float> wv = random_tensor({D, DK}, rng, weight_scale(D));
      expect_matches(k(x, wq, wk, wv), batch, {t, DK}, [&](index b, auto acc) {
        using Acc = decltype(acc);
        return ref::causal_self_attention(item<Acc>(x, b, 2), item<Acc>(wq, 0, 2), item<Acc>(wk, 0, 2),
                                          item<Acc>(wv, 0, 2)).output;
      }, case_name("causal self-attention D=" + std::to_string(D), t, t, batch));
    }
}

BOOST_AUTO_TEST_CASE(causal_self_attention) {
  check_causal_self_attention<8, 4>(9);
  check_causal_self_attention<20, 16>(10);
}

template <std::int64_t D, std::int64_t H>
void check_multi_head(std::uint32_t seed) {
  constexpr auto Dm = dim<"D", D>;
  constexpr auto Hd = head_dim<"H", H>;
  const auto k = attn::jit(variants::multi_head_self_attention(input<"x">(T, Dm), weight<"wq">(Dm, Dm),
                                                               weight<"wk">(Dm, Dm), weight<"wv">(Dm, Dm),
                                                               weight<"wo">(Dm, Dm), Hd));
  expect_parameters(k, {"x", "wq", "wk", "wv", "wo"});
  std::mt19937 rng(seed);
  for (index t : t_sizes)
    for (index batch : batch_sizes) {
      const tensor<float> x = random_tensor(with_batch(batch, {t, D}), rng);
      const tensor<float> wq = random_tensor({D, D}, rng, weight_scale(D));
      const tensor<float> wk = random_tensor({D, D}, rng, weight_scale(D));
      const tensor<float> wv = random_tensor({D, D}, rng, weight_scale(D));
      const tensor<float> wo = random_tensor({D, D}, rng, weight_scale(D));
      expect_matches(k(x, wq, wk, wv, wo), batch, {t, D}, [&](index b, auto acc) {
        using Acc = decltype(acc);
        return ref::multi_head_self_attention(item<Acc>(x, b, 2), item<Acc>(wq, 0, 2), item<Acc>(wk, 0, 2),
                                              item<Acc>(wv, 0, 2), item<Acc>(wo, 0, 2), H).output;
      }, case_name("multi-head D=" + std::to_string(D) + " H=" + std::to_string(H), t, t, batch));
    }
}

BOOST_AUTO_TEST_CASE(multi_head_self_attention) {
  check_multi_head<8, 2>(11);
  check_multi_head<20, 4>(12);  // 5 columns per head
}

// Grouped-query attention: H = 4 query heads of Dh = 3 over G = 4, 2, 1 groups (heads per group
// 1, 2, 4; G = 1 is multi-query), causal or not, fused and generic.
template <std::int64_t G>
void check_grouped_query(bool is_causal, std::uint32_t seed) {
  constexpr std::int64_t D = 10, heads = 4, dh = 3;
  // [snippet: grouped_query]
  constexpr auto Dm = dim<"D", D>;
  constexpr auto Hq = head_dim<"H", heads>;
  constexpr auto Gk = head_dim<"G", G>;
  constexpr auto Dh = dim<"Dh", dh>;
  constexpr auto HDh = dim<"H*Dh", heads * dh>;  // concat_heads' width, by name: W_O's rows
  constexpr auto GDh = dim<"GDh", G * dh>;
  constexpr auto x = input<"x">(T, Dm);
  constexpr auto y = variants::grouped_query_self_attention(x, weight<"wq">(Dm, HDh), weight<"wk">(Dm, GDh),
                                                            weight<"wv">(Dm, GDh), weight<"wo">(HDh, Dm), Hq, Gk, Dh);
  constexpr auto q = split_heads(project(x, weight<"wq">(Dm, HDh)), Hq, Dh);
  constexpr auto k = repeat_heads(split_heads(project(x, weight<"wk">(Dm, GDh)), Gk, Dh), Hq);
  constexpr auto v = repeat_heads(split_heads(project(x, weight<"wv">(Dm, GDh)), Gk, Dh), Hq);
  constexpr auto yc = project(concat_heads(combine(softmax(causal(scaled_scores(q, k))), v)), weight<"wo">(HDh, Dm));
  static_assert(shape_of(y) == shape(T, Dm) && shape_of(yc) == shape(T, Dm));
  // The variant's masked form is the written-out causal layer, node for node.
  constexpr auto yv = variants::grouped_query_self_attention(x, weight<"wq">(Dm, HDh), weight<"wk">(Dm, GDh),
                                                             weight<"wv">(Dm, GDh), weight<"wo">(HDh, Dm), Hq, Gk, Dh,
                                                             [](auto s) { return causal(s); });
  static_assert(std::is_same_v<decltype(yv), decltype(yc)>);
  // [end snippet]
  const std::string what = std::string(is_causal ? "causal " : "") + "GQA H=4 G=" + std::to_string(G);
  for (attn::lowering path : {attn::lowering::automatic, attn::lowering::generic}) {
    const auto run = [&](const auto& e) {
      const auto kern = attn::jit(e, {.path = path});
      expect_parameters(kern, {"x", "wq", "wk", "wv", "wo"});
      if (path == attn::lowering::automatic) BOOST_TEST(kern.compiled().describe().starts_with("path=fused"));
      std::mt19937 rng(seed);
      for (index t : t_sizes)
        for (index batch : batch_sizes) {
          const tensor<float> xs = random_tensor(with_batch(batch, {t, D}), rng);
          const tensor<float> wq = random_tensor({D, heads * dh}, rng, weight_scale(D));
          const tensor<float> wk = random_tensor({D, G * dh}, rng, weight_scale(D));
          const tensor<float> wv = random_tensor({D, G * dh}, rng, weight_scale(D));
          const tensor<float> wo = random_tensor({heads * dh, D}, rng, weight_scale(heads * dh));
          expect_matches(kern(xs, wq, wk, wv, wo), batch, {t, D}, [&](index b, auto acc) {
            using Acc = decltype(acc);
            const auto xb = item<Acc>(xs, b, 2);
            const auto r = ref::grouped_query(ref::matmul(xb, item<Acc>(wq, 0, 2)), ref::matmul(xb, item<Acc>(wk, 0, 2)),
                                              ref::matmul(xb, item<Acc>(wv, 0, 2)), heads, G,
                                              is_causal ? ref::mask_pred(ref::causal_keep) : ref::mask_pred());
            return ref::matmul(r.output, item<Acc>(wo, 0, 2));
          }, case_name(what, t, t, batch));
        }
    };
    if (is_causal) run(yc);
    else run(y);
  }
}

BOOST_AUTO_TEST_CASE(grouped_query_and_multi_query) {
  check_grouped_query<4>(false, 31);
  check_grouped_query<2>(false, 32);
  check_grouped_query<1>(false, 33);
  check_grouped_query<2>(true, 34);
  check_grouped_query<1>(true, 35);
}

template <std::int64_t D>
void check_luong_dot(std::uint32_t seed) {
  constexpr auto Dm = dim<"D", D>;
  const auto k = attn::jit(variants::luong_dot(input<"s">(NQ, Dm), input<"h">(NX, Dm)));
  expect_parameters(k, {"s", "h"});
  check_two_inputs<D>(k, [](const auto& s, const auto& h) { return ref::luong_dot(s, h).output; }, "Luong dot D=", seed);
}

BOOST_AUTO_TEST_CASE(luong_dot) {
  check_luong_dot<8>(13);
  check_luong_dot<17>(14);
}

BOOST_AUTO_TEST_CASE(luong_general) {
  constexpr auto Ds = dim<"Ds", 6>;
  constexpr auto Dh = dim<"Dh", 11>;
  const auto k = attn::jit(variants::luong_general(input<"s">(NQ, Ds), input<"h">(NX, Dh), weight<"w">(Ds, Dh)));
  expect_parameters(k, {"s", "h", "w"});
  std::mt19937 rng(15);
  for (auto [nq, nx] : qx_sizes)
    for (index batch : batch_sizes) {
      const tensor<float> s = random_tensor(with_batch(batch, {nq, 6}), rng);
      const tensor<float> h = random_tensor(with_batch(batch, {nx, 11}), rng);
      const tensor<float> w = random_tensor({6, 11}, rng, weight_scale(11));
      expect_matches(k(s, h, w), batch, {nq, 11}, [&](index b, auto acc) {
        using Acc = decltype(acc);
        return ref::luong_general(item<Acc>(s, b, 2), item<Acc>(h, b, 2), item<Acc>(w, 0, 2)).output;
      }, case_name("Luong general", nq, nx, batch));
    }
}

template <std::int64_t DS, std::int64_t DH, std::int64_t A>
void check_bahdanau(std::uint32_t seed) {
  constexpr auto Ds = dim<"Ds", DS>;
  constexpr auto Dh = dim<"Dh", DH>;
  constexpr auto Ad = dim<"A", A>;
  const auto k = attn::jit(variants::bahdanau(input<"s">(NQ, Ds), input<"h">(NX, Dh), weight<"w1">(Ds, Ad),
                                              weight<"w2">(Dh, Ad), weight<"b">(Ad), weight<"v">(Ad)));
  expect_parameters(k, {"s", "h", "w1", "w2", "b", "v"});
  std::mt19937 rng(seed);
  for (auto [nq, nx] : qx_sizes)
    for (index batch : batch_sizes) {
      const tensor<float> s = random_tensor(with_batch(batch, {nq, DS}), rng);
      const tensor<float> h = random_tensor(with_batch(batch, {nx, DH}), rng);
      const tensor<float> w1 = random_tensor({DS, A}, rng, weight_scale(DS));
      const tensor<float> w2 = random_tensor({DH, A}, rng, weight_scale(DH));
      const tensor<float> bias = random_tensor({A}, rng, 0.5f);
      const tensor<float> v = random_tensor({A}, rng, weight_scale(A));
      expect_matches(k(s, h, w1, w2, bias, v), batch, {nq, DH}, [&](index b, auto acc) {
        using Acc = decltype(acc);
        return ref::bahdanau(item<Acc>(s, b, 2), item<Acc>(h, b, 2), item<Acc>(w1, 0, 2), item<Acc>(w2, 0, 2),
                             item<Acc>(bias, 0, 1), item<Acc>(v, 0, 1)).output;
      }, case_name("Bahdanau Ds=" + std::to_string(DS) + " Dh=" + std::to_string(DH) + " A=" + std::to_string(A), nq,
                   nx, batch));
    }
}

BOOST_AUTO_TEST_CASE(bahdanau) {
  check_bahdanau<4, 4, 8>(16);
  check_bahdanau<6, 5, 7>(17);
}

// ------------------------------------------------------------------ masks and score modifiers
// On queries q (N_Q, Dk), keys k (N_X, Dk), values v (N_X, Dv) given directly.

constexpr auto Dk8 = dim<"Dk", 8>;
constexpr auto Dv5 = dim<"Dv", 5>;
constexpr auto mq = input<"q">(NQ, Dk8);
constexpr auto mk = input<"k">(NX, Dk8);
constexpr auto mv = input<"v">(NX, Dv5);

struct qkv {
  tensor<float> q, k, v;
};

qkv random_qkv(index batch, index nq, index nx, std::mt19937& rng, float scale = 1.0f) {
  return {random_tensor(with_batch(batch, {nq, 8}), rng, scale), random_tensor(with_batch(batch, {nx, 8}), rng, scale),
          random_tensor(with_batch(batch, {nx, 5}), rng)};
}

template <class Acc>
ref::result<Acc> reference_qkv(const qkv& t, index b, const ref::mask_pred& keep, const ref::score_mod<Acc>& mod = {}) {
  return ref::scaled_dot_product(item<Acc>(t.q, b, 2), item<Acc>(t.k, b, 2), item<Acc>(t.v, b, 2), ref::inv_sqrt(8),
                                 keep, mod);
}

// Output rows of batch item b that the reference says are fully masked must be exactly 0.
void expect_zero_rows(const tensor<float>& y, index batch, index b, index rows, index cols,
                      const std::vector<index>& masked_rows, const std::string& what) {
  if (y.sizes() != with_batch(batch, {rows, cols})) return;
  for (index i : masked_rows)
    for (index j = 0; j < cols; ++j) {
      const float v = y.data()[(b * rows + i) * cols + j];
      BOOST_CHECK_MESSAGE(v == 0.0f, what << ", batch item " << b << ": fully masked row " << i << " has " << v);
    }
}

BOOST_AUTO_TEST_CASE(key_padding_lengths) {
  const auto k = attn::jit(combine(softmax(key_padding(scaled_scores(mq, mk), lengths<"len">)), mv));
  expect_parameters(k, {"q", "k", "v", "len"});
  std::mt19937 rng(18);
  int turn = 0;
  for (auto [nq, nx] : qx_sizes)
    for (index batch : batch_sizes) {
      const qkv t = random_qkv(batch, nq, nx, rng);
      // Lengths: full, 0 (every row fully masked: zero output), about half, 1.
      const index pattern[] = {nx, 0, (nx + 1) / 2, 1};
      tensor<std::int32_t> len(batch == 0 ? std::vector<index>{} : std::vector<index>{batch});
      for (index b = 0; b < std::max<index>(batch, 1); ++b)
        len.data()[b] = static_cast<std::int32_t>(pattern[(b + turn) % 4]);
      ++turn;
      const tensor<float> y = k(t.q, t.k, t.v, len);
      const std::string what = case_name("key padding", nq, nx, batch);
      expect_matches(y, batch, {nq, 5}, [&](index b, auto acc) {
        using Acc = decltype(acc);
        const index n = ref::length_at(len, b);
        return reference_qkv<Acc>(t, b, [n](index, index kv, index) { return kv < n; }).output;
      }, what);
      for (index b = 0; b < std::max<index>(batch, 1); ++b)
        if (ref::length_at(len, b) == 0) {
          std::vector<index> all(static_cast<std::size_t>(nq));
          for (index i = 0; i < nq; ++i) all[static_cast<std::size_t>(i)] = i;
          expect_zero_rows(y, batch, b, nq, 5, all, what + " (length 0)");
        }
    }
}

BOOST_AUTO_TEST_CASE(sliding_window) {
  constexpr auto Dm = dim<"D", 12>;
  constexpr auto Dk = dim<"Dk", 6>;
  constexpr auto x = input<"x">(T, Dm);
  constexpr auto wq = weight<"wq">(Dm, Dk);
  constexpr auto wk = weight<"wk">(Dm, Dk);
  constexpr auto wv = weight<"wv">(Dm, Dk);
  std::mt19937 rng(19);
  for (int window : {1, 3, 8}) {
    const auto k = attn::jit(
        combine(softmax(attn::dsl::sliding_window(scaled_scores(project(x, wq), project(x, wk)), window)),
                project(x, wv)));
    expect_parameters(k, {"x", "wq", "wk", "wv"});
    for (index t : t_sizes)
      for (index batch : batch_sizes) {
        const tensor<float> tx = random_tensor(with_batch(batch, {t, 12}), rng);
        const tensor<float> twq = random_tensor({12, 6}, rng, weight_scale(12));
        const tensor<float> twk = random_tensor({12, 6}, rng, weight_scale(12));
        const tensor<float> twv = random_tensor({12, 6}, rng, weight_scale(12));
        expect_matches(k(tx, twq, twk, twv), batch, {t, 6}, [&](index b, auto acc) {
          using Acc = decltype(acc);
          const index w = window;
          return ref::self_attention(item<Acc>(tx, b, 2), item<Acc>(twq, 0, 2), item<Acc>(twk, 0, 2),
                                     item<Acc>(twv, 0, 2),
                                     [w](index q, index kv, index) { return kv <= q && q - kv < w; })
              .output;
        }, case_name("sliding window " + std::to_string(window), t, t, batch));
      }
  }
}

// ALiBi on a multi-head self-attention: D = 12, H = 3 heads of 4 (not a power of two: the paper's
// interleaved slopes), concatenated and projected by W_O.
constexpr auto Da = dim<"D", 12>;
constexpr auto Ha = head_dim<"H", 3>;
constexpr auto ax = input<"x">(T, Da);
constexpr auto awq = weight<"wq">(Da, Da);
constexpr auto awk = weight<"wk">(Da, Da);
constexpr auto awv = weight<"wv">(Da, Da);
constexpr auto awo = weight<"wo">(Da, Da);
constexpr auto alibi_q = split_heads(project(ax, awq), Ha);
constexpr auto alibi_k = split_heads(project(ax, awk), Ha);
constexpr auto alibi_v = split_heads(project(ax, awv), Ha);

template <class K>
void check_alibi_kernel(const K& k, bool is_causal, std::uint32_t seed) {
  expect_parameters(k, {"x", "wq", "wk", "wv", "wo"});
  std::mt19937 rng(seed);
  for (index t : t_sizes)
    for (index batch : batch_sizes) {
      const tensor<float> x = random_tensor(with_batch(batch, {t, 12}), rng);
      const tensor<float> wq = random_tensor({12, 12}, rng, weight_scale(12));
      const tensor<float> wk = random_tensor({12, 12}, rng, weight_scale(12));
      const tensor<float> wv = random_tensor({12, 12}, rng, weight_scale(12));
      const tensor<float> wo = random_tensor({12, 12}, rng, weight_scale(12));
      expect_matches(k(x, wq, wk, wv, wo), batch, {t, 12}, [&](index b, auto acc) {
        using Acc = decltype(acc);
        const ref::score_mod<Acc> alibi = [](Acc s, index q, index kv, index h) {
          return s - static_cast<Acc>(ref::alibi_slope(h, 3)) * static_cast<Acc>(q - kv);
        };
        return ref::multi_head_self_attention(item<Acc>(x, b, 2), item<Acc>(wq, 0, 2), item<Acc>(wk, 0, 2),
                                              item<Acc>(wv, 0, 2), item<Acc>(wo, 0, 2), 3,
                                              is_causal ? ref::mask_pred(ref::causal_keep) : ref::mask_pred(), alibi)
            .output;
      }, case_name(is_causal ? "ALiBi + causal, H=3" : "ALiBi, H=3", t, t, batch));
    }
}

// The reference's slopes are the ALiBi paper's (its get_slopes), non-powers of two included.
BOOST_AUTO_TEST_CASE(alibi_slopes_are_the_papers) {
  const std::vector<std::pair<index, std::vector<double>>> want = {
      {3, {0x1p-4, 0x1p-8, 0x1p-2}},
      {6, {0x1p-2, 0x1p-4, 0x1p-6, 0x1p-8, 0x1p-1, 0x1p-3}},
      {8, {0x1p-1, 0x1p-2, 0x1p-3, 0x1p-4, 0x1p-5, 0x1p-6, 0x1p-7, 0x1p-8}}};
  for (const auto& [heads, slopes] : want)
    for (index h = 0; h < heads; ++h) BOOST_TEST(ref::alibi_slope(h, heads) == slopes[static_cast<std::size_t>(h)]);
}

BOOST_AUTO_TEST_CASE(alibi_heads) {
  const auto k = attn::jit(project(concat_heads(combine(softmax(alibi(scaled_scores(alibi_q, alibi_k), Ha)), alibi_v)), awo));
  check_alibi_kernel(k, false, 20);
}

BOOST_AUTO_TEST_CASE(alibi_heads_causal) {
  const auto k = attn::jit(
      project(concat_heads(combine(softmax(causal(alibi(scaled_scores(alibi_q, alibi_k), Ha))), alibi_v)), awo));
  check_alibi_kernel(k, true, 21);
}

BOOST_AUTO_TEST_CASE(soft_capping) {
  constexpr float cap = 2.0f;
  const auto k = attn::jit(combine(softmax(softcap(scaled_scores(mq, mk), cap)), mv));
  expect_parameters(k, {"q", "k", "v"});
  std::mt19937 rng(22);
  for (auto [nq, nx] : qx_sizes)
    for (index batch : batch_sizes) {
      const qkv t = random_qkv(batch, nq, nx, rng, 3.0f);  // scores with std ~3: many beyond the cap
      expect_matches(k(t.q, t.k, t.v), batch, {nq, 5}, [&](index b, auto acc) {
        using Acc = decltype(acc);
        return reference_qkv<Acc>(t, b, {}, [](Acc s, index, index, index) {
          return static_cast<Acc>(cap) * std::tanh(s / static_cast<Acc>(cap));
        }).output;
      }, case_name("soft-capping 2", nq, nx, batch));
    }
}

BOOST_AUTO_TEST_CASE(relative_position_bias) {
  constexpr float slope = 0.25f;
  const auto k = attn::jit(combine(softmax(relative_bias(scaled_scores(mq, mk), slope)), mv));
  expect_parameters(k, {"q", "k", "v"});
  std::mt19937 rng(23);
  for (auto [nq, nx] : qx_sizes)
    for (index batch : batch_sizes) {
      const qkv t = random_qkv(batch, nq, nx, rng);
      expect_matches(k(t.q, t.k, t.v), batch, {nq, 5}, [&](index b, auto acc) {
        using Acc = decltype(acc);
        return reference_qkv<Acc>(t, b, {}, [](Acc s, index q, index kv, index) {
          return s + static_cast<Acc>(slope) * static_cast<Acc>(kv - q);
        }).output;
      }, case_name("relative bias 0.25", nq, nx, batch));
    }
}

BOOST_AUTO_TEST_CASE(predicate_mask) {
  // Keys with 2·kv < q, and the key 3 places ahead. Row 0 keeps only key 3: fully masked when
  // N_X <= 3, so zero rows are exercised too.
  const auto k = attn::jit(combine(softmax(mask(scaled_scores(mq, mk), (kv_idx * 2 < q_idx) || (kv_idx == q_idx + 3))), mv));
  expect_parameters(k, {"q", "k", "v"});
  const auto keep = [](index q, index kv, index) { return 2 * kv < q || kv == q + 3; };
  std::mt19937 rng(24);
  for (auto [nq, nx] : qx_sizes)
    for (index batch : batch_sizes) {
      const qkv t = random_qkv(batch, nq, nx, rng);
      const tensor<float> y = k(t.q, t.k, t.v);
      const std::string what = case_name("predicate mask", nq, nx, batch);
      expect_matches(y, batch, {nq, 5}, [&](index b, auto acc) {
        using Acc = decltype(acc);
        return reference_qkv<Acc>(t, b, keep).output;
      }, what);
      std::vector<index> masked;
      for (index i = 0; i < nq; ++i) {
        bool any = false;
        for (index j = 0; j < nx; ++j) any = any || keep(i, j, 0);
        if (!any) masked.push_back(i);
      }
      for (index b = 0; b < std::max<index>(batch, 1); ++b) expect_zero_rows(y, batch, b, nq, 5, masked, what);
    }
}

BOOST_AUTO_TEST_CASE(additive_mask_input) {
  // scores + m, where the input m (N_Q, N_X) holds 0 (keep) or -inf (drop).
  const auto k = attn::jit(combine(softmax(scaled_scores(mq, mk) + input<"m">(NQ, NX)), mv));
  expect_parameters(k, {"q", "k", "m", "v"});
  std::mt19937 rng(25);
  std::bernoulli_distribution drop(0.4);
  for (auto [nq, nx] : qx_sizes)
    for (index batch : batch_sizes) {
      const qkv t = random_qkv(batch, nq, nx, rng);
      tensor<float> m(with_batch(batch, {nq, nx}));
      for (float& v : m.values()) v = drop(rng) ? -std::numeric_limits<float>::infinity() : 0.0f;
      // The last row of every item fully masked.
      for (index b = 0; b < std::max<index>(batch, 1); ++b)
        for (index j = 0; j < nx; ++j) m.data()[(b * nq + nq - 1) * nx + j] = -std::numeric_limits<float>::infinity();
      const tensor<float> y = k(t.q, t.k, m, t.v);
      const std::string what = case_name("additive -inf mask", nq, nx, batch);
      expect_matches(y, batch, {nq, 5}, [&](index b, auto acc) {
        using Acc = decltype(acc);
        const mat<Acc> mb = item<Acc>(m, b, 2);
        return reference_qkv<Acc>(t, b, {}, [&mb](Acc s, index q, index kv, index) { return s + mb(q, kv); }).output;
      }, what);
      for (index b = 0; b < std::max<index>(batch, 1); ++b) expect_zero_rows(y, batch, b, nq, 5, {nq - 1}, what);
    }
}

}  // namespace
