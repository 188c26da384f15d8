#pragma once
// Expression type -> ir::graph. constexpr, so the cost model can run inside static_assert.
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <boost/hana/for_each.hpp>
#include "expr.hpp"

namespace attn::dsl {

namespace detail {

template <class D>
constexpr ir::dim ir_dim() {
  ir::dim d{D::name, D::size, D::role, {}, {}, 0, 0};
  if constexpr (requires { typename D::numerator; }) {
    d.numerator = D::numerator::name;
    d.denominator = D::denominator::name;
    d.numerator_size = D::numerator::size;
    d.denominator_size = D::denominator::size;
  }
  return d;
}

template <class Shape>
constexpr std::vector<ir::dim> ir_shape() {
  return hana::unpack(Shape{}, [](auto... d) { return std::vector<ir::dim>{ir_dim<decltype(d)>()...}; });
}

struct builder {
  ir::graph g;

  constexpr int add(ir::node n) {
    g.nodes.push_back(std::move(n));
    return static_cast<int>(g.nodes.size()) - 1;
  }

  // The same tensor may appear several times (x in Q, K and V); it is one kernel argument.
  constexpr int add_terminal(ir::node n) {
    for (int t : g.terminals) {
      const ir::node& seen = g.at(t);
      if (seen.name == n.name) {
        if (seen.kind != n.kind || seen.shape != n.shape)
          throw std::logic_error("two different tensors share the name '" + std::string(n.name) + "'");
        return t;
      }
    }
    int i = add(std::move(n));
    g.terminals.push_back(i);
    return i;
  }
};

template <class E>
constexpr ir::node base_node(ir::op kind) {
  ir::node n;
  n.kind = kind;
  n.shape = ir_shape<typename E::shape_type>();
  n.batched = E::batched;
  return n;
}

template <fixed_string N, terminal_kind K, ir::element El, class... D>
constexpr int emit(builder& b, const terminal<N, K, El, D...>&) {
  using E = terminal<N, K, El, D...>;
  constexpr ir::op kinds[] = {ir::op::input, ir::op::weight, ir::op::int_input};
  ir::node n = base_node<E>(kinds[static_cast<int>(K)]);
  n.name = E::name_text.view();
  n.type = El;
  return b.add_terminal(std::move(n));
}

constexpr int emit(builder& b, const constant& c) {
  ir::node n = base_node<constant>(ir::op::constant);
  n.value = c.value;
  return b.add(std::move(n));
}

template <class D>
constexpr int emit(builder& b, const dim_value<D>&) {
  ir::node n = base_node<dim_value<D>>(ir::op::dim_value);
  n.name = D::name;
  n.value = static_cast<double>(D::size);
  return b.add(std::move(n));
}

template <ir::placeholder W>
constexpr int emit(builder& b, const placeholder<W>&) {
  ir::node n = base_node<placeholder<W>>(ir::op::placeholder);
  n.param = static_cast<int>(W);
  return b.add(std::move(n));
}

template <class Op, class... A>
constexpr int emit(builder& b, const node<Op, A...>& e) {
  std::vector<int> args;
  hana::for_each(e.args, [&](const auto& a) { args.push_back(emit(b, a)); });
  ir::node n = base_node<node<Op, A...>>(Op::ir_kind);
  n.args = std::move(args);
  if constexpr (requires { e.op.annotate(n); }) e.op.annotate(n);
  return b.add(std::move(n));
}

template <ir::element El, class E>
constexpr int emit(builder&, const stored_as<El, E>&) {
  throw std::logic_error("output_as: only the whole expression's output has a storage type, not a part of it");
  return -1;  // (a constexpr function has a return statement)
}

// The output's element type where the expression names none: the float tensors' common type;
// float32 where they differ or there is none.
constexpr ir::element common_element(const ir::graph& g) {
  std::optional<ir::element> common;
  for (int t : g.terminals) {
    const ir::node& n = g.at(t);
    if (n.kind == ir::op::int_input) continue;
    if (common && *common != n.type) return ir::element::f32;
    common = n.type;
  }
  return common.value_or(ir::element::f32);
}

template <class E>
constexpr ir::graph to_ir_checked(const E& e) {
  builder b;
  std::optional<ir::element> named;
  if constexpr (is_stored_as_v<E>) {
    b.g.root = emit(b, e.value);
    named = E::element;
  } else {
    b.g.root = emit(b, e);
  }
  ir::node& root = b.g.nodes[static_cast<std::size_t>(b.g.root)];
  if (!ir::is_terminal(root.kind)) root.type = named.value_or(common_element(b.g));
  else if (named && *named != root.type)
    throw std::logic_error("output_as: the expression is a tensor itself, stored in its own type");
  // Call order: inputs, then weights, then integer inputs (lengths too); each kind in order of first appearance.
  std::vector<int> order;
  for (ir::op kind : {ir::op::input, ir::op::weight, ir::op::int_input})
    for (int t : b.g.terminals)
      if (b.g.at(t).kind == kind) order.push_back(t);
  b.g.terminals = order;
  return b.g;
}

}  // namespace detail

template <well_shaped_expression E>
  requires(!E::free_placeholders)
constexpr ir::graph to_ir(const E& e) {
  return detail::to_ir_checked(e);
}
// An expression with q_idx, kv_idx, head or score outside mask(...) / modify(...) converts to this,
// and the to_ir below reports it in lines that do not spell the expression's type.
struct placeholder_outside_mask {
  template <expression E>
    requires E::free_placeholders
  constexpr placeholder_outside_mask(const E&) {}
};
template <class Reported = void>
constexpr ir::graph to_ir(placeholder_outside_mask) {
  static_assert(std::is_same_v<Reported, placeholder_outside_mask>,
                "q_idx, kv_idx, head and score may only appear inside mask(...) or modify(...)");
  return {};
}
// A shape error is reported here (see shaped); nothing more is instantiated after it, so no
// further errors follow.
template <fixed_string M>
constexpr ir::graph to_ir(const shaped<shape_error<M>>&) {
  static_assert(well_shaped<reported_t<shape_error<M>>>, "attn shape error: the message is in shape_error<...>");
  return {};
}

}  // namespace attn::dsl
