#pragma once
// PyTorch attention-gym's catalogue of masks and score modifiers, as library functions over the
// primitives (mask, modify, gather, placeholders). Each one is a few lines a user could write;
// tests/test_catalogue.cpp checks every one against an independent reference.
// (causal, sliding_window, key_padding: masks.hpp; alibi, softcap, relative_bias, t5_bucket: score_mod.hpp.)
#include <cmath>
#include <vector>
#include "gather.hpp"
#include "masks.hpp"
#include "score_mod.hpp"

namespace attn::dsl {

namespace gym {

// Integer quotient and remainder of an index by a positive constant (exact: integer arithmetic).
template <operand I>
constexpr auto remainder(const I& i, int n) { return i % n; }
template <operand I>
constexpr auto quotient(const I& i, int n) { return floor_div(i, n); }

// (kx, ky) lies in the kernel_w × kernel_h window around (qx, qy) on a width × height grid, the
// window shifted inward at the borders (NATTEN over tokens, STA over tiles).
template <class A, class B, class C, class D>
constexpr auto in_window_2d(const A& qx, const B& qy, const C& kx, const D& ky, int width, int height, int kernel_w,
                            int kernel_h) {
  const auto cx = min(max(qx, kernel_w / 2), (width - 1) - kernel_w / 2);
  const auto cy = min(max(qy, kernel_h / 2), (height - 1) - kernel_h / 2);
  return abs(cx - kx) <= kernel_w / 2 && abs(cy - ky) <= kernel_h / 2;
}

}  // namespace gym

// Causal, plus `globals` leading tokens every query sees and that see every key (Longformer /
// BigBird's global tokens), plus a sliding window of `window` keys.
template <operand S>
constexpr auto global_sliding_window(const S& scores, int globals, int window) {
  const auto local = kv_idx <= q_idx && q_idx - kv_idx < window;
  return mask(scores, local || kv_idx < globals || q_idx < globals);
}

// Prefix-LM: a prefix of `prefix` tokens attends bidirectionally, the rest causally. `prefix`
// is a number, or a per-sequence length (lengths<"prefix">).
template <operand S, operand P>
constexpr auto prefix_lm(const S& scores, const P& prefix) { return mask(scores, kv_idx <= q_idx || kv_idx < prefix); }

// Document masking for packed sequences: causal within a document; `doc` holds each token's
// document id (int_input<"doc">(T)).
template <operand S, class Doc>
constexpr auto document_causal(const S& scores, const Doc& doc) {
  return mask(scores, kv_idx <= q_idx && gather(doc, q_idx) == gather(doc, kv_idx));
}

// Shared prefix (several continuations of one prompt packed together): `branch` is 0 for the
// shared prompt and 1, 2, ... per continuation; causal, and a continuation sees the prompt and itself.
template <operand S, class Branch>
constexpr auto shared_prefix(const S& scores, const Branch& branch) {
  const auto kv_branch = gather(branch, kv_idx);
  return mask(scores, kv_idx <= q_idx && (kv_branch == 0 || kv_branch == gather(branch, q_idx)));
}

// Dilated sliding window (attention-gym's generate_dilated_sliding_window): keys within `window`
// on either side, every `dilation`-th one.
template <operand S>
constexpr auto dilated_sliding_window(const S& scores, int window, int dilation) {
  const auto distance = abs(q_idx - kv_idx);
  return mask(scores, distance <= window && gym::remainder(distance, dilation) == 0);
}

// 2-D neighbourhood attention (NATTEN) on a canvas `width` tokens wide, tokens row by row: a
// query sees the kernel_w × kernel_h keys around it, the window shifted inward at the borders.
// The geometry is NATTEN's: token i sits at x = i % width, y = i / width. attention-gym's
// generate_natten takes x = i // width, y = i % width against the same clamps, which on a canvas
// that is not square drops keys inside the window and even the query itself; this is not that code.
template <operand S>
constexpr auto natten_2d(const S& scores, int width, int height, int kernel_w, int kernel_h) {
  const auto qx = gym::remainder(q_idx, width);
  const auto qy = gym::quotient(q_idx, width);
  const auto kx = gym::remainder(kv_idx, width);
  const auto ky = gym::quotient(kv_idx, width);
  return mask(scores, gym::in_window_2d(qx, qy, kx, ky, width, height, kernel_w, kernel_h));
}

// Sliding tile attention (STA, 2-D): the canvas is cut into tiles of tile × tile tokens, tokens
// numbered tile by tile (row-major within a tile); a query sees the keys of the kernel × kernel
// tiles around its own, the window shifted inward at the borders, like NATTEN over tiles.
template <operand S>
constexpr auto sliding_tile_2d(const S& scores, int width, int height, int tile, int kernel) {
  const int tiles_w = width / tile, tiles_h = height / tile, area = tile * tile;
  const auto q_tile = gym::quotient(q_idx, area);
  const auto kv_tile = gym::quotient(kv_idx, area);
  const auto qx = gym::remainder(q_tile, tiles_w);
  const auto qy = gym::quotient(q_tile, tiles_w);
  const auto kx = gym::remainder(kv_tile, tiles_w);
  const auto ky = gym::quotient(kv_tile, tiles_w);
  return mask(scores, gym::in_window_2d(qx, qy, kx, ky, tiles_w, tiles_h, kernel, kernel));
}

// Block-causal (block diffusion, blockwise parallel decoding): blocks of `block` tokens attend
// bidirectionally inside, causally across blocks.
template <operand S>
constexpr auto block_causal(const S& scores, int block) {
  return mask(scores, gym::quotient(kv_idx, block) <= gym::quotient(q_idx, block));
}

// Sandwich (Chi et al. 2022): the score plus the inner product of sinusoidal position embeddings,
// a function of |q - kv| only: read from a table by distance (sandwich_table builds it; past its
// last entry the last one is read).
template <operand S, class Table>
constexpr auto sandwich(const S& scores, const Table& table_by_distance) {
  return modify(scores, score + gather(table_by_distance, abs(q_idx - kv_idx)));
}

// Sandwich's bias by distance d = 0 .. distances - 1: Σ_{i < dims/2} cos(d / 10000^(2i/dims)), the
// inner product of two sinusoidal position embeddings of `dims` dims d apart.
inline std::vector<float> sandwich_table(int distances, int dims) {
  std::vector<float> t(static_cast<std::size_t>(distances));
  for (int d = 0; d < distances; ++d) {
    double sum = 0;
    for (int i = 0; i < dims / 2; ++i) sum += std::cos(d / std::pow(10000.0, 2.0 * i / dims));
    t[static_cast<std::size_t>(d)] = static_cast<float>(sum);
  }
  return t;
}

}  // namespace attn::dsl
