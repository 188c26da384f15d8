#pragma once
// Finds attention on the IR, whatever variant wrote it: softmax(S)·V, where S is any score
// (Q·Kᵀ, a bilinear form, a pairwise elementwise score such as Bahdanau's) under a chain of
// masks and score modifiers; and softmax-free attention, combine(f(S), V), where f is any
// elementwise expression of a pairwise product S (sigmoid attention, ReLU attention): no
// normalisation over the keys. Halide-free: a plain description the fused lowering reads.
#include <string>
#include <vector>
#include "dsl/ir.hpp"

namespace attn::gen {

struct attention_match {
  int combine = -1;        // matmul: weights (..., Nq, Nk) · values (..., Nk, Dv)
  int softmax = -1;        // softmax over Nk; -1 for softmax-free attention
  int weights = -1;        // the combine's left operand (..., Nq, Nk): the softmax, or f(S)
  int values = -1;         // V
  // Softmax: the mask / modify nodes on top of the score, outermost first. Softmax-free: the masks
  // on the score's own path through f (each elementwise node's one (Nq, Nk)-shaped operand),
  // outermost first; a key any of them removes has weight 0.
  std::vector<int> chain;
  int score = -1;          // softmax: S below the chain, (..., Nq, Nk); softmax-free: the weights, f(S)

  bool normalised() const { return softmax >= 0; }
};

// Every combine of a softmax that only that combine reads, and every combine (product_kind::combine)
// of an elementwise expression, read by nothing else, of a pairwise product (..., Nq, Nk) with no
// softmax inside.
std::vector<attention_match> find_attention(const ir::graph& g);

// Does the fused lowering of an attention with these weights compute node n tile by tile, one
// copy per use, instead of in a buffer of its own? Those of its materialised nodes (ir::op_traits)
// that span the weights' (queries, keys): Q·Kᵀ, and the weights themselves.
bool computed_per_tile(const ir::node& n, const ir::node& weights);

// The match as math, e.g. "softmax(mask(modify(score)))·V", "f(mask(score))·V" (for describe()).
std::string to_string(const ir::graph& g, const attention_match& m);

}  // namespace attn::gen
