#pragma once
// The log-sum-exp output (lowering_options::with_lse, lowered::lse) of the generic lowering: each
// row's log-sum-exp of the one softmax's kept scores. The fused pipeline defines its own beside
// its state (flash_funcs::lse).
#include <vector>
#include <Halide.h>
#include "generators/lowering/lowering_state.hpp"

namespace attn::gen {

// lowered::lse for `softmax`, by the softmax's own rule (nonfinite.hpp): its own running max and
// sum, computed per row (the softmax's row helpers live inside the softmax's loops). `row`: the
// softmax's Vars without the key axis, as Func args (batch last); x_key: its operand at (row, key).
void define_lse(lowering_state& s, const ir::node& softmax, const std::vector<Halide::Var>& row, const Halide::Expr& x_key);

}  // namespace attn::gen
