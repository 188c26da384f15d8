#pragma once
// Finds, in a gradient graph (dsl/gradient.hpp), the backward of an attention (softmax, or
// softmax-free: f(S)·V) that the fused backward computes tile by tile. The nodes that span the attention's (queries, keys) ("pair
// nodes": the scores, P, dP = dO·Vᵀ, dS and what the masks and modifiers make of it) are then
// never stored: each is evaluated per tile, and they leave the tiles only through products that
// contract the keys (a row exit, dS·K: one row of results per query) or the queries (a column
// exit, Pᵀ·dO or Qᵀ·dS: one per key). Softmax's row term Σ_k P·dP is rowsum(dO ∘ O); softmax-free
// attention has none (dS = dP ∘ f'(S), elementwise).
// Anything else reading a pair node (a table's scatter-add, a sum to a per-head slope) leaves
// the gradient to the generic lowering. Halide-free.
#include <vector>
#include "dsl/ir.hpp"
#include "generators/fused/attention_pattern.hpp"

namespace attn::gen {

struct pair_exit {
  int node = -1;   // the product
  int pair = -1;   // the pair node it reads (queries × keys), untransposed
  int other = -1;  // its other operand
  // true: contracts the keys, pair·other (.., Nq, D). false: contracts the queries, pairᵀ·other
  // (.., Nk, D), or other·pair (.., D, Nk) with other_left.
  bool rows = false;
  bool other_left = false;
};

struct backward_match {
  attention_match forward;  // node indices of the gradient graph (the forward's are its first)
  // Softmax only (-1 for softmax-free attention):
  int row_dot = -1;         // sum_to(weighted(P, dP)) (.., Nq, 1): rowsum(dO ∘ O) with dO = output_adjoint
  int output_adjoint = -1;  // the combine's adjoint, dO
  std::vector<pair_exit> exits;
};

// The backward of the gradient graph's one attention, where every pair node leaves the tiles
// through exits (none for a graph that is not a gradient, or has another attention or another
// reader of a pair node).
std::vector<backward_match> find_backward(const ir::graph& g);

// Is n a pair node of m (spans its weights' queries and keys, and is computed, not a tensor)?
bool is_pair_node(const ir::graph& g, const backward_match& m, int n);

}  // namespace attn::gen
