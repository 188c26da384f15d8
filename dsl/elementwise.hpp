#pragma once
// Elementwise arithmetic with broadcasting of scalars and vectors: + - * /, tanh, exp, log, abs,
// sigmoid (1 / (1 + e^-x)), relu (max(x, 0)),
// comparisons and logic (for mask predicates), select, min/max, and scale.
#include "expr.hpp"

namespace attn::dsl {

template <ir::op Kind>
struct unary_op {
  static constexpr ir::op ir_kind = Kind;
  static constexpr bool binds_placeholders = false;
  template <class S>
  static constexpr auto shape(S s) { return s; }
};

template <ir::op Kind>
struct binary_op {
  static constexpr ir::op ir_kind = Kind;
  static constexpr bool binds_placeholders = false;
  template <class SA, class SB>
  static constexpr auto shape(SA a, SB b) { return broadcast_shapes<"elementwise: dims differ">(a, b); }
};

struct select_op {
  static constexpr ir::op ir_kind = ir::op::select;
  static constexpr bool binds_placeholders = false;
  template <class SC, class SA, class SB>
  static constexpr auto shape(SC c, SA a, SB b) {
    return broadcast_shapes<"select: dims differ">(c, broadcast_shapes<"select: dims differ">(a, b));
  }
};

// At least one side must be an expression, so plain numbers keep their C++ meaning.
template <class A, class B>
concept expression_pair = operand<A> && operand<B> && (expression<A> || expression<B>);

#define ATTN_BINARY(fn, kind)                                             \
  template <class A, class B>                                             \
    requires expression_pair<A, B>                                        \
  constexpr auto fn(const A& a, const B& b) {                             \
    return make_node(binary_op<ir::op::kind>{}, a, b);                    \
  }
ATTN_BINARY(operator+, add)
ATTN_BINARY(operator-, sub)
ATTN_BINARY(operator*, mul)
ATTN_BINARY(operator/, div)
ATTN_BINARY(operator%, mod)
ATTN_BINARY(floor_div, floor_div)  // floor(a / b), exact for integers (indices): q_idx // 6
ATTN_BINARY(operator<, lt)
ATTN_BINARY(operator<=, le)
ATTN_BINARY(operator>, gt)
ATTN_BINARY(operator>=, ge)
ATTN_BINARY(operator==, eq)
ATTN_BINARY(operator!=, ne)
ATTN_BINARY(operator&&, logical_and)
ATTN_BINARY(operator||, logical_or)
ATTN_BINARY(min, minimum)
ATTN_BINARY(max, maximum)
#undef ATTN_BINARY

#define ATTN_UNARY(fn, kind) \
  template <operand A>       \
  constexpr auto fn(const A& a) { return make_node(unary_op<ir::op::kind>{}, a); }
ATTN_UNARY(tanh, tanh)
ATTN_UNARY(exp, exp)
ATTN_UNARY(log, log)
ATTN_UNARY(abs, abs)
ATTN_UNARY(sqrt, sqrt)
ATTN_UNARY(rsqrt, rsqrt)
ATTN_UNARY(sigmoid, sigmoid)  // 1 / (1 + e^-x): sigmoid attention's weights
ATTN_UNARY(relu, relu)        // max(x, 0): ReLU attention's weights
#undef ATTN_UNARY

template <expression A>
constexpr auto operator-(const A& a) { return make_node(unary_op<ir::op::neg>{}, a); }
template <expression A>
constexpr auto operator!(const A& a) { return make_node(unary_op<ir::op::logical_not>{}, a); }

template <operand C, operand A, operand B>
constexpr auto select(const C& cond, const A& a, const B& b) { return make_node(select_op{}, cond, a, b); }

// scale(S, c) = S·c; c is a number or an expression such as rsqrt(Dk).
template <operand A, operand C>
constexpr auto scale(const A& a, const C& c) { return make_node(binary_op<ir::op::mul>{}, a, c); }

}  // namespace attn::dsl
