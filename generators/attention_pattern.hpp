#pragma once
// Finds attention on the IR, whatever variant wrote it: softmax(S)·V, where S is any score
// (Q·Kᵀ, a bilinear form, a pairwise elementwise score such as Bahdanau's) under a chain of
// masks and score modifiers. Halide-free: a plain description the fused lowering reads.
#include <string>
#include <vector>
#include "dsl/ir.hpp"

namespace attn::gen {

struct attention_match {
  int combine = -1;        // matmul: weights (..., Nq, Nk) · values (..., Nk, Dv)
  int softmax = -1;        // softmax over Nk
  int values = -1;         // V
  std::vector<int> chain;  // mask / modify nodes on top of the score, outermost first
  int score = -1;          // S below the chain: (..., Nq, Nk)
};

// Every combine of a softmax that only that combine reads.
std::vector<attention_match> find_attention(const ir::graph& g);

// The match as math, e.g. "softmax(mask(modify(score)))·V" (for describe()).
std::string to_string(const ir::graph& g, const attention_match& m);

}  // namespace attn::gen
