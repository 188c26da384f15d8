#pragma once
// Masks: a predicate of the placeholders q_idx, kv_idx, head (and of any inputs, such as
// per-sequence lengths) decides which scores survive; the others become -inf before softmax.
#include <limits>
#include "elementwise.hpp"

namespace attn::dsl {

struct mask_op {
  static constexpr ir::op ir_kind = ir::op::mask;
  static constexpr bool binds_placeholders = true;
  template <class S, class P>
  static constexpr auto shape(S s, P p) {
    using R = decltype(broadcast_shapes<"mask: predicate dims differ from the scores">(s, p));
    if constexpr (rank_v<S> < 2) return rank_below<"mask: scores", rank_v<S>, 2>{};
    else if constexpr (is_shape_error_v<R>) return R{};
    else if constexpr (!std::is_same_v<R, S>)
      return shape_error<"mask: the predicate " + shape_label<P>() + " does not broadcast to the scores " + shape_label<S>()>{};
    else return s;
  }
};

// Keep scores where keep(q_idx, kv_idx, head, ...) holds.
template <operand S, operand P>
constexpr auto mask(const S& scores, const P& keep) { return make_node(mask_op{}, scores, keep); }

// Causal (autoregressive): a query sees itself and earlier keys.
template <operand S>
constexpr auto causal(const S& scores) { return mask(scores, kv_idx <= q_idx); }

// Key padding: keys at or past the sequence's length are ignored.
template <operand S, expression L>
constexpr auto key_padding(const S& scores, const L& key_lengths) { return mask(scores, kv_idx < key_lengths); }

// A sliding window: each query sees the `window` most recent keys (itself included).
template <operand S>
constexpr auto sliding_window(const S& scores, int window) {
  return mask(scores, (kv_idx <= q_idx) && (q_idx - kv_idx < window));
}

// -inf as a constant, for additive masks written by hand: scores + select(keep, 0, minus_infinity).
inline constexpr constant minus_infinity{-std::numeric_limits<float>::infinity()};

}  // namespace attn::dsl
