#pragma once
// Score modifiers: a new score written as an expression of `score` and the placeholders
// q_idx, kv_idx, head (FlexAttention's score_mod, checked at compile time and fused).
#include <bit>
#include "elementwise.hpp"

namespace attn::dsl {

struct modify_op {
  static constexpr ir::op ir_kind = ir::op::modify;
  static constexpr bool binds_placeholders = true;
  template <class S, class F>
  static constexpr auto shape(S s, F f) {
    using R = decltype(broadcast_shapes<"modify: modifier dims differ from the scores">(s, f));
    if constexpr (rank_v<S> < 2) return rank_below<"modify: scores", rank_v<S>, 2>{};
    else if constexpr (is_shape_error_v<R>) return R{};
    else if constexpr (!std::is_same_v<R, S>)
      return shape_error<"modify: the modifier " + shape_label<F>() + " does not broadcast to the scores " + shape_label<S>()>{};
    else return s;
  }
};

// modify(S, f): each score s at (head, q_idx, kv_idx) becomes f with `score` = s.
// Masked scores (-inf) stay masked, so modify and mask compose in either order.
template <operand S, operand F>
constexpr auto modify(const S& scores, const F& f) { return make_node(modify_op{}, scores, f); }

// Relative position bias: score + slope·(kv_idx - q_idx).
template <operand S>
constexpr auto relative_bias(const S& scores, float slope) { return modify(scores, score + slope * (kv_idx - q_idx)); }

// ALiBi (Press et al. 2022): head h (0-based, of H heads) adds -m_h·(q_idx - kv_idx). The slopes
// are the paper's: for H a power of two, m_h = 2^(-8(h+1)/H); otherwise, with P the largest power
// of two below H, the P slopes of P heads, then every other slope of 2P heads: m_h = 2^(-4(2(h-P)+1)/P).
template <operand S, class H>
constexpr auto alibi(const S& scores, H heads) {
  static_assert(is_dim_v<H> && H::is_static, "alibi(scores, H): H is the static heads dim");
  (void)heads;
  constexpr int P = static_cast<int>(std::bit_floor(static_cast<unsigned>(H::size)));
  constexpr float ln2 = 0.69314718f;
  const auto first = exp((head + 1) * (-8.0f * ln2 / float(P)));
  if constexpr (P == H::size) {
    return modify(scores, score - first * (q_idx - kv_idx));
  } else {
    const auto interleaved = exp((2 * (head - P) + 1) * (-4.0f * ln2 / float(P)));
    return modify(scores, score - select(head < P, first, interleaved) * (q_idx - kv_idx));
  }
}

// T5's relative position bucket of kv_idx - q_idx (Raffel et al. 2020), an index into a learned
// bias table: distances below half the buckets (per direction when bidirectional) get a bucket
// each, longer ones share logarithmically wider buckets up to max_distance, the last bucket beyond.
// Read it with gather(table, t5_bucket<...>(...), head) (gather.hpp), which truncates as T5 does.
template <bool Bidirectional>
constexpr auto t5_bucket(int buckets, int max_distance) {
  const int per_side = Bidirectional ? buckets / 2 : buckets;
  const int exact = per_side / 2;
  const auto rel = kv_idx - q_idx;
  const auto n = [&] {
    if constexpr (Bidirectional) return abs(rel);
    else return -min(rel, 0);
  }();
  const auto large = min(exact + log(n / float(exact)) / log(float(max_distance) / float(exact)) * float(per_side - exact),
                         per_side - 1);
  const auto within = select(n < exact, n, large);
  if constexpr (Bidirectional) return select(rel > 0, per_side, 0) + within;
  else return within;
}

// Soft-capping (Gemma 2, Grok): cap·tanh(score / cap) keeps logits inside (-cap, cap).
template <operand S>
constexpr auto softcap(const S& scores, float cap) { return modify(scores, cap * tanh(score / cap)); }

}  // namespace attn::dsl
