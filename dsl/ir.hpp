#pragma once
// The expression as plain data: one node per operation, children before parents.
// Built at compile time or run time from an expression type (to_ir.hpp); everything below
// the DSL (printer, cost model, lowering to Halide, the JIT cache key) reads only this.
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>
#include "dim.hpp"

namespace attn::ir {

using dsl::dim_role;

enum class op {
  // leaves
  input, weight, int_input, constant, dim_value, placeholder,
  // linear algebra and reductions
  matmul, transpose, softmax,
  // elementwise, unary
  neg, tanh, exp, log, abs, sqrt, rsqrt, sigmoid, relu, logical_not,
  // elementwise, binary
  add, sub, mul, div, mod, floor_div, minimum, maximum, lt, le, gt, ge, eq, ne, logical_and, logical_or,
  // elementwise, ternary: select(cond, a, b)
  select,
  // attention structure
  mask,    // args: scores, predicate; masked-out entries become -inf
  modify,  // args: scores, f(score, q_idx, kv_idx, head); the placeholder `score` is arg 0
  split_heads, concat_heads, unsqueeze,
  repeat_heads,  // (.., G, T, D) -> (.., H, T, D): query head h reads group h / (H / G) (GQA, MQA)
  gather,        // args: a tensor, then one scalar index per dim (clamped to the edges)
};

enum class placeholder { score, q_idx, kv_idx, head };

// How a matmul reads to a human and in the cost table.
enum class product_kind { matmul, project, combine };

struct dim {
  std::string_view name;  // names live in the expression types' static storage
  std::int64_t size = 0;  // 0: bound at run time
  dim_role role = dim_role::plain;
  std::string_view numerator, denominator;  // for quotient dims (D/H)
  std::int64_t numerator_size = 0, denominator_size = 0;
  constexpr bool operator==(const dim&) const = default;
};

struct node {
  op kind{};
  std::vector<int> args;
  std::vector<dim> shape;  // row-major, batch excluded
  bool batched = false;    // has the implicit leading batch dim
  std::string_view name;   // terminals: the tensor's name; dim_value: the dim's name
  double value = 0;        // constant's value
  int param = 0;           // placeholder id, unsqueeze axis, product_kind
  constexpr bool operator==(const node&) const = default;
};

struct graph {
  std::vector<node> nodes;
  int root = -1;
  std::vector<int> terminals;  // call order: inputs, weights, integer inputs; each by first appearance

  constexpr const node& at(int i) const { return nodes[static_cast<std::size_t>(i)]; }
  constexpr const node& output() const { return at(root); }
};

constexpr bool is_terminal(op k) { return k == op::input || k == op::weight || k == op::int_input; }

constexpr bool is_elementwise(op k) {
  return (k >= op::neg && k <= op::select) || k == op::mask || k == op::modify;
}

// Number of elements of a shape, when every dim is static (0 otherwise).
constexpr std::int64_t static_elements(const std::vector<dim>& s) {
  std::int64_t n = 1;
  for (const auto& d : s) n *= d.size;
  return n;
}

constexpr std::string_view op_name(op k) {
  constexpr std::string_view names[] = {
      "input", "weight", "int_input", "constant", "dim_value", "placeholder", "matmul", "transpose",
      "softmax", "neg", "tanh", "exp", "log", "abs", "sqrt", "rsqrt", "sigmoid", "relu", "not", "add", "sub", "mul", "div", "mod", "floor_div",
      "min", "max", "lt", "le", "gt", "ge", "eq", "ne", "and", "or", "select", "mask", "modify",
      "split_heads", "concat_heads", "unsqueeze", "repeat_heads", "gather"};
  return names[static_cast<int>(k)];
}

// A constant exactly: the shortest text that reads back as the same double (1e-07, not 0.000000).
inline std::string exact_text(double v) {
  char buf[32];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

// A stable text form of the whole graph: the JIT cache key. Two graphs lower alike iff equal.
inline std::string serialize(const graph& g) {
  std::string s;
  for (const auto& n : g.nodes) {
    s += std::string(op_name(n.kind)) + (n.batched ? "[b]" : "") + "(";
    for (int a : n.args) s += std::to_string(a) + ",";
    s += ")" + std::string(n.name) + ":" + exact_text(n.value) + ":" + std::to_string(n.param) + "{";
    for (const auto& d : n.shape)
      s += std::string(d.name) + "=" + std::to_string(d.size) + "/" + std::to_string(static_cast<int>(d.role)) + ",";
    s += "};";
  }
  return s + "root=" + std::to_string(g.root);
}

}  // namespace attn::ir
