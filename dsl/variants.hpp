#pragma once
// The named variants of the seeds, each an ordinary function over DSL nodes.
// Nothing below the DSL knows about any of them.
#include "elementwise.hpp"
#include "heads.hpp"
#include "linear.hpp"
#include "masks.hpp"
#include "softmax.hpp"

namespace attn::dsl {

// The last dim of E's shape (a unit dim if E has a shape error, reported where the result is used).
namespace detail {
template <class S>
constexpr auto last_dim_of() {
  if constexpr (rank_v<S> == 0) return unit_dim{};
  else return dim_at<rank_v<S> - 1, S>{};
}
}  // namespace detail
template <class E>
using last_dim = decltype(detail::last_dim_of<typename E::shape_type>());

// S = Q·Kᵀ / √d_k: scaled dot-product scores.
template <expression Q, expression K>
constexpr auto scaled_scores(const Q& q, const K& k) { return scale(matmul(q, transpose(k)), rsqrt(last_dim<K>{})); }

// softmax(Q·Kᵀ / √d_k)·V
template <expression Q, expression K, expression V>
constexpr auto scaled_dot_product_attention(const Q& q, const K& k, const V& v) {
  return combine(softmax(scaled_scores(q, k)), v);
}

namespace variants {

// Simplified attention layer (no projections): y = softmax(q·Xᵀ/√D)·X. q is (D) or (N_Q, D).
template <expression Q, expression X>
constexpr auto simplified(const Q& q, const X& x) { return scaled_dot_product_attention(q, x, x); }

// Standard attention: queries Q (N_Q, D_Q), inputs X (N_X, D_X), Q' = Q·W_Q, K = X·W_K, V = X·W_V.
template <expression Q, expression X, expression WQ, expression WK, expression WV>
constexpr auto standard(const Q& q, const X& x, const WQ& wq, const WK& wk, const WV& wv) {
  return scaled_dot_product_attention(project(q, wq), project(x, wk), project(x, wv));
}

// Self-attention: queries, keys and values all from X.
template <expression X, expression WQ, expression WK, expression WV>
constexpr auto self_attention(const X& x, const WQ& wq, const WK& wk, const WV& wv) { return standard(x, x, wq, wk, wv); }

// Cross-attention: decoder states ask, encoder states answer.
template <expression Dec, expression Enc, expression WQ, expression WK, expression WV>
constexpr auto cross_attention(const Dec& decoder, const Enc& encoder, const WQ& wq, const WK& wk, const WV& wv) {
  return standard(decoder, encoder, wq, wk, wv);
}

// Causal (masked) self-attention: token i sees tokens 0..i.
template <expression X, expression WQ, expression WK, expression WV>
constexpr auto causal_self_attention(const X& x, const WQ& wq, const WK& wk, const WV& wv) {
  auto k = project(x, wk);
  return combine(softmax(causal(scaled_scores(project(x, wq), k))), project(x, wv));
}

// Multi-head self-attention: H heads of D/H each, concatenated and projected by W_O (D × D).
template <expression X, expression WQ, expression WK, expression WV, expression WO, class H>
constexpr auto multi_head_self_attention(const X& x, const WQ& wq, const WK& wk, const WV& wv, const WO& wo, H heads) {
  auto q = split_heads(project(x, wq), heads);
  auto k = split_heads(project(x, wk), heads);
  auto v = split_heads(project(x, wv), heads);
  return project(concat_heads(scaled_dot_product_attention(q, k, v)), wo);
}

// Grouped-query attention (Ainslie et al. 2023): H query heads of width Dh share G groups of keys
// and values, query head h reading group h / (H / G); G = 1 is multi-query attention, G = H is
// multi-head. W_Q: D × (H·Dh); W_K, W_V: D × (G·Dh); W_O: (H·Dh) × D. Dims match by name, and
// concat_heads names its width "H*Dh" (the heads' and the width's names): declare that dim,
// dim<"H*Dh", H·Dh>, for W_O's rows (and W_Q's columns); a W_O of another name is a shape error.
// `scores_of` masks or modifies the scaled scores (H, T, T) before the softmax, e.g.
// [](auto s) { return causal(s); } for causal GQA; without it, every key is kept.
template <expression X, expression WQ, expression WK, expression WV, expression WO, class H, class G, class Dh,
          class ScoresOf>
constexpr auto grouped_query_self_attention(const X& x, const WQ& wq, const WK& wk, const WV& wv, const WO& wo, H heads,
                                            G groups, Dh width, ScoresOf scores_of) {
  auto q = split_heads(project(x, wq), heads, width);
  auto k = repeat_heads(split_heads(project(x, wk), groups, width), heads);
  auto v = repeat_heads(split_heads(project(x, wv), groups, width), heads);
  return project(concat_heads(combine(softmax(scores_of(scaled_scores(q, k))), v)), wo);
}
template <expression X, expression WQ, expression WK, expression WV, expression WO, class H, class G, class Dh>
constexpr auto grouped_query_self_attention(const X& x, const WQ& wq, const WK& wk, const WV& wv, const WO& wo, H heads,
                                            G groups, Dh width) {
  return grouped_query_self_attention(x, wq, wk, wv, wo, heads, groups, width, [](auto scores) { return scores; });
}

// Luong dot-product (unscaled): e_ij = s_iᵀ·h_j; context c_i = Σ_j α_ij h_j.
template <expression S, expression Hs>
constexpr auto luong_dot(const S& s, const Hs& h) { return combine(softmax(matmul(s, transpose(h))), h); }

// Luong general: e_ij = s_iᵀ·W·h_j.
template <expression S, expression Hs, expression W>
constexpr auto luong_general(const S& s, const Hs& h, const W& w) {
  return combine(softmax(matmul(project(s, w), transpose(h))), h);
}

// Bahdanau additive: e_ij = vᵀ·tanh(W₁·s_i + W₂·h_j + b), a score that is not a dot product.
template <expression S, expression Hs, expression W1, expression W2, expression B, expression V>
constexpr auto bahdanau_scores(const S& s, const Hs& h, const W1& w1, const W2& w2, const B& b, const V& v) {
  return matmul(tanh(unsqueeze<1>(project(s, w1)) + unsqueeze<0>(project(h, w2)) + b), v);
}

template <expression S, expression Hs, expression W1, expression W2, expression B, expression V>
constexpr auto bahdanau(const S& s, const Hs& h, const W1& w1, const W2& w2, const B& b, const V& v) {
  return combine(softmax(bahdanau_scores(s, h, w1, w2, b, v)), h);
}

// Softmax-free attention: the weights are an elementwise function of each score alone, summed
// with the values unnormalised (fused like softmax attention; a key a mask removes weighs 0).
//
// Sigmoid attention (Ramapuram et al. 2024, "Theory, Analysis, and Best Practices for Sigmoid
// Self-Attention"): weights σ(s_ij + b); the paper's bias b = -log(N_K), N_K the number of keys
// (read at run time), keeps the early weights' sum near 1.
template <expression S, expression V, operand B>
constexpr auto sigmoid_attention(const S& scores, const V& values, const B& bias) {
  return combine(sigmoid(scores + bias), values);
}
template <expression S, expression V>
constexpr auto sigmoid_attention(const S& scores, const V& values) {
  return sigmoid_attention(scores, values, -log(last_dim<S>{}));
}

// ReLU attention (Wortsman et al. 2023, "Replacing softmax with ReLU in Vision Transformers"):
// weights relu(s_ij) / N_K.
template <expression S, expression V>
constexpr auto relu_attention(const S& scores, const V& values) { return combine(relu(scores) / last_dim<S>{}, values); }

}  // namespace variants
}  // namespace attn::dsl
