#pragma once
// An expression as readable math text, and as a Graphviz graph.
#include <cstdio>
#include <limits>
#include <span>
#include <string>
#include "gradient.hpp"
#include "to_ir.hpp"

namespace attn::dsl {

namespace detail {

struct printed {
  std::string text;
  int precedence;  // higher binds tighter
};

inline std::string wrap(const printed& p, int at_least) { return p.precedence >= at_least ? p.text : "(" + p.text + ")"; }

inline std::string number(double v) {
  if (v == -std::numeric_limits<double>::infinity()) return "-∞";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// "(T, Dk)"; with bindings also the sizes known: "(T=4, Dk=8)".
inline std::string shape_text(const std::vector<ir::dim>& s, std::span<const dim_binding> bindings = {}) {
  std::string t = "(";
  for (std::size_t i = 0; i < s.size(); ++i) {
    std::int64_t size = s[i].size;
    for (const dim_binding& b : bindings)
      if (b.name == s[i].name) size = b.size;
    t += (i ? ", " : "") + std::string(s[i].name);
    if (!bindings.empty() && size > 0) t += "=" + std::to_string(size);
  }
  return t + ")";
}

// `names`, if given: nodes printed by a name of their own (a let-bound value), except `defining`.
inline printed print(const ir::graph& g, int i, const std::vector<std::string>* names = nullptr, int defining = -1) {
  using ir::op;
  const ir::node& n = g.at(i);
  if (names != nullptr && i != defining && !(*names)[static_cast<std::size_t>(i)].empty()) return {(*names)[static_cast<std::size_t>(i)], 10};
  auto arg = [&](std::size_t k) { return print(g, n.args[k], names); };
  auto infix = [&](const char* sym, int prec) {
    return printed{wrap(arg(0), prec) + sym + wrap(arg(1), prec + 1), prec};
  };
  switch (n.kind) {
    case op::input: case op::weight: case op::int_input: return {std::string(n.name), 10};
    case op::constant: return {number(n.value), n.value < 0 ? 8 : 10};
    case op::dim_value:
      return n.name.find('/') == std::string_view::npos ? printed{std::string(n.name), 10}
                                                         : printed{"(" + std::string(n.name) + ")", 10};
    case op::placeholder: {
      constexpr const char* names[] = {"score", "q_idx", "kv_idx", "head"};
      return {names[n.param], 10};
    }
    case op::matmul: return infix("·", 7);
    case op::transpose: return {wrap(arg(0), 9) + "ᵀ", 9};
    case op::softmax: return {"softmax(" + arg(0).text + ")", 10};
    case op::neg: return {"-" + wrap(arg(0), 8), 8};
    case op::tanh: case op::exp: case op::log: case op::abs: case op::sigmoid: case op::relu:
      return {std::string(ir::op_name(n.kind)) + "(" + arg(0).text + ")", 10};
    case op::sqrt: return {"√" + wrap(arg(0), 9), 9};
    case op::rsqrt: return {"1/√" + wrap(arg(0), 9), 7};
    case op::logical_not: return {"¬" + wrap(arg(0), 8), 8};
    case op::add: return infix(" + ", 6);
    case op::sub: return infix(" - ", 6);
    case op::mul:
      if (g.at(n.args[1]).kind == op::rsqrt)  // scale(S, rsqrt(D)) reads S/√D
        return {wrap(arg(0), 7) + "/√" + wrap(print(g, g.at(n.args[1]).args[0], names), 9), 7};
      return infix("·", 7);
    case op::div: return infix("/", 7);
    case op::mod: return infix(" mod ", 7);
    case op::floor_div: return infix(" div ", 7);
    case op::minimum: case op::maximum:
      return {std::string(ir::op_name(n.kind)) + "(" + arg(0).text + ", " + arg(1).text + ")", 10};
    case op::lt: return infix(" < ", 5);
    case op::le: return infix(" ≤ ", 5);
    case op::gt: return infix(" > ", 5);
    case op::ge: return infix(" ≥ ", 5);
    case op::eq: return infix(" = ", 5);
    case op::ne: return infix(" ≠ ", 5);
    case op::logical_and: return infix(" ∧ ", 4);
    case op::logical_or: return infix(" ∨ ", 3);
    case op::select: return {"select(" + arg(0).text + ", " + arg(1).text + ", " + arg(2).text + ")", 10};
    case op::mask: return {"mask(" + arg(0).text + " | " + arg(1).text + ")", 10};
    case op::modify: return {"modify(" + arg(0).text + " | score ↦ " + arg(1).text + ")", 10};
    case op::split_heads: return {"split_heads(" + arg(0).text + ", " + std::string(n.shape[n.shape.size() - 3].name) + ")", 10};
    case op::concat_heads: return {"concat_heads(" + arg(0).text + ")", 10};
    case op::repeat_heads: return {"repeat_heads(" + arg(0).text + ", " + std::string(n.shape[n.shape.size() - 3].name) + ")", 10};
    case op::gather: {
      std::string s = "gather(" + arg(0).text;
      for (std::size_t k = 1; k < n.args.size(); ++k) s += ", " + arg(k).text;
      return {s + ")", 10};
    }
    case op::unsqueeze: return {"unsqueeze(" + arg(0).text + ", " + std::to_string(n.param) + ")", 10};
    case op::squeeze: return {"squeeze(" + arg(0).text + ", " + std::to_string(n.param) + ")", 10};
    case op::bind: return {"at(" + arg(0).text + " | " + arg(1).text + ")", 10};
    case op::sum_to: return {"sum_to" + shape_text(n.shape) + "(" + arg(0).text + ")", 10};
    case op::sum_groups: return {"sum_groups(" + arg(0).text + ", " + std::string(n.shape[n.shape.size() - 3].name) + ")", 10};
    case op::store: return arg(0);
    case op::scatter_add: {
      std::string s = "scatter_add" + shape_text(n.shape) + "(" + arg(0).text;
      for (std::size_t k = 1; k < n.args.size(); ++k) s += ", " + arg(k).text;
      return {s + ")", 10};
    }
  }
  return {"?", 10};
}

// A graph with several outputs (a gradient graph, gradient.hpp) as lines: its shared values first,
// each once (P1 = softmax(...): probabilities; G1 = ...: stored or summed values), then one line
// per output (d_q = ...: the gradient of tensor q).
inline std::string multi_output_text(const ir::graph& g) {
  std::vector<std::string> names(g.nodes.size());
  std::vector<char> used(g.nodes.size(), 0);
  for (int o : g.outputs()) used[static_cast<std::size_t>(o)] = 1;
  for (int i = static_cast<int>(g.nodes.size()) - 1; i >= 0; --i)
    if (used[static_cast<std::size_t>(i)])
      for (int a : g.at(i).args) used[static_cast<std::size_t>(a)] = 1;
  std::string text;
  int probabilities = 0, values = 0;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::op k = g.nodes[i].kind;
    if (!used[i]) continue;
    if (k == ir::op::softmax) names[i] = "P" + std::to_string(++probabilities);
    else if (k == ir::op::store || k == ir::op::sum_to || k == ir::op::sum_groups || k == ir::op::scatter_add)
      names[i] = "G" + std::to_string(++values);
    else continue;
    text += names[i] + " = " + print(g, static_cast<int>(i), &names, static_cast<int>(i)).text + "\n";
  }
  std::vector<int> outputs = g.outputs();
  std::size_t next = 0;
  const int dy = ir::output_gradient_position(g);
  for (std::size_t k = 0; k < (dy < 0 ? g.terminals.size() : static_cast<std::size_t>(dy)); ++k) {
    const ir::node& n = g.at(g.terminals[k]);
    if (n.kind == ir::op::int_input || next == outputs.size()) continue;
    text += "d_" + std::string(n.name) + " = " + print(g, outputs[next++], &names).text + "\n";
  }
  return text;
}

}  // namespace detail

// The expression as math text; a gradient graph (or any with several outputs) as lines
// (detail::multi_output_text).
inline std::string to_string(const ir::graph& g) {
  return g.more_outputs.empty() && !ir::is_gradient(g) ? detail::print(g, g.root).text : detail::multi_output_text(g);
}

template <well_shaped_expression E>
std::string to_string(const E& e) {
  return to_string(to_ir(e));
}
// These overloads report a shape error themselves (as shape_of and to_ir do), so the report is one
// step from the caller's line, and then do not call to_ir, which would report it again.
template <fixed_string M>
std::string to_string(const shaped<shape_error<M>>&) {
  static_assert(well_shaped<reported_t<shape_error<M>>>, "attn shape error: the message is in shape_error<...>");
  return {};
}

// An expression's shape as text: "(T, Dk)"; with bindings the sizes too: shape_text(e, T = 4)
// gives "(T=4, Dk=8)".
template <well_shaped_expression E, class... B>
std::string shape_text(const E& e, const B&... bindings) {
  const std::vector<dim_binding> bs = {dim_binding(bindings)...};
  return detail::shape_text(to_ir(e).output().shape, bs);
}
template <fixed_string M, class... B>
std::string shape_text(const shaped<shape_error<M>>&, const B&...) {
  static_assert(well_shaped<reported_t<shape_error<M>>>, "attn shape error: the message is in shape_error<...>");
  return {};
}

// The expression as a Graphviz digraph: one box per node, labelled with its op and shape.
inline std::string to_dot(const ir::graph& g) {
  std::string s = "digraph attn {\n  rankdir=BT;\n  node [shape=box, fontname=\"Helvetica\"];\n";
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::node& n = g.nodes[i];
    std::string label = ir::is_terminal(n.kind) || n.kind == ir::op::dim_value ? std::string(n.name) : detail::print(g, int(i)).text;
    if (!ir::is_leaf(n.kind)) label = std::string(ir::op_name(n.kind));
    if (n.kind == ir::op::matmul) label = std::string(ir::product_name(n));
    std::string escaped;
    for (char c : label + "\\n" + detail::shape_text(n.shape)) escaped += c == '"' ? std::string("\\\"") : std::string(1, c);
    const char* style = ir::is_terminal(n.kind) ? ", style=filled, fillcolor=\"#cde4f5\"" : "";
    s += "  n" + std::to_string(i) + " [label=\"" + escaped + "\"" + style + "];\n";
    for (int a : n.args) s += "  n" + std::to_string(a) + " -> n" + std::to_string(i) + ";\n";
  }
  return s + "}\n";
}

template <well_shaped_expression E>
std::string to_dot(const E& e) {
  return to_dot(to_ir(e));
}
template <fixed_string M>
std::string to_dot(const shaped<shape_error<M>>&) {
  static_assert(well_shaped<reported_t<shape_error<M>>>, "attn shape error: the message is in shape_error<...>");
  return {};
}

}  // namespace attn::dsl
