#pragma once
// Multi-head attention tensors laid out (B, H, N, D), row-major, as the fused-kernel tests use
// them: random queries, keys and values; key lengths per batch item; one head of one batch item as
// a reference matrix, and the reference's per-head results stacked back along the rows.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include "reference.hpp"

namespace attn::ref {

struct qkv {
  tensor<float> q, k, v;
};

// Queries (B, H, N_Q, D) and keys (B, H, N_K, D) uniform in [-2, 2] (scores of a few units: the
// softmax neither flat nor one-hot); values (B, H, N_K, D) in [-1, 1]. Drawn in that order.
inline qkv random_qkv(index batch, index heads, index nq, index nk, index width, std::mt19937& rng) {
  qkv t;
  t.q = random_tensor({batch, heads, nq, width}, rng, 2.0f);
  t.k = random_tensor({batch, heads, nk, width}, rng, 2.0f);
  t.v = random_tensor({batch, heads, nk, width}, rng);
  return t;
}

// Key lengths (B): item b keeps cycle[b % cycle.size()] keys.
inline tensor<std::int32_t> key_lengths(index batch, const std::vector<index>& cycle) {
  tensor<std::int32_t> l({batch});
  for (index b = 0; b < batch; ++b) l.data()[b] = static_cast<std::int32_t>(cycle[static_cast<std::size_t>(b) % cycle.size()]);
  return l;
}

// Sets token j (every head, every feature) of a (1, H, N, D) tensor to x: a poisoned key or value.
inline void set_token(tensor<float>& t, index j, float x) {
  const index heads = t.size(1), n = t.size(2), d = t.size(3);
  for (index h = 0; h < heads; ++h)
    for (index f = 0; f < d; ++f) t.data()[(h * n + j) * d + f] = x;
}

// Head h of batch item b of a (B, H, N, D) tensor, as a matrix (N, D).
template <class Acc>
mat<Acc> head_of(const tensor<float>& t, index b, index h) {
  const index heads = t.size(1), n = t.size(2), d = t.size(3);
  mat<Acc> m(n, d);
  const float* p = t.data() + ((b * heads + h) * n) * d;
  for (index i = 0; i < n * d; ++i) m.a[static_cast<std::size_t>(i)] = static_cast<Acc>(p[i]);
  return m;
}

// Writes head h's result into `stacked`, which holds every head's, head after head (heads stacked
// along the rows: the layout of one batch item of a (B, H, N, D) output).
template <class Acc>
void place_head(mat<Acc>& stacked, index h, const mat<Acc>& one) {
  const std::size_t at = static_cast<std::size_t>(h * one.size());
  if (at + one.a.size() > stacked.a.size()) throw std::invalid_argument("ref::place_head: head outside the stacked matrix");
  std::copy(one.a.begin(), one.a.end(), stacked.a.begin() + static_cast<std::ptrdiff_t>(at));
}

}  // namespace attn::ref
