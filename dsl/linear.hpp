#pragma once
// Products: matmul, project (X·W), combine (A·V), and transpose. Leading dims broadcast.
#include "expr.hpp"

namespace attn::dsl {

template <ir::product_kind Kind>
struct product_op {
  static constexpr ir::op ir_kind = ir::op::matmul;
  static constexpr bool binds_placeholders = false;

  static constexpr auto what() {
    if constexpr (Kind == ir::product_kind::project) return fixed_string("project: inner dims differ");
    else if constexpr (Kind == ir::product_kind::combine) return fixed_string("combine: key dims differ");
    else return fixed_string("matmul: inner dims differ");
  }

  // (..., M, K)·(..., K, N) -> (..., M, N); a vector on either side drops that axis.
  template <class SA, class SB>
  static constexpr auto shape(SA a, SB b) {
    constexpr std::size_t ra = rank_v<SA>, rb = rank_v<SB>;
    if constexpr (ra < 1) return rank_below<what(), ra, 1>{};
    else if constexpr (rb < 1) return rank_below<what(), rb, 1>{};
    else return ranked_shape(a, b);
  }
  template <class SA, class SB>
  static constexpr auto ranked_shape(SA a, SB b) {
    constexpr std::size_t ra = rank_v<SA>, rb = rank_v<SB>;
    using ka = dim_at<ra - 1, SA>;
    using kb = dim_at<(rb >= 2 ? rb - 2 : 0), SB>;
    if constexpr (!std::is_same_v<ka, kb>) return dims_differ<what(), ka, kb>{};
    else if constexpr (rb == 1) return drop_back<1>(a);
    else if constexpr (ra == 1) return append(drop_back<2>(b), dim_at<rb - 1, SB>{});
    else
      return append(broadcast_shapes<"matmul: batch dims differ">(drop_back<2>(a), drop_back<2>(b)),
                    dim_at<ra - 2, SA>{}, dim_at<rb - 1, SB>{});
  }
  constexpr void annotate(ir::node& n) const { n.param = static_cast<int>(Kind); }
};

struct transpose_op {
  static constexpr ir::op ir_kind = ir::op::transpose;
  static constexpr bool binds_placeholders = false;
  template <class S>
  static constexpr auto shape(S s) {
    constexpr std::size_t r = rank_v<S>;
    if constexpr (r < 2) return rank_below<"transpose", r, 2>{};
    else return append(drop_back<2>(s), dim_at<r - 1, S>{}, dim_at<r - 2, S>{});
  }
};

template <operand A, operand B>
constexpr auto matmul(const A& a, const B& b) { return make_node(product_op<ir::product_kind::matmul>{}, a, b); }

// X·W: a projection by a weight matrix (Q = X·W_Q).
template <operand X, operand W>
constexpr auto project(const X& x, const W& w) { return make_node(product_op<ir::product_kind::project>{}, x, w); }

// A·V: attention weights combine the values (Y = A·V).
template <operand A, operand V>
constexpr auto combine(const A& weights, const V& values) {
  return make_node(product_op<ir::product_kind::combine>{}, weights, values);
}

template <operand A>
constexpr auto transpose(const A& a) { return make_node(transpose_op{}, a); }

}  // namespace attn::dsl
