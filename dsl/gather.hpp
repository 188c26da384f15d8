#pragma once
// Reading a tensor at indices computed from q_idx, kv_idx, head and other tensors, inside masks
// and score modifiers:
//   gather(doc, q_idx) == gather(doc, kv_idx)           same document (doc: int_input<"doc">(T))
//   score + gather(bias, kv_idx - q_idx + 64, head)     a learned bias per distance and head
//   score + gather(pair_bias, q_idx, kv_idx)            a bias per pair (Graphormer)
// Each index is converted to an integer (truncated toward zero) and clamped to the tensor's
// edges: index -3 reads element 0, index N + 2 reads element N - 1.
#include "expr.hpp"

namespace attn::dsl {

struct gather_op {
  static constexpr ir::op ir_kind = ir::op::gather;
  static constexpr bool binds_placeholders = false;
  template <class Table, class... Indices>
  static constexpr auto shape(Table, Indices...) {
    constexpr std::size_t rank = rank_v<Table>, given = sizeof...(Indices);
    if constexpr (rank != given)
      return shape_error<"gather: one index per dim of the tensor: rank " + to_fixed_string<rank>() + ", got " +
                         to_fixed_string<given>() + " indices">{};
    else if constexpr (((rank_v<Indices> != 0) || ... || false))
      return shape_error<"gather: each of the " + to_fixed_string<given>() +
                         " indices must be a scalar (an expression of q_idx, kv_idx, head)">{};
    else return hana::tuple<>{};
  }
};

template <fixed_string N, terminal_kind K, ir::element E, class... D, operand... I>
constexpr auto gather(const terminal<N, K, E, D...>& table, const I&... indices) {
  return make_node(gather_op{}, table, indices...);
}

}  // namespace attn::dsl
