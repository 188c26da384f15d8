// The expression language (dsl/): shape algebra, the seeds' variants, masks and score
// modifiers, the cost model against hand counts (the seeds' worked example included), the
// printer and the IR. Halide-free: this file includes dsl/dsl.hpp only.
#define BOOST_TEST_MODULE dsl
#include <boost/test/unit_test.hpp>

#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "dsl/dsl.hpp"

using namespace attn::dsl;
namespace v = attn::dsl::variants;

namespace {

// ---- dims ---------------------------------------------------------------------------------

constexpr auto T = dim<"T">;          // sequence length, bound at run time
constexpr auto D = dim<"D", 512>;     // model width
constexpr auto Dk = dim<"Dk", 64>;    // key / query width
constexpr auto H = head_dim<"H", 8>;  // heads
constexpr auto NQ = dim<"NQ">;        // number of queries
constexpr auto NX = dim<"NX">;        // number of inputs (keys)
constexpr auto DQ = dim<"DQ", 32>;    // query width
constexpr auto DX = dim<"DX", 48>;    // input width
constexpr auto Dv = dim<"Dv", 16>;    // value width
constexpr auto A = dim<"A", 16>;      // additive-attention hidden width
constexpr auto Td = dim<"Td">;        // decoder length
constexpr auto Te = dim<"Te">;        // encoder length
constexpr auto Ds = dim<"Ds", 24>;    // decoder state width
constexpr auto Dh = dim<"Dh", 40>;    // encoder state width

using D_t = std::remove_cvref_t<decltype(D)>;
using H_t = std::remove_cvref_t<decltype(H)>;
using DperH = quotient_dim<D_t, H_t>;  // D/H, made by split_heads
constexpr unit_dim one{};              // a size-1 axis, made by unsqueeze

// ---- tensors ------------------------------------------------------------------------------

constexpr auto x = input<"x">(T, D);
constexpr auto wq = weight<"wq">(D, Dk);
constexpr auto wk = weight<"wk">(D, Dk);
constexpr auto wv = weight<"wv">(D, Dk);

// Multi-head: W_Q, W_K, W_V, W_O all D × D (the seeds' Step 1).
constexpr auto mq = weight<"wq">(D, D);
constexpr auto mk = weight<"wk">(D, D);
constexpr auto mv = weight<"wv">(D, D);
constexpr auto mo = weight<"wo">(D, D);

constexpr auto mha = v::multi_head_self_attention(x, mq, mk, mv, mo, H);
constexpr auto self = v::self_attention(x, wq, wk, wv);
constexpr auto causal_self = v::causal_self_attention(x, wq, wk, wv);

// Scores (T, T) of one head, for masks and modifiers.
constexpr auto scores = scaled_scores(project(x, wq), project(x, wk));

// ---- helpers ------------------------------------------------------------------------------

std::vector<std::string> labels(const cost_values& c) {
  std::vector<std::string> r;
  for (const auto& s : c.steps) r.emplace_back(s.label);
  return r;
}

bool contains(const std::string& hay, std::string_view needle) { return hay.find(needle) != std::string::npos; }

std::vector<std::string> terminal_names(const attn::ir::graph& g) {
  std::vector<std::string> r;
  for (int t : g.terminals) r.emplace_back(g.at(t).name);
  return r;
}

}  // namespace

// =============================================================================================
BOOST_AUTO_TEST_SUITE(shapes)

BOOST_AUTO_TEST_CASE(dims) {
  static_assert(D_t::size == 512 && D_t::is_static);
  static_assert(!std::remove_cvref_t<decltype(T)>::is_static);
  static_assert(std::remove_cvref_t<decltype(Dk)>::label.view() == "Dk (64)");
  static_assert(std::remove_cvref_t<decltype(T)>::label.view() == "T (run time)");
  static_assert(DperH::size == 64 && DperH::name == "D/H" && DperH::role == dim_role::quotient);
  static_assert(H_t::role == dim_role::heads);
  static_assert(D == D && D != Dk && Dk != dim<"Dk", 32>);
  constexpr dim_binding b = (T = 5);
  static_assert(b.name == "T" && b.size == 5);
  BOOST_TEST(to_fixed_string<512>().view() == "512");
  BOOST_TEST(to_fixed_string<-7>().view() == "-7");
}

BOOST_AUTO_TEST_CASE(products_and_transpose) {
  static_assert(shape_of(x) == shape(T, D));
  static_assert(shape_of(project(x, wq)) == shape(T, Dk));
  static_assert(shape_of(transpose(x)) == shape(D, T));
  static_assert(shape_of(transpose(project(x, wk))) == shape(Dk, T));
  static_assert(shape_of(matmul(project(x, wq), transpose(project(x, wk)))) == shape(T, T));
  static_assert(shape_of(combine(softmax(scores), project(x, wv))) == shape(T, Dk));
  // A vector on the right drops the contracted axis: (T, D)·(D) -> (T).
  constexpr auto u = weight<"u">(D);
  static_assert(shape_of(matmul(x, u)) == shape(T));
  // A vector on the left: (D)·(D, Dk) -> (Dk).
  constexpr auto q = input<"q">(D);
  static_assert(shape_of(matmul(q, wq)) == shape(Dk));
  static_assert(shape_of(matmul(q, u)) == shape());
  // Leading (batch-like) dims broadcast: (H, T, D/H)·(H, D/H, T) -> (H, T, T).
  constexpr auto qh = split_heads(project(x, mq), H);
  static_assert(shape_of(matmul(qh, transpose(qh))) == shape(H, T, T));
  static_assert(rank_of<decltype(x)> == 2);
}

BOOST_AUTO_TEST_CASE(elementwise_broadcasting) {
  constexpr auto h = input<"h">(T, A);
  constexpr auto bias = weight<"b">(A);
  static_assert(shape_of(h + bias) == shape(T, A));
  static_assert(shape_of(bias + h) == shape(T, A));
  static_assert(shape_of(h * 2.0f) == shape(T, A));
  static_assert(shape_of(1 - h) == shape(T, A));
  static_assert(shape_of(scale(h, rsqrt(A))) == shape(T, A));
  static_assert(shape_of(tanh(h) + exp(-h)) == shape(T, A));
  static_assert(shape_of(select(h > 0, h, 0.0f)) == shape(T, A));
  static_assert(shape_of(max(h, bias)) == shape(T, A));

  // Pairwise (additive-attention) broadcast: (Nq, 1, A) + (1, Nk, A) -> (Nq, Nk, A).
  constexpr auto qa = input<"qa">(NQ, A);
  constexpr auto ka = input<"ka">(NX, A);
  static_assert(shape_of(unsqueeze<1>(qa)) == shape(NQ, one, A));
  static_assert(shape_of(unsqueeze<0>(ka)) == shape(one, NX, A));
  static_assert(shape_of(unsqueeze<2>(qa)) == shape(NQ, A, one));
  static_assert(shape_of(unsqueeze<1>(qa) + unsqueeze<0>(ka)) == shape(NQ, NX, A));
  static_assert(shape_of(unsqueeze<1>(qa) + unsqueeze<0>(ka) + bias) == shape(NQ, NX, A));
}

BOOST_AUTO_TEST_CASE(heads) {
  static_assert(shape_of(split_heads(x, H)) == shape(H, T, DperH{}));
  static_assert(shape_of(split_heads(project(x, mq), H)) == shape(H, T, DperH{}));
  // concat_heads undoes split_heads: back to (T, D), with D itself (not a new "H*D/H" dim).
  static_assert(shape_of(concat_heads(split_heads(x, H))) == shape(T, D));
  // Heads of a width that is not a quotient concatenate to H·width.
  constexpr auto per_head = input<"ph">(H, T, Dk);
  using HDk = std::remove_cvref_t<decltype(hana::at_c<1>(shape_of(concat_heads(per_head))))>;
  static_assert(HDk::size == 8 * 64 && HDk::name == "H*Dk");
  // Grouped-query attention: queries split into H heads of a named width, keys into G groups of
  // the same width, the groups repeated for the H query heads.
  constexpr auto G = head_dim<"G", 2>;
  constexpr auto kv = input<"kv">(T, dim<"GDk", 2 * 64>);
  static_assert(shape_of(split_heads(kv, G, Dk)) == shape(G, T, Dk));
  static_assert(shape_of(repeat_heads(split_heads(kv, G, Dk), H)) == shape(H, T, Dk));
  static_assert(shape_of(scaled_scores(per_head, repeat_heads(split_heads(kv, G, Dk), H))) == shape(H, T, T));
  BOOST_TEST(to_string(repeat_heads(split_heads(kv, G, Dk), H)) == "repeat_heads(split_heads(kv, G), H)");
}

BOOST_AUTO_TEST_CASE(variants_of_the_seeds) {
  // Simplified layer (no projections): y = softmax(q·Xᵀ/√D)·X, q a vector (D) or a matrix (NQ, D).
  constexpr auto X = input<"X">(NX, D);
  constexpr auto qv = input<"q">(D);
  constexpr auto qm = input<"Q">(NQ, D);
  static_assert(shape_of(scaled_scores(qv, X)) == shape(NX));
  static_assert(shape_of(v::simplified(qv, X)) == shape(D));
  static_assert(shape_of(scaled_scores(qm, X)) == shape(NQ, NX));
  static_assert(shape_of(v::simplified(qm, X)) == shape(NQ, D));

  // Standard: Q (NQ, DQ), X (NX, DX), W_Q (DQ, Dk), W_K (DX, Dk), W_V (DX, Dv) -> (NQ, Dv).
  constexpr auto Q = input<"Q">(NQ, DQ);
  constexpr auto Xs = input<"X">(NX, DX);
  constexpr auto sq = weight<"wq">(DQ, Dk);
  constexpr auto sk = weight<"wk">(DX, Dk);
  constexpr auto sv = weight<"wv">(DX, Dv);
  static_assert(shape_of(v::standard(Q, Xs, sq, sk, sv)) == shape(NQ, Dv));

  static_assert(shape_of(self) == shape(T, Dk));
  static_assert(shape_of(causal_self) == shape(T, Dk));

  // Cross-attention: decoder (Td, D) asks, encoder (Te, D) answers.
  constexpr auto dec = input<"dec">(Td, D);
  constexpr auto enc = input<"enc">(Te, D);
  static_assert(shape_of(v::cross_attention(dec, enc, wq, wk, wv)) == shape(Td, Dk));

  // Multi-head self-attention: 512 = 8 × 64.
  static_assert(DperH::size == 64);
  static_assert(shape_of(mha) == shape(T, D));

  // Luong: s (Td, D), h (Te, D) for dot; s (Td, Ds), W (Ds, Dh), h (Te, Dh) for general.
  static_assert(shape_of(v::luong_dot(dec, enc)) == shape(Td, D));
  constexpr auto s = input<"s">(Td, Ds);
  constexpr auto h = input<"h">(Te, Dh);
  constexpr auto w = weight<"W">(Ds, Dh);
  static_assert(shape_of(v::luong_general(s, h, w)) == shape(Td, Dh));

  // Bahdanau: e_ij = vᵀ·tanh(W1·s_i + W2·h_j + b): scores (Td, Te), context (Td, Dh).
  constexpr auto w1 = weight<"W1">(Ds, A);
  constexpr auto w2 = weight<"W2">(Dh, A);
  constexpr auto b = weight<"b">(A);
  constexpr auto va = weight<"v">(A);
  static_assert(shape_of(v::bahdanau_scores(s, h, w1, w2, b, va)) == shape(Td, Te));
  static_assert(shape_of(v::bahdanau(s, h, w1, w2, b, va)) == shape(Td, Dh));

  // Inputs carry the batch; an expression of weights alone does not.
  static_assert(decltype(mha)::batched && !decltype(project(b, weight<"m">(A, A)))::batched);
}

BOOST_AUTO_TEST_CASE(masks) {
  static_assert(shape_of(causal(scores)) == shape(T, T));
  static_assert(shape_of(key_padding(scores, lengths<"len">)) == shape(T, T));
  static_assert(shape_of(sliding_window(scores, 4)) == shape(T, T));
  constexpr auto any = mask(scores, ((q_idx - kv_idx) < 8 && kv_idx >= 2) || kv_idx == 0);
  static_assert(shape_of(any) == shape(T, T));
  // A dilated (strided) pattern with %.
  static_assert(shape_of(mask(scores, (q_idx - kv_idx) % 2 == 0)) == shape(T, T));
  // A mask closes over its placeholders; the predicate alone does not.
  static_assert(!decltype(any)::free_placeholders && decltype(kv_idx <= q_idx)::free_placeholders);
  // Masks on per-head scores (H, T, T), using the head index.
  constexpr auto qh = split_heads(project(x, mq), H);
  constexpr auto hs = scaled_scores(qh, qh);
  static_assert(shape_of(hs) == shape(H, T, T));
  static_assert(shape_of(mask(hs, kv_idx <= q_idx + head)) == shape(H, T, T));
  // A lengths tensor is a batched terminal of rank 0.
  static_assert(lengths<"len">.batched && rank_of<decltype(lengths<"len">)> == 0);
}

BOOST_AUTO_TEST_CASE(score_modifiers) {
  static_assert(shape_of(relative_bias(scores, 0.5f)) == shape(T, T));
  static_assert(shape_of(softcap(scores, 30.0f)) == shape(T, T));
  constexpr auto qh = split_heads(project(x, mq), H);
  constexpr auto hs = scaled_scores(qh, qh);
  static_assert(shape_of(alibi(hs, H)) == shape(H, T, T));
  constexpr auto custom = modify(hs, score * 2 + select(q_idx == kv_idx, 1.0f, 0.0f) - head);
  static_assert(shape_of(custom) == shape(H, T, T));
  static_assert(!decltype(custom)::free_placeholders);
  // Modifiers and masks compose, then feed softmax and combine.
  constexpr auto y = combine(softmax(causal(softcap(scores, 50.0f))), project(x, wv));
  static_assert(shape_of(y) == shape(T, Dk));
}

BOOST_AUTO_TEST_SUITE_END()

// =============================================================================================
BOOST_AUTO_TEST_SUITE(cost_model)

// The seeds' worked example (seed 002, "Step-by-Step Time Complexity of Multi-Head
// Self-Attention"): n = 5, d = 512, h = 8, d_k = d/h = 64.
BOOST_AUTO_TEST_CASE(seeds_multi_head_worked_example) {
  const cost_report r = cost(mha);
  const cost_values c = r.at(T = 5);

  // Step order is the IR's (children before parents).
  const std::vector<std::string> want_labels = {"project", "project", "matmul", "scale",
                                                "softmax", "project", "combine", "project"};
  BOOST_TEST(labels(c) == want_labels, boost::test_tools::per_element());
  BOOST_REQUIRE_EQUAL(c.steps.size(), 8u);

  // Step 1: each projection n·d² = 5·512² = 1,310,720 (Q, K, V).
  for (int i : {0, 1, 5}) {
    BOOST_TEST(c.steps[i].work == 1'310'720.0);
    BOOST_TEST(c.steps[i].per_head_work == 1'310'720.0);  // not split into heads
  }
  // Step 2: Q·Kᵀ: n²·d_k = 1600 per head, n²·d = 12,800 over all heads.
  BOOST_TEST(c.steps[2].per_head_work == 1600.0);
  BOOST_TEST(c.steps[2].work == 12'800.0);
  // Scaling by 1/√d_k: one multiply per score, n² = 25 per head.
  BOOST_TEST(c.steps[3].per_head_work == 25.0);
  BOOST_TEST(c.steps[3].work == 200.0);
  // Step 3: softmax n² = 25 per head.
  BOOST_TEST(c.steps[4].per_head_work == 25.0);
  BOOST_TEST(c.steps[4].work == 200.0);
  // Step 4: α·V: n²·d_k = 1600 per head, 12,800 over all heads.
  BOOST_TEST(c.steps[6].per_head_work == 1600.0);
  BOOST_TEST(c.steps[6].work == 12'800.0);
  // Final projection by W_O: n·d² = 1,310,720.
  BOOST_TEST(c.steps[7].work == 1'310'720.0);

  // Totals: 4·n·d² + 2·n²·d + 2·h·n².
  BOOST_TEST(c.work == 4 * 1'310'720.0 + 2 * 12'800.0 + 2 * 200.0);
  BOOST_TEST(to_string(r.work()) == "4·T·D² + 2·T²·D + 2·T²·H");

  // The seeds' O(n²·d + n·d²).
  BOOST_TEST(big_o(r) == "O(T²·D + T·D²)");
}

// The cost model is constexpr: the worked example, checked by the compiler.
static_assert(cost(mha).at(T = 5).steps[0].work == 1'310'720.0);
static_assert(cost(mha).at(T = 5).steps[2].per_head_work == 1600.0);
static_assert(cost(mha).at(T = 5).steps[2].work == 12'800.0);
static_assert(cost(mha).at(T = 5).steps[4].per_head_work == 25.0);
static_assert(cost(mha).at(T = 5).steps[6].work == 12'800.0);
static_assert(cost(mha).at(T = 5).work == 5'268'880.0);
static_assert(cost(causal_self).at(T = 5).flops == 3 * 2 * 163'840.0 + 2 * 2 * 1600.0 + 25 + 2 * 25 + 5 * 25);

BOOST_AUTO_TEST_CASE(flops_and_bytes) {
  const cost_values c = cost(mha).at(T = 5);
  // FLOPs: a multiply-add is 2; softmax 5 per element; other elementwise steps 1.
  for (const auto& s : c.steps) {
    if (s.label == "project" || s.label == "matmul" || s.label == "combine") {
      BOOST_TEST(s.flops == 2 * s.work, s.label);
    } else if (s.label == "softmax") {
      BOOST_TEST(s.flops == 5 * s.work);
    } else {
      BOOST_TEST(s.label == "scale");
      BOOST_TEST(s.flops == s.work);
    }
  }
  BOOST_TEST(c.flops == 2 * (4 * 1'310'720.0 + 2 * 12'800.0) + 200 + 5 * 200);

  // Bytes (float32): a step reads its operands and writes its result.
  const double n = 5, d = 512, h = 8, dk = 64;
  BOOST_TEST(c.steps[0].bytes == 4 * (n * d + d * d + n * d));           // X, W_Q -> Q
  BOOST_TEST(c.steps[2].bytes == 4 * (h * n * dk + h * dk * n + h * n * n));  // Q, Kᵀ -> S
  BOOST_TEST(c.steps[3].bytes == 4 * (h * n * n + 1 + h * n * n));       // S, 1/√d_k -> S
  BOOST_TEST(c.steps[4].bytes == 4 * (h * n * n + h * n * n));           // S -> A
  BOOST_TEST(c.steps[6].bytes == 4 * (h * n * n + h * n * dk + h * n * dk));  // A, V -> Y
  BOOST_TEST(c.steps[7].bytes == 4 * (n * d + d * d + n * d));           // concat(Y), W_O -> out
  // The expression's total is compulsory traffic: X and four weights in, the result out.
  BOOST_TEST(c.bytes == 4 * (n * d + 4 * d * d + n * d));
  BOOST_TEST(to_string(cost(mha).bytes()) == "8·T·D + 16·D²");
}

BOOST_AUTO_TEST_CASE(causal_self_attention_hand_count) {
  const cost_report r = cost(causal_self);
  const cost_values c = r.at(T = 5);
  const std::vector<std::string> want = {"project", "project", "matmul", "scale", "mask",
                                         "softmax", "project", "combine"};
  BOOST_TEST(labels(c) == want, boost::test_tools::per_element());
  BOOST_REQUIRE_EQUAL(c.steps.size(), 8u);
  const double n = 5, d = 512, dk = 64;
  const double work[] = {n * d * dk, n * d * dk, n * n * dk, n * n, n * n, n * n, n * d * dk, n * n * dk};
  // mask: one comparison (kv_idx ≤ q_idx) and one select per score.
  const double flops[] = {2 * n * d * dk, 2 * n * d * dk, 2 * n * n * dk, n * n, 2 * n * n,
                          5 * n * n,      2 * n * d * dk, 2 * n * n * dk};
  const double bytes[] = {4 * (n * d + d * dk + n * dk), 4 * (n * d + d * dk + n * dk),
                          4 * (n * dk + dk * n + n * n), 4 * (n * n + 1 + n * n),
                          4 * (n * n + 1 + n * n),       4 * (n * n + n * n),
                          4 * (n * d + d * dk + n * dk), 4 * (n * n + n * dk + n * dk)};
  for (std::size_t i = 0; i < c.steps.size(); ++i) {
    BOOST_TEST_CONTEXT("step " << i << " " << c.steps[i].label) {
      BOOST_TEST(c.steps[i].work == work[i]);
      BOOST_TEST(c.steps[i].per_head_work == work[i]);
      BOOST_TEST(c.steps[i].flops == flops[i]);
      BOOST_TEST(c.steps[i].bytes == bytes[i]);
    }
  }
  BOOST_TEST(c.bytes == 4 * (n * d + 3 * d * dk + n * dk));
  BOOST_TEST(big_o(r) == "O(T²·Dk + T·D·Dk)");
  // Polynomials evaluate at any binding: T = 2048.
  BOOST_TEST(r.work().at(T = 2048) == 3 * 2048.0 * 512 * 64 + 2 * 2048.0 * 2048 * 64 + 3 * 2048.0 * 2048);
}

BOOST_AUTO_TEST_CASE(standard_with_two_lengths) {
  // N_Q != N_X: the score matrix is N_Q × N_X.
  constexpr auto Q = input<"Q">(NQ, DQ);
  constexpr auto Xs = input<"X">(NX, DX);
  constexpr auto sq = weight<"wq">(DQ, Dk);
  constexpr auto sk = weight<"wk">(DX, Dk);
  constexpr auto sv = weight<"wv">(DX, Dv);
  const cost_values c = cost(v::standard(Q, Xs, sq, sk, sv)).at(NQ = 3, NX = 7);
  const double nq = 3, nx = 7, dq = 32, dx = 48, dk = 64, dv = 16;
  const double want = nq * dq * dk + nx * dx * dk + nq * nx * dk + nq * nx + nq * nx + nx * dx * dv + nq * nx * dv;
  BOOST_TEST(c.work == want);
  BOOST_TEST(c.work == 34'746.0);
  BOOST_TEST(c.bytes == 4 * (nq * dq + nx * dx + dq * dk + dx * dk + dx * dv + nq * dv));
  const cost_report r = cost(v::standard(Q, Xs, sq, sk, sv));
  BOOST_TEST(to_string(r.work()) == "NQ·DQ·Dk + NX·DX·Dk + NQ·NX·Dk + 2·NQ·NX + NX·DX·Dv + NQ·NX·Dv");
  // 2·NQ·NX (scale, softmax) is dominated; the rest are incomparable, longest-sequence terms first.
  BOOST_TEST(big_o(r) == "O(NQ·NX·Dk + NQ·NX·Dv + NQ·DQ·Dk + NX·DX·Dk + NX·DX·Dv)");
  BOOST_TEST(to_string(v::standard(Q, Xs, sq, sk, sv)) == "softmax(Q·wq·(X·wk)ᵀ/√Dk)·(X·wv)");
}

BOOST_AUTO_TEST_CASE(simplified_and_bahdanau_hand_count) {
  // Simplified with a vector query: q·Xᵀ (N_X·D), scale (N_X), softmax (N_X), a·X (N_X·D).
  constexpr auto X = input<"X">(NX, D);
  constexpr auto qv = input<"q">(D);
  const cost_values s = cost(v::simplified(qv, X)).at(NX = 10);
  const std::vector<std::string> want = {"matmul", "scale", "softmax", "combine"};
  BOOST_TEST(labels(s) == want, boost::test_tools::per_element());
  BOOST_TEST(s.work == 10 * 512.0 + 10 + 10 + 10 * 512.0);
  BOOST_TEST(s.flops == 2 * 10 * 512.0 + 10 + 5 * 10 + 2 * 10 * 512.0);

  // Bahdanau: W1·s, W2·h, two adds and a tanh per (i, j, a), vᵀ·(...), softmax, combine.
  constexpr auto st = input<"s">(Td, Ds);
  constexpr auto h = input<"h">(Te, Dh);
  constexpr auto w1 = weight<"W1">(Ds, A);
  constexpr auto w2 = weight<"W2">(Dh, A);
  constexpr auto b = weight<"b">(A);
  constexpr auto va = weight<"v">(A);
  const cost_values c = cost(v::bahdanau(st, h, w1, w2, b, va)).at(Td = 3, Te = 7);
  const double td = 3, te = 7, ds = 24, dh = 40, a = 16;
  const std::vector<std::string> want_b = {"project", "project", "add", "add", "tanh", "matmul", "softmax", "combine"};
  BOOST_TEST(labels(c) == want_b, boost::test_tools::per_element());
  BOOST_TEST(c.work == td * ds * a + te * dh * a + 3 * td * te * a + td * te * a + td * te + td * te * dh);
  // The pairwise add reads (Td, 1, A) and (1, Te, A): size-1 axes count nothing.
  BOOST_REQUIRE_EQUAL(c.steps.size(), 8u);
  BOOST_TEST(c.steps[2].bytes == 4 * (td * a + te * a + td * te * a));
  BOOST_TEST(c.bytes == 4 * (td * ds + te * dh + ds * a + dh * a + a + a + td * dh));
}

BOOST_AUTO_TEST_CASE(masks_and_modifiers_cost) {
  const double n = 6;
  // Everything inside a predicate or modifier runs once per score, fused into one step.
  const cost_values kp = cost(combine(softmax(key_padding(scores, lengths<"len">)), project(x, wv))).at(T = 6);
  BOOST_REQUIRE_EQUAL(kp.steps.size(), 8u);
  BOOST_TEST(kp.steps[4].label == "mask");
  BOOST_TEST(kp.steps[4].work == n * n);
  BOOST_TEST(kp.steps[4].flops == 2 * n * n);  // kv_idx < len, select
  // The lengths tensor (one int32 per sequence) is part of the compulsory traffic.
  BOOST_TEST(kp.bytes == 4 * (n * 512 + 3 * 512 * 64 + 1 + n * 64));

  const cost_values sw = cost(softmax(sliding_window(scores, 3))).at(T = 6);
  BOOST_TEST(sw.steps[4].label == "mask");
  BOOST_TEST(sw.steps[4].flops == 5 * n * n);  // ≤, -, <, ∧, select
  const cost_values dil = cost(softmax(mask(scores, (q_idx - kv_idx) % 2 == 0))).at(T = 6);
  BOOST_TEST(dil.steps[4].flops == 4 * n * n);  // -, mod, =, select

  // A modifier replaces each score by f(score, ...): its cost is f's operations.
  const cost_values rb = cost(softmax(relative_bias(scores, 0.5f))).at(T = 6);
  BOOST_TEST(rb.steps[4].label == "modify");
  BOOST_TEST(rb.steps[4].work == n * n);
  BOOST_TEST(rb.steps[4].flops == 3 * n * n);  // kv_idx - q_idx, 0.5·(...), score + (...)
  const cost_values sc = cost(softmax(softcap(scores, 30.0f))).at(T = 6);
  BOOST_TEST(sc.steps[4].flops == 3 * n * n);  // score/30, tanh, 30·(...)
}

BOOST_AUTO_TEST_CASE(unbound_run_time_dim_throws) {
  const cost_report r = cost(mha);
  BOOST_CHECK_THROW(r.at(), std::invalid_argument);
  BOOST_CHECK_THROW(r.at(NX = 5), std::invalid_argument);  // binds the wrong dim
  BOOST_CHECK_THROW(r.work().at(), std::invalid_argument);
  try {
    (void)r.at();
    BOOST_FAIL("expected std::invalid_argument");
  } catch (const std::invalid_argument& e) {
    BOOST_TEST(contains(e.what(), "T"));
  }
  // Static dims need no binding.
  BOOST_TEST(cost(project(weight<"m">(D, Dk), weight<"n">(Dk, Dk))).at().work == 512.0 * 64 * 64);
  BOOST_CHECK_NO_THROW(r.at(T = 1));
}

BOOST_AUTO_TEST_SUITE_END()

// =============================================================================================
BOOST_AUTO_TEST_SUITE(printer)

BOOST_AUTO_TEST_CASE(math_text) {
  BOOST_TEST(to_string(causal_self) == "softmax(mask(x·wq·(x·wk)ᵀ/√Dk | kv_idx ≤ q_idx))·(x·wv)");
  BOOST_TEST(to_string(self) == "softmax(x·wq·(x·wk)ᵀ/√Dk)·(x·wv)");
  BOOST_TEST(to_string(mha) ==
             "concat_heads(softmax(split_heads(x·wq, H)·split_heads(x·wk, H)ᵀ/√(D/H))·split_heads(x·wv, H))·wo");
  constexpr auto X = input<"X">(NX, D);
  constexpr auto q = input<"q">(D);
  BOOST_TEST(to_string(v::simplified(q, X)) == "softmax(q·Xᵀ/√D)·X");
  constexpr auto h = input<"h">(T, A);
  constexpr auto b = weight<"b">(A);
  BOOST_TEST(to_string(h + b) == "h + b");
  BOOST_TEST(to_string((h + b) * 2) == "(h + b)·2");
  BOOST_TEST(to_string(h - (b - h)) == "h - (b - h)");
  BOOST_TEST(to_string(softcap(scores, 30.0f)) == "modify(x·wq·(x·wk)ᵀ/√Dk | score ↦ 30·tanh(score/30))");
  BOOST_TEST(to_string(key_padding(scores, lengths<"len">)) == "mask(x·wq·(x·wk)ᵀ/√Dk | kv_idx < len)");
  BOOST_TEST(to_string(mask(scores, (q_idx - kv_idx) % 2 == 0)) ==
             "mask(x·wq·(x·wk)ᵀ/√Dk | (q_idx - kv_idx) mod 2 = 0)");
}

BOOST_AUTO_TEST_CASE(graphviz) {
  const std::string dot = to_dot(mha);
  BOOST_TEST(dot.rfind("digraph attn {", 0) == 0u);
  BOOST_TEST(dot.back() == '\n');
  BOOST_TEST(contains(dot, "}\n"));
  for (std::string_view name : {"x", "wq", "wk", "wv", "wo"})
    BOOST_TEST(contains(dot, "label=\"" + std::string(name) + "\\n"), name);
  BOOST_TEST(contains(dot, "label=\"x\\n(T, D)\""));
  BOOST_TEST(contains(dot, "softmax\\n(H, T, T)"));
  BOOST_TEST(contains(dot, "split_heads\\n(H, T, D/H)"));
  // One edge per argument.
  const attn::ir::graph g = to_ir(mha);
  std::size_t edges = 0, arrows = 0;
  for (const auto& n : g.nodes) edges += n.args.size();
  for (std::size_t p = dot.find("->"); p != std::string::npos; p = dot.find("->", p + 2)) ++arrows;
  BOOST_TEST(arrows == edges);
  BOOST_TEST(contains(to_dot(causal_self), "label=\"mask\\n(T, T)\""));
}

BOOST_AUTO_TEST_SUITE_END()

// =============================================================================================
BOOST_AUTO_TEST_SUITE(ir)

// to_ir is constexpr, too.
static_assert(to_ir(self).terminals.size() == 4);
static_assert(to_ir(mha).terminals.size() == 5);

BOOST_AUTO_TEST_CASE(terminals_deduplicated_in_first_appearance_order) {
  const attn::ir::graph g = to_ir(self);
  const std::vector<std::string> want = {"x", "wq", "wk", "wv"};
  BOOST_TEST(terminal_names(g) == want, boost::test_tools::per_element());
  // x is used three times (Q, K, V) but is one node, one kernel argument.
  int x_nodes = 0;
  for (const auto& n : g.nodes) x_nodes += n.kind == attn::ir::op::input && n.name == "x";
  BOOST_TEST(x_nodes == 1);
  BOOST_TEST(g.output().shape.size() == 2u);
  BOOST_CHECK(g.output().kind == attn::ir::op::matmul);
  BOOST_TEST(g.output().param == static_cast<int>(attn::ir::product_kind::combine));
  BOOST_TEST(g.output().batched);

  const std::vector<std::string> want_mha = {"x", "wq", "wk", "wv", "wo"};
  BOOST_TEST(terminal_names(to_ir(mha)) == want_mha, boost::test_tools::per_element());

  // Call order: inputs, then weights, then lengths; each kind in order of first appearance.
  constexpr auto Q = input<"Q">(NQ, DQ);
  constexpr auto Xs = input<"X">(NX, DX);
  const std::vector<std::string> want_std = {"Q", "X", "wq", "wk", "wv"};
  BOOST_TEST(terminal_names(to_ir(v::standard(Q, Xs, weight<"wq">(DQ, Dk), weight<"wk">(DX, Dk),
                                              weight<"wv">(DX, Dv)))) == want_std,
             boost::test_tools::per_element());

  // Lengths are terminals too.
  const attn::ir::graph kp = to_ir(key_padding(scores, lengths<"len">));
  const std::vector<std::string> want_kp = {"x", "wq", "wk", "len"};
  BOOST_TEST(terminal_names(kp) == want_kp, boost::test_tools::per_element());
  BOOST_CHECK(kp.at(kp.terminals.back()).kind == attn::ir::op::int_input);
}

BOOST_AUTO_TEST_CASE(shapes_and_cache_key) {
  const attn::ir::graph g = to_ir(mha);
  const auto& out = g.output().shape;
  BOOST_REQUIRE_EQUAL(out.size(), 2u);
  BOOST_TEST(out[0].name == "T");
  BOOST_TEST(out[0].size == 0);
  BOOST_TEST(out[1].name == "D");
  BOOST_TEST(out[1].size == 512);
  // The same expression built twice serializes identically; a different one does not.
  BOOST_TEST(attn::ir::serialize(to_ir(v::multi_head_self_attention(x, mq, mk, mv, mo, H))) == attn::ir::serialize(g));
  BOOST_TEST(attn::ir::serialize(to_ir(self)) != attn::ir::serialize(to_ir(causal_self)));
  // Two different tensors may not share a name.
  BOOST_CHECK_THROW(to_ir(project(input<"x">(T, Dk), weight<"w">(Dk, D)) + x), std::logic_error);
}

BOOST_AUTO_TEST_SUITE_END()

// The gradient graph is costed like an expression, counting only what its outputs need: attention's
// backward recomputes Q·Kᵀ and adds dP = dY·Vᵀ, dV, dQ and dK, five products against the forward's
// two (2.5 times the product FLOPs), and its text names the probabilities once.
BOOST_AUTO_TEST_CASE(gradient_graph_cost_and_text) {
  constexpr auto q = input<"q">(H, T, Dk);
  constexpr auto k = input<"k">(H, T, Dk);
  constexpr auto v = input<"v">(H, T, Dk);
  const attn::ir::graph f = to_ir(combine(softmax(causal(scaled_scores(q, k))), v));
  const attn::ir::graph g = attn::ir::gradient(f);
  auto product_flops = [](const cost_values& c) {
    double p = 0;
    for (const step_value& s : c.steps)
      if (s.label == "matmul" || s.label == "combine" || s.label == "weighted") p += s.flops;
    return p;
  };
  const cost_values forward = cost(f).at(T = 1024), backward = cost(g).at(T = 1024);
  BOOST_TEST(product_flops(backward) == 2.5 * product_flops(forward));
  const std::string text = to_string(g);
  BOOST_TEST(text.find("P1 = softmax(") != std::string::npos);
  BOOST_TEST(text.find("P2") == std::string::npos);
  for (const char* line : {"d_q = ", "d_k = ", "d_v = "}) BOOST_TEST(text.find(line) != std::string::npos, line);
}
