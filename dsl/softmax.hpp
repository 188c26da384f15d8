#pragma once
// Softmax over the last (key) axis. A row whose entries are all -inf (fully masked) gives
// weights of 0, so its output row is 0: defined, never NaN.
#include "expr.hpp"

namespace attn::dsl {

struct softmax_op {
  static constexpr ir::op ir_kind = ir::op::softmax;
  static constexpr bool binds_placeholders = false;
  template <class S>
  static constexpr auto shape(S s) {
    if constexpr (rank_v<S> < 1) return rank_below<"softmax", rank_v<S>, 1>{};
    else return s;
  }
};

template <operand A>
constexpr auto softmax(const A& scores) { return make_node(softmax_op{}, scores); }

}  // namespace attn::dsl
