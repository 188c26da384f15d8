// Softmax-free attention: sigmoid attention (Ramapuram et al. 2024) and ReLU attention (Wortsman
// et al. 2023), and any other elementwise function of the scores combined with V. Each is fused
// (the same lowering as softmax attention: key tiles, mask skipping, no N_Q × N_K matrix) and is
// compared, fused with several schedules and generic, with the double reference
// (ref::attend_unnormalised) over sizes that are not multiples of any tile, several heads, batches,
// causal and key-padding masks.
//
// Tolerance: ref::compare (tests/support/reference.hpp): kernel error ≤ 2 · naive float error + 1e-6 floor.
#define BOOST_TEST_MODULE normalisations
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "runtime/jit.hpp"
#include "support/head_tensors.hpp"
#include "support/reference.hpp"

namespace {

using namespace attn::dsl;
namespace ref = attn::ref;
using attn::tensor;
using idx_t = ref::index;
using ref::mat;

constexpr auto NQ = dim<"NQ">;
constexpr auto NK = dim<"NK">;
constexpr auto H = head_dim<"H", 3>;
constexpr auto Dh = dim<"Dh", 16>;
constexpr idx_t heads = 3, width = 16;

constexpr auto q = input<"q">(H, NQ, Dh);
constexpr auto k = input<"k">(H, NK, Dh);
constexpr auto v = input<"v">(H, NK, Dh);
constexpr auto s = scaled_scores(q, k);

const std::vector<std::pair<idx_t, idx_t>> sizes = {{1, 1}, {7, 7}, {33, 33}, {257, 257}, {7, 257}, {257, 33}, {1000, 1000}};
const std::vector<std::string> schedules = {"default", "q_tile=7 kv_tile=48 partial_tile=16 q_unroll=3 kv_vectors=1 pv_keys=20 pv_rows=2 row_block=3",
                                            "q_tile=5 kv_tile=32 q_unroll=2 kv_vectors=2 stage_kv=1 row_block=2"};

// f(score, n_k): the weight of one kept key (n_k: the number of keys, for the bias or the divisor).
using weight_fn = std::function<double(double score, idx_t nk)>;
// keep(q, kv, len): len is the batch item's key length (N_K without key padding).
using keep_fn = std::function<bool(idx_t q, idx_t kv, idx_t len)>;

struct variant {
  std::string name;
  weight_fn weight;
  keep_fn keep;  // empty: keep all
};

// The reference output of batch item b, heads stacked along the rows: (H·N_Q, Dh).
template <class Acc>
mat<Acc> reference(const ref::qkv& in, idx_t b, idx_t len, const variant& c) {
  const idx_t nq = in.q.size(2), nk = in.k.size(2);
  mat<Acc> out(heads * nq, width);
  for (idx_t h = 0; h < heads; ++h) {
    mat<Acc> scores = ref::matmul(ref::head_of<Acc>(in.q, b, h), ref::transpose(ref::head_of<Acc>(in.k, b, h)));
    for (Acc& x : scores.a) x *= static_cast<Acc>(ref::inv_sqrt(width));
    ref::mask_pred keep;
    if (c.keep) keep = [&, len](idx_t i, idx_t j, idx_t) { return c.keep(i, j, len); };
    const std::function<Acc(Acc)> f = [&](Acc x) { return static_cast<Acc>(c.weight(static_cast<double>(x), nk)); };
    const auto r = ref::attend_unnormalised(scores, ref::head_of<Acc>(in.v, b, h), f, keep, {}, h);
    ref::place_head(out, h, r.output);
  }
  return out;
}

// Item 0 keeps about half the keys, item 1 all, item 2 none (its output is 0).
tensor<std::int32_t> lengths_for(idx_t batch, idx_t nk) { return ref::key_lengths(batch, {(nk + 1) / 2, nk, 0}); }

template <class K>
void expect_reference(const K& kern, const variant& c, const std::string& what) {
  std::mt19937 rng(13);
  for (const auto& [nq, nk] : sizes) {
    const idx_t batch = nq == 33 || nq == 257 ? 3 : 1;
    const ref::qkv in = ref::random_qkv(batch, heads, nq, nk, width, rng);
    const tensor<std::int32_t> lens = lengths_for(batch, nk);
    tensor<float> out;
    if constexpr (K::arity == 4) out = kern(in.q, in.k, in.v, lens);
    else out = kern(in.q, in.k, in.v);
    BOOST_REQUIRE(out.sizes() == (std::vector<idx_t>{batch, heads, nq, width}));
    for (idx_t b = 0; b < batch; ++b) {
      const idx_t len = K::arity == 4 ? lens.data()[b] : nk;
      const ref::comparison cmp = ref::compare(out.data() + b * heads * nq * width, heads * nq * width,
                                               reference<double>(in, b, len, c), reference<float>(in, b, len, c));
      BOOST_CHECK_MESSAGE(cmp.ok, what << " N_Q=" << nq << " N_K=" << nk << " item " << b << ": " << cmp.describe());
    }
  }
}

// Fused with every schedule (and the fused path chosen by default), then generic.
template <class E>
void expect_fused_matches(const E& e, const variant& c) {
  for (const std::string& schedule : schedules) {
    const auto fused = attn::jit(e, {.schedule = schedule});
    BOOST_TEST(fused.compiled().describe().starts_with("path=fused attention=f("), c.name << ": " << fused.compiled().describe());
    expect_reference(fused, c, c.name + " fused [" + schedule + "]");
  }
  expect_reference(attn::jit(e, {.path = attn::lowering::generic}), c, c.name + " generic");
}

double sigmoid_weight(double x, idx_t nk) { return ref::sigmoid(x - std::log(static_cast<double>(nk))); }
double relu_weight(double x, idx_t nk) { return ref::relu(x) / static_cast<double>(nk); }
bool causal_keep(idx_t i, idx_t j, idx_t) { return j <= i; }

}  // namespace

BOOST_AUTO_TEST_CASE(sigmoid_attention) {
  expect_fused_matches(variants::sigmoid_attention(s, v), {"sigmoid", sigmoid_weight, {}});
  expect_fused_matches(variants::sigmoid_attention(causal(s), v), {"sigmoid causal", sigmoid_weight, causal_keep});
}

BOOST_AUTO_TEST_CASE(relu_attention) {
  expect_fused_matches(variants::relu_attention(s, v), {"ReLU", relu_weight, {}});
  expect_fused_matches(variants::relu_attention(causal(s), v), {"ReLU causal", relu_weight, causal_keep});
}

BOOST_AUTO_TEST_CASE(key_padding_including_an_empty_sequence) {
  // Batch item 2 (of 3) has length 0: no kept key, output 0.
  const keep_fn padded = [](idx_t, idx_t j, idx_t len) { return j < len; };
  expect_fused_matches(variants::sigmoid_attention(key_padding(s, lengths<"len">), v), {"sigmoid key padding", sigmoid_weight, padded});
  expect_fused_matches(variants::relu_attention(key_padding(causal(s), lengths<"len">), v),
                       {"ReLU causal key padding", relu_weight, [](idx_t i, idx_t j, idx_t len) { return j <= i && j < len; }});
}

BOOST_AUTO_TEST_CASE(any_elementwise_function_of_the_scores) {
  // Written inline, not through a library function: a bias of -2, sigmoid, then scaled by 0.5;
  // and a squared ReLU with a sliding window (its masks sit under a product of two score paths:
  // evaluated per score as -inf, relu(-inf) = 0).
  expect_fused_matches(combine(sigmoid(causal(s) - 2.0f) * 0.5f, v),
                       {"0.5 sigmoid(s - 2)", [](double x, idx_t) { return 0.5 * ref::sigmoid(x - 2.0); }, causal_keep});
  const auto window = sliding_window(s, 40);
  expect_fused_matches(combine(relu(window) * relu(window), v),
                       {"relu(s)^2 window 40", [](double x, idx_t) { return ref::relu(x) * ref::relu(x); },
                        [](idx_t i, idx_t j, idx_t) { return j <= i && i - j < 40; }});
}

BOOST_AUTO_TEST_CASE(masked_keys_and_values_have_no_influence) {
  // Keys and values past len hold NaN and inf; minus_infinity from a modifier weighs 0 too.
  std::mt19937 rng(4);
  const idx_t n = 70;
  const tensor<float> tq = ref::random_tensor({1, heads, n, width}, rng), clean_k = ref::random_tensor({1, heads, n, width}, rng),
                      clean_v = ref::random_tensor({1, heads, n, width}, rng);
  tensor<float> dirty_k = clean_k, dirty_v = clean_v;
  for (idx_t j = 30; j < n; ++j) {
    ref::set_token(dirty_k, j, j % 2 ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity());
    ref::set_token(dirty_v, j, j % 3 ? std::numeric_limits<float>::quiet_NaN() : -std::numeric_limits<float>::infinity());
  }
  tensor<std::int32_t> len({1});
  len.data()[0] = 30;
  const auto e = variants::sigmoid_attention(key_padding(s, lengths<"len">), v);
  for (auto path : {attn::lowering::automatic, attn::lowering::generic}) {
    const auto kern = attn::jit(e, {.path = path});
    const tensor<float> want = kern(tq, clean_k, clean_v, len), got = kern(tq, dirty_k, dirty_v, len);
    BOOST_TEST(ref::all_finite(got));
    BOOST_TEST(ref::max_abs_difference(got.data(), want.data(), static_cast<idx_t>(want.values().size())) == 0.0);
  }
  // A -inf score written by a modifier weighs 0 under sigmoid and ReLU, on both paths.
  const auto minus_inf_at_3 = modify(s, select(kv_idx == 3, minus_infinity, score));
  const auto masked_3 = mask(s, kv_idx != 3);
  for (auto path : {attn::lowering::automatic, attn::lowering::generic}) {
    const tensor<float> a = attn::jit(combine(sigmoid(minus_inf_at_3), v), {.path = path})(tq, clean_k, clean_v);
    const tensor<float> b = attn::jit(combine(sigmoid(masked_3), v), {.path = path})(tq, clean_k, clean_v);
    BOOST_TEST(ref::max_abs_difference(a.data(), b.data(), static_cast<idx_t>(a.values().size())) <= 1e-6);
    const tensor<float> c = attn::jit(combine(relu(minus_inf_at_3), v), {.path = path})(tq, clean_k, clean_v);
    const tensor<float> d = attn::jit(combine(relu(masked_3), v), {.path = path})(tq, clean_k, clean_v);
    BOOST_TEST(ref::max_abs_difference(c.data(), d.data(), static_cast<idx_t>(c.values().size())) <= 1e-6);
  }
}

BOOST_AUTO_TEST_CASE(no_softmax_means_no_weights_and_no_lse) {
  const auto e = variants::sigmoid_attention(causal(s), v);
  BOOST_CHECK_THROW(attn::jit(e, {.with_lse = true}), attn::argument_error);
  BOOST_CHECK_THROW(attn::jit(e, {.with_weights = true}), attn::argument_error);
}

BOOST_AUTO_TEST_CASE(expressions_print_and_are_costed) {
  BOOST_TEST(to_string(combine(relu(s), v)) == "relu(q·kᵀ/√Dh)·v");
  BOOST_TEST(to_string(combine(sigmoid(s), v)) == "sigmoid(q·kᵀ/√Dh)·v");
  // Q·Kᵀ, the scale, the weights' function (and the bias's log, neg, add), the combine.
  BOOST_TEST(cost(variants::relu_attention(s, v)).steps.size() == 5u);
}

BOOST_AUTO_TEST_CASE(readme_example) {
  // [snippet: normalisations]
  constexpr auto sigmoid_attn = combine(sigmoid(causal(s) - log(NK)), v);  // σ(s_ij - log N_K)·V, no softmax
  constexpr auto relu_attn = combine(relu(causal(s)) / NK, v);             // relu(s_ij) / N_K ·V
  // the same as variants::sigmoid_attention(causal(s), v) and variants::relu_attention(causal(s), v)
  auto kernel = attn::jit(sigmoid_attn);  // fused: path=fused attention=f(mask(score))·V
  // [end snippet]
  BOOST_TEST(kernel.compiled().describe().starts_with("path=fused attention=f(mask(score))·V"), kernel.compiled().describe());
  std::mt19937 rng(21);
  const tensor<float> tq = ref::random_tensor({heads, 45, width}, rng, 2.0f), tk = ref::random_tensor({heads, 45, width}, rng, 2.0f),
                      tv = ref::random_tensor({heads, 45, width}, rng);
  const auto same = [&](const auto& a, const auto& b) {
    const tensor<float> x = attn::jit(a)(tq, tk, tv), y = attn::jit(b)(tq, tk, tv);
    return ref::max_abs_difference(x.data(), y.data(), static_cast<idx_t>(x.values().size()));
  };
  BOOST_TEST(same(sigmoid_attn, variants::sigmoid_attention(causal(s), v)) <= 1e-6);
  BOOST_TEST(same(relu_attn, variants::relu_attention(causal(s), v)) <= 1e-6);
}
