#pragma once
// The generic lowering's side of nonfinite.hpp's rules, which the fused pipeline follows too
// (flash_algorithm.hpp): a masked score is -inf; the softmax is safe (a -inf score weighs 0, a
// row with no kept key is all 0, a NaN or +inf score makes its row NaN); a key of weight 0 never
// mixes its value into the result, even a NaN.
#include <vector>
#include <Halide.h>
#include "generators/lowering/stage.hpp"

namespace attn::gen {

// The score where the mask's predicate keeps it, -inf where not. The predicate is exact
// (exact_predicate): every lowering and schedule keeps the same keys.
Halide::Expr masked_score(const Halide::Expr& keep, const Halide::Expr& score);

// Softmax-free attention's weight of a key: 0 where a mask on the score's path removes it (as fused).
Halide::Expr kept_weight(const Halide::Expr& keep, const Halide::Expr& weight);

// One term of a product: a·b, or where a is attention weights, weighted(a, b) (a masked key's
// weight 0 never touches its value).
Halide::Expr product_term(const Halide::Expr& a, const Halide::Expr& b, bool a_is_weights);

// f(at) = the safe softmax of x over the last axis, x being the operand at `at`, x_key the operand
// at (row, key). at, at_key and row are Func args (halide_args). Its row maximum, numerators and
// row sum are Funcs of their own (stage::row_max, row_exp, row_sum), computed per row.
void define_safe_softmax(Halide::Func& f, const std::vector<Halide::Expr>& at, const std::vector<Halide::Expr>& at_key,
                         const std::vector<Halide::Expr>& row, const Halide::Expr& x, const Halide::Expr& x_key, stage& st);

}  // namespace attn::gen
