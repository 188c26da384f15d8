#pragma once
// Multi-head structure: split a width D into H heads of D/H, attend per head, concatenate back.
// Per-head weights W_Q^(i) (D × D/H) are the column blocks of one W_Q (D × D), so
// split_heads(project(X, W_Q), H) is exactly the seeds' per-head projection.
#include "expr.hpp"

namespace attn::dsl {

template <class H>
struct split_heads_op {
  static constexpr ir::op ir_kind = ir::op::split_heads;
  static constexpr bool binds_placeholders = false;
  // (..., T, D) -> (..., H, T, D/H)
  template <class S>
  static constexpr auto shape(S s) {
    constexpr std::size_t r = rank_v<S>;
    if constexpr (r < 2) return rank_below<"split_heads", r, 2>{};
    else return split(s, dim_at<r - 1, S>{});
  }
  template <class S, class D>
  static constexpr auto split(S s, D) {
    if constexpr (!D::is_static) return shape_error<"split_heads: the width must be a static dim, got " + D::label>{};
    else if constexpr (D::size % H::size != 0) return shape_error<"split_heads: " + D::label + " is not divisible by " + H::label>{};
    else return append(drop_back<2>(s), H{}, dim_at<rank_v<S> - 2, S>{}, quotient_dim<D, H>{});
  }
};

// (..., T, D) -> (..., H, T, Dh) with a per-head width named by the user: queries and keys split
// from different widths (D = H·Dh and Dkv = G·Dh under grouped-query attention) share one Dh.
template <class H, class Dh>
struct split_heads_as_op {
  static constexpr ir::op ir_kind = ir::op::split_heads;
  static constexpr bool binds_placeholders = false;
  template <class S>
  static constexpr auto shape(S s) {
    constexpr std::size_t r = rank_v<S>;
    if constexpr (r < 2) return rank_below<"split_heads", r, 2>{};
    else return split(s, dim_at<r - 1, S>{});
  }
  template <class S, class D>
  static constexpr auto split(S s, D) {
    if constexpr (!D::is_static) return shape_error<"split_heads: the width must be a static dim, got " + D::label>{};
    else if constexpr (D::size != H::size * Dh::size)
      return shape_error<"split_heads: " + D::label + " is not " + H::label + " heads of " + Dh::label>{};
    else return append(drop_back<2>(s), H{}, dim_at<rank_v<S> - 2, S>{}, Dh{});
  }
};

// (..., G, T, D) -> (..., H, T, D): G groups of keys/values shared by H query heads, head h
// reading group h / (H / G) (grouped-query attention; multi-query for G = 1).
template <class H>
struct repeat_heads_op {
  static constexpr ir::op ir_kind = ir::op::repeat_heads;
  static constexpr bool binds_placeholders = false;
  template <class S>
  static constexpr auto shape(S s) {
    constexpr std::size_t r = rank_v<S>;
    if constexpr (r < 3) return rank_below<"repeat_heads", r, 3>{};
    else return repeat(s, dim_at<r - 3, S>{});
  }
  template <class S, class G>
  static constexpr auto repeat(S s, G) {
    constexpr std::size_t r = rank_v<S>;
    if constexpr (G::role != dim_role::heads)
      return shape_error<"repeat_heads: expected a heads dim (the groups), got " + G::label>{};
    else if constexpr (H::size % G::size != 0)
      return shape_error<"repeat_heads: " + H::label + " is not a multiple of " + G::label>{};
    else return append(drop_back<3>(s), H{}, dim_at<r - 2, S>{}, dim_at<r - 1, S>{});
  }
};

struct concat_heads_op {
  static constexpr ir::op ir_kind = ir::op::concat_heads;
  static constexpr bool binds_placeholders = false;
  // (..., H, T, D/H) -> (..., T, D)
  template <class S>
  static constexpr auto shape(S s) {
    constexpr std::size_t r = rank_v<S>;
    if constexpr (r < 3) return rank_below<"concat_heads", r, 3>{};
    else return concat(s, dim_at<r - 3, S>{}, dim_at<r - 1, S>{});
  }
  template <class S, class H, class Dh>
  static constexpr auto concat(S s, H, Dh) {
    constexpr std::size_t r = rank_v<S>;
    if constexpr (H::role != dim_role::heads) {
      return shape_error<"concat_heads: expected a heads dim, got " + H::label>{};
    } else if constexpr (requires { typename Dh::numerator; }) {
      if constexpr (std::is_same_v<typename Dh::denominator, H>)
        return append(drop_back<3>(s), dim_at<r - 2, S>{}, typename Dh::numerator{});
      else return append(drop_back<3>(s), dim_at<r - 2, S>{}, dim_t<H::name_text + "*" + Dh::name_text, H::size * Dh::size>{});
    } else {
      return append(drop_back<3>(s), dim_at<r - 2, S>{}, dim_t<H::name_text + "*" + Dh::name_text, H::size * Dh::size>{});
    }
  }
};

template <std::size_t Axis>
struct unsqueeze_op {
  static constexpr ir::op ir_kind = ir::op::unsqueeze;
  static constexpr bool binds_placeholders = false;
  template <class S>
  static constexpr auto shape(S) {
    constexpr std::size_t r = rank_v<S>;
    if constexpr (Axis > r)
      return shape_error<"unsqueeze: axis " + to_fixed_string<Axis>() + " is past the rank " + to_fixed_string<r>()>{};
    else
      return hana::unpack(hana::make_range(hana::size_c<0>, hana::size_c<r + 1>), [](auto... i) {
        return hana::make_tuple(pick<decltype(i)::value, S>()...);
      });
  }
  template <std::size_t I, class S>
  static constexpr auto pick() {
    if constexpr (I < Axis) return dim_at<I, S>{};
    else if constexpr (I == Axis) return unit_dim{};
    else return dim_at<I - 1, S>{};
  }
  constexpr void annotate(ir::node& n) const { n.param = static_cast<int>(Axis); }
};

template <operand A, class H>
constexpr auto split_heads(const A& a, H) {
  static_assert(is_dim_v<H> && H::role == dim_role::heads && H::is_static,
                "split_heads(x, H): H must be a heads dim, e.g. head_dim<\"H\", 8>");
  return make_node(split_heads_op<H>{}, a);
}

// split_heads(x, H, Dh): H heads of the width Dh (a static dim) given by name.
template <operand A, class H, class Dh>
constexpr auto split_heads(const A& a, H, Dh) {
  static_assert(is_dim_v<H> && H::role == dim_role::heads && H::is_static,
                "split_heads(x, H, Dh): H must be a heads dim, e.g. head_dim<\"H\", 8>");
  static_assert(is_dim_v<Dh> && Dh::is_static, "split_heads(x, H, Dh): Dh must be a static dim");
  return make_node(split_heads_as_op<H, Dh>{}, a);
}

// repeat_heads(kv, H): keys or values of G head groups, as H query heads (G divides H).
template <operand A, class H>
constexpr auto repeat_heads(const A& a, H) {
  static_assert(is_dim_v<H> && H::role == dim_role::heads && H::is_static,
                "repeat_heads(x, H): H must be the query heads dim, e.g. head_dim<\"H\", 8>");
  return make_node(repeat_heads_op<H>{}, a);
}

template <operand A>
constexpr auto concat_heads(const A& a) { return make_node(concat_heads_op{}, a); }

// Insert a size-1 axis at Axis, so (Nq, A) and (Nk, A) broadcast to (Nq, Nk, A).
template <std::size_t Axis, operand A>
constexpr auto unsqueeze(const A& a) { return make_node(unsqueeze_op<Axis>{}, a); }

}  // namespace attn::dsl
