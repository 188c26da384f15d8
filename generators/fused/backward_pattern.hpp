#pragma once
// Finds, in a gradient graph (dsl/gradient.hpp), the backward of an attention (softmax, or
// softmax-free: f(S)·V) that the fused backward computes tile by tile. The nodes that span the attention's (queries, keys) ("pair
// nodes": the scores, P, dP = dO·Vᵀ, dS and what the masks and modifiers make of it) are then
// never stored: each is evaluated per tile, and they leave the tiles only through products that
// contract the keys (a row exit, dS·K: one row of results per query) or the queries (a column
// exit, Pᵀ·dO or Qᵀ·dS: one per key). Softmax's row term Σ_k P·dP is rowsum(dO ∘ O); softmax-free
// attention has none (dS = dP ∘ f'(S), elementwise).
// A pair node may also leave through a reduction to a small table: gather's adjoint (scatter_add
// into a T5 or relative-bias table, a per-head slope) or a sum_to over both pair dims. Its tiles
// sum into at most max_reduction_cells cells per lead index (the table's dims its indices pick,
// sizes fixed when compiling); dims indexed by `head` (or kept by sum_to) follow the tile's lead
// index. Anything else reading a pair node leaves the gradient to the generic lowering. Halide-free.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
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
  // The product's width D: its row-major dim (of `rank`) that is neither queries nor keys.
  std::size_t width_axis(std::size_t rank) const { return other_left ? rank - 2 : rank - 1; }
};

struct pair_reduction {
  int node = -1;  // the scatter_add or sum_to
  int pair = -1;  // its contributions, a pair node
  // Per dim of node, row-major: the pair's lead dim (row-major) it follows, or -1: a dim the
  // contributions pick (scatter_add: its index; sum_to: a unit dim, index 0).
  std::vector<int> follows;
  std::int64_t cells = 1;  // the product of the picked dims' sizes
};

inline constexpr std::int64_t max_reduction_cells = 4096;

struct backward_match {
  attention_match forward;  // node indices of the gradient graph (the forward's are its first)
  // Softmax only (-1 for softmax-free attention):
  int row_dot = -1;         // sum_to(weighted(P, dP)) (.., Nq, 1): rowsum(dO ∘ O) with dO = output_adjoint
  int output_adjoint = -1;  // the combine's adjoint, dO
  std::vector<pair_exit> exits;
  std::vector<pair_reduction> reductions;
};

// The backward of the gradient graph's one attention, where every pair node leaves the tiles
// through exits (none for a graph that is not a gradient, or has another attention or another
// reader of a pair node).
std::vector<backward_match> find_backward(const ir::graph& g);

// Does a GPU block hold the fused backward's per-tile Funcs in shared memory sized when compiling?
// Every exit's width must be known then (a size in the expression or `bound`), and each
// reduction's tile sums small: at most gpu_reduction_cells cells.
inline constexpr std::int64_t gpu_reduction_cells = 256;
bool gpu_covers(const ir::graph& g, const backward_match& m, const std::map<std::string, std::int64_t, std::less<>>& bound);

// Is n a pair node of m (spans its weights' queries and keys, and is computed, not a tensor)?
bool is_pair_node(const ir::graph& g, const backward_match& m, int n);

}  // namespace attn::gen
