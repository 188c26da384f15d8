// The log-sum-exp output (jit_options::with_lse): each softmax row's log Σ exp(score) over its kept
// keys, -inf for a row without one, from the fused kernel (the online softmax's running max and
// sum) and from the generic one (the softmax's own max and sum), against the double reference
// (ref::log_sum_exp_rows) on sizes that are not multiples of any tile, with and without masks,
// several heads, batches; both paths agree; asking for it without exactly one softmax is an error.
//
// Tolerance: ref::compare (tests/support/reference.hpp): kernel error ≤ 2 · naive float error + 1e-6 floor
// (relative to the largest |lse|).
#define BOOST_TEST_MODULE lse
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
using ref::index;
using ref::mat;

constexpr auto NQ = dim<"NQ">;
constexpr auto NK = dim<"NK">;
constexpr auto H = head_dim<"H", 2>;
constexpr auto Dh = dim<"Dh", 16>;
constexpr index heads = 2, width = 16;

constexpr auto q = input<"q">(H, NQ, Dh);
constexpr auto k = input<"k">(H, NK, Dh);
constexpr auto v = input<"v">(H, NK, Dh);
constexpr auto s = scaled_scores(q, k);

template <class S>
constexpr auto attention(const S& scores) { return combine(softmax(scores), v); }

const std::vector<std::pair<index, index>> sizes = {{1, 1}, {7, 7}, {33, 33}, {257, 257}, {7, 257}, {257, 33}, {33, 1}};
const std::vector<std::string> schedules = {"default", "q_tile=7 kv_tile=48 partial_tile=16 q_unroll=3 kv_vectors=1 pv_keys=20 pv_rows=2 row_block=3",
                                            "q_tile=5 kv_tile=32 q_unroll=2 kv_vectors=2 stage_kv=1 row_block=2"};

// keep(q, kv, len): len is the batch item's key length.
using keep_fn = std::function<bool(index q, index kv, index len)>;

// The reference of batch item b, heads stacked along the rows: output (H·N_Q, Dh), lse (H·N_Q, 1).
template <class Acc>
ref::result<Acc> reference(const ref::qkv& in, index b, index len, const keep_fn& keep) {
  const index nq = in.q.size(2);
  ref::result<Acc> out{mat<Acc>(heads * nq, width), {}, mat<Acc>(heads * nq, 1)};
  for (index h = 0; h < heads; ++h) {
    ref::mask_pred pred;
    if (keep) pred = [&, len](index i, index j, index) { return keep(i, j, len); };
    const auto r = ref::scaled_dot_product(ref::head_of<Acc>(in.q, b, h), ref::head_of<Acc>(in.k, b, h),
                                           ref::head_of<Acc>(in.v, b, h), ref::inv_sqrt(width), pred, {}, h);
    ref::place_head(out.output, h, r.output);
    ref::place_head(out.lse, h, r.lse);
  }
  return out;
}

// Item 0 keeps about half the keys, item 1 all, item 2 none (every row fully masked).
tensor<std::int32_t> lengths_for(index batch, index nk) { return ref::key_lengths(batch, {(nk + 1) / 2, nk, 0}); }

// Runs `kern` (compiled with_lse) on random inputs of every size; checks output and lse against
// the reference, and returns every lse it computed (to compare paths).
template <class K>
std::vector<tensor<float>> expect_reference(const K& kern, const keep_fn& keep, const std::string& what) {
  std::mt19937 rng(11);
  std::vector<tensor<float>> all;
  for (const auto& [nq, nk] : sizes) {
    const index batch = nq == 33 || nq == 257 ? 3 : 1;
    const ref::qkv in = ref::random_qkv(batch, heads, nq, nk, width, rng);
    const tensor<std::int32_t> lens = lengths_for(batch, nk);
    attn::outputs out;
    if constexpr (K::arity == 4) out = kern.run(in.q, in.k, in.v, lens);
    else out = kern.run(in.q, in.k, in.v);
    BOOST_REQUIRE(out.lse.sizes() == (std::vector<index>{batch, heads, nq}));
    for (index b = 0; b < batch; ++b) {
      const index len = K::arity == 4 ? lens.data()[b] : nk;
      const auto want = reference<double>(in, b, len, keep);
      const auto naive = reference<float>(in, b, len, keep);
      const std::string at = what + " N_Q=" + std::to_string(nq) + " N_K=" + std::to_string(nk) + " item " + std::to_string(b);
      const ref::comparison lse = ref::compare(out.lse.data() + b * heads * nq, heads * nq, want.lse, naive.lse);
      BOOST_CHECK_MESSAGE(lse.ok, at << " lse: " << lse.describe());
      BOOST_TEST_MESSAGE(at << " lse: " << lse.describe());
      const ref::comparison y = ref::compare(out.output.data() + b * heads * nq * width, heads * nq * width, want.output, naive.output);
      BOOST_CHECK_MESSAGE(y.ok, at << " output: " << y.describe());
    }
    all.push_back(out.lse);
  }
  return all;
}

// Fused (every schedule) and generic: each against the reference, and the two paths against each other.
template <class E>
void expect_lse(const E& e, const keep_fn& keep, const std::string& name) {
  const auto generic = attn::jit(e, {.with_lse = true, .path = attn::lowering::generic});
  BOOST_TEST(generic.compiled().describe() == "path=generic");
  const std::vector<tensor<float>> g = expect_reference(generic, keep, name + " generic");
  for (const std::string& schedule : schedules) {
    const auto fused = attn::jit(e, {.with_lse = true, .schedule = schedule});
    BOOST_TEST(fused.compiled().describe().starts_with("path=fused"), name << ": " << fused.compiled().describe());
    const std::vector<tensor<float>> f = expect_reference(fused, keep, name + " fused [" + schedule + "]");
    for (std::size_t i = 0; i < f.size(); ++i) {
      // Same -inf rows; elsewhere both are within float rounding of each other (|lse| is O(10)).
      for (std::size_t j = 0; j < f[i].values().size(); ++j) {
        const float a = f[i].values()[j], b = g[i].values()[j];
        BOOST_CHECK_MESSAGE(a == b || std::abs(a - b) <= 2e-5f * std::max(1.0f, std::abs(b)),
                            name << " [" << schedule << "] size " << i << " row " << j << ": fused " << a << ", generic " << b);
      }
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(no_mask) { expect_lse(attention(s), {}, "full"); }

BOOST_AUTO_TEST_CASE(causal_mask) {
  expect_lse(attention(causal(s)), [](ref::index i, ref::index j, ref::index) { return j <= i; }, "causal");
}

BOOST_AUTO_TEST_CASE(key_padding_with_fully_masked_rows) {
  // Batch item 2 (of 3) has length 0: every row of it has no kept key, lse -inf, output 0.
  expect_lse(attention(key_padding(s, lengths<"len">)), [](ref::index, ref::index j, ref::index len) { return j < len; }, "key padding");
}

BOOST_AUTO_TEST_CASE(rows_without_a_kept_key_are_minus_infinity) {
  // Rows q >= N - 9 see no key (kv > q + 9 never holds); the others some. Both paths.
  std::mt19937 rng(3);
  const ref::index n = 40;
  const ref::qkv in = ref::random_qkv(1, heads, n, n, width, rng);
  const auto e = attention(mask(s, kv_idx > q_idx + 9));
  for (auto path : {attn::lowering::automatic, attn::lowering::generic}) {
    const attn::outputs out = attn::jit(e, {.with_lse = true, .path = path}).run(in.q, in.k, in.v);
    for (ref::index h = 0; h < heads; ++h)
      for (ref::index i = 0; i < n; ++i) {
        const float x = out.lse.data()[h * n + i];
        if (i >= n - 10) BOOST_TEST((std::isinf(x) && x < 0), "row " << i << ": " << x);
        else BOOST_TEST(std::isfinite(x), "row " << i << ": " << x);
      }
  }
}

BOOST_AUTO_TEST_CASE(lse_does_not_change_the_output) {
  std::mt19937 rng(5);
  const ref::qkv in = ref::random_qkv(2, heads, 100, 77, width, rng);
  const auto e = attention(causal(s));
  for (auto path : {attn::lowering::automatic, attn::lowering::generic}) {
    const tensor<float> plain = attn::jit(e, {.path = path})(in.q, in.k, in.v);
    const attn::outputs with = attn::jit(e, {.with_lse = true, .path = path}).run(in.q, in.k, in.v);
    BOOST_TEST(ref::max_abs_difference(plain.data(), with.output.data(), static_cast<ref::index>(plain.values().size())) == 0.0);
  }
  // With the weights too (generic): output, weights and lse in one call.
  const attn::outputs all = attn::jit(e, {.with_weights = true, .with_lse = true}).run(in.q, in.k, in.v);
  const attn::outputs lse = attn::jit(e, {.with_lse = true, .path = attn::lowering::generic}).run(in.q, in.k, in.v);
  BOOST_TEST(all.weights.sizes() == (std::vector<ref::index>{2, heads, 100, 77}));
  BOOST_TEST(ref::max_abs_difference(all.lse.data(), lse.lse.data(), static_cast<ref::index>(lse.lse.values().size())) == 0.0);
}

BOOST_AUTO_TEST_CASE(multi_head_with_projections) {
  // Heads split from projections, concatenated, W_O after: lse is (H, T) for an unbatched x.
  constexpr auto T = dim<"T">;
  constexpr auto D = dim<"D", 32>;
  constexpr auto H4 = head_dim<"H", 4>;
  const auto y = variants::multi_head_self_attention(input<"x">(T, D), weight<"wq">(D, D), weight<"wk">(D, D),
                                                     weight<"wv">(D, D), weight<"wo">(D, D), H4);
  for (auto path : {attn::lowering::automatic, attn::lowering::generic})
    for (ref::index t : {1, 33, 257}) {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::vector<tensor<float>> in{ref::random_tensor({t, 32}, rng)};
      for (int i = 0; i < 4; ++i) in.push_back(ref::random_tensor({32, 32}, rng, 0.6f));
      const attn::outputs out = attn::jit(y, {.with_lse = true, .path = path}).run(in[0], in[1], in[2], in[3], in[4]);
      BOOST_REQUIRE(out.lse.sizes() == (std::vector<ref::index>{4, t}));
      auto want = [&](auto zero) {
        using Acc = decltype(zero);
        std::vector<mat<Acc>> m;
        for (const tensor<float>& x : in) m.push_back(ref::item<Acc>(x, 0, x.rank()));
        return ref::multi_head_self_attention(m[0], m[1], m[2], m[3], m[4], 4);
      };
      const auto d = want(0.0);
      const auto f = want(0.0f);
      const ref::comparison c = ref::compare(out.lse.data(), 4 * t, d.lse, f.lse);
      BOOST_CHECK_MESSAGE(c.ok, "MHA T=" << t << (path == attn::lowering::generic ? " generic" : " fused") << ": " << c.describe());
    }
}

BOOST_AUTO_TEST_CASE(into_with_lse_writes_the_callers_memory) {
  std::mt19937 rng(7);
  const tensor<float> tq = ref::random_tensor({heads, 9, width}, rng), tk = ref::random_tensor({heads, 9, width}, rng),
                      tv = ref::random_tensor({heads, 9, width}, rng);
  const auto kern = attn::jit(attention(causal(s)), {.with_lse = true});
  const attn::outputs want = kern.run(tq, tk, tv);
  BOOST_REQUIRE(want.lse.sizes() == (std::vector<ref::index>{heads, 9}));
  tensor<float> out({heads, 9, width}), lse({heads, 9});
  kern.into_with_lse(out, lse, tq, tk, tv);
  BOOST_TEST(ref::max_abs_difference(lse.data(), want.lse.data(), static_cast<ref::index>(lse.values().size())) == 0.0);
  BOOST_TEST(ref::max_abs_difference(out.data(), want.output.data(), static_cast<ref::index>(out.values().size())) == 0.0);
  // A kernel with the lse cannot drop it silently, nor one without it invent it.
  BOOST_CHECK_THROW(kern.into(out, tq, tk, tv), attn::argument_error);
  BOOST_CHECK_THROW(attn::jit(attention(causal(s))).into_with_lse(out, lse, tq, tk, tv), attn::argument_error);
  tensor<float> wrong({heads, 8});
  BOOST_CHECK_THROW(kern.into_with_lse(out, wrong, tq, tk, tv), attn::shape_error);
}

BOOST_AUTO_TEST_CASE(lse_needs_exactly_one_softmax) {
  // No softmax: a typed error at jit time, naming the option.
  try {
    attn::jit(combine(s, v), {.with_lse = true});
    BOOST_ERROR("no softmax: expected attn::argument_error");
  } catch (const attn::argument_error& e) {
    BOOST_TEST(std::string(e.what()).find("with_lse") != std::string::npos, e.what());
  }
  // Two softmaxes: which one's would be ambiguous.
  BOOST_CHECK_THROW(attn::jit(attention(s) + attention(causal(s)), {.with_lse = true}), attn::argument_error);
}

BOOST_AUTO_TEST_CASE(readme_example) {
  std::mt19937 rng(8);
  const tensor<float> Q = ref::random_tensor({heads, 5, width}, rng), K = ref::random_tensor({heads, 5, width}, rng),
                      V = ref::random_tensor({heads, 5, width}, rng);
  // [snippet: lse]
  auto kernel = attn::jit(combine(softmax(causal(s)), v), {.with_lse = true});   // fused, as without it
  const attn::outputs out = kernel.run(Q, K, V);  // out.output: (H, N_Q, Dh); out.lse: (H, N_Q), one value per row:
  // log Σ_j exp(s_ij) over the row's kept keys, -inf for a row without one
  // [end snippet]
  BOOST_TEST(kernel.compiled().describe().starts_with("path=fused"));
  BOOST_REQUIRE(out.lse.sizes() == (std::vector<ref::index>{heads, 5}));
  const auto want = [&](auto zero) {  // heads stacked along the rows, as out.lse is laid out
    using Acc = decltype(zero);
    mat<Acc> lse(heads * 5, 1);
    for (ref::index h = 0; h < heads; ++h) {
      const auto one = [&](const tensor<float>& t) {
        mat<Acc> m(5, width);
        for (ref::index i = 0; i < 5 * width; ++i) m.a[static_cast<std::size_t>(i)] = static_cast<Acc>(t.data()[h * 5 * width + i]);
        return m;
      };
      const auto r = ref::scaled_dot_product(one(Q), one(K), one(V), ref::inv_sqrt(width), ref::causal_keep, {}, h);
      for (ref::index i = 0; i < 5; ++i) lse(h * 5 + i, 0) = r.lse(i, 0);
    }
    return lse;
  };
  const ref::comparison c = ref::compare(out.lse.data(), heads * 5, want(0.0), want(0.0f));
  BOOST_TEST(c.ok, c.describe());
}
