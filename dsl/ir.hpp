#pragma once
// The expression as plain data: one node per operation, children before parents.
// Built at compile time or run time from an expression type (to_ir.hpp); everything below
// the DSL (printer, cost model, lowering to Halide, the JIT cache key) reads only this.
#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <iterator>
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
  // made by differentiation (gradient.hpp), never written in an expression
  bind,         // args: scores S, f: f at each index of S, the placeholders bound there, `score` = S unmasked
  sum_to,       // args: x: x summed over the axes it broadcasts over to reach this node's shape (and batch)
  sum_groups,   // args: x (.., H, T, D) -> (.., G, T, D): the sum over each group's heads (repeat_heads' adjoint)
  squeeze,      // args: x: x without its size-1 axis `param` (unsqueeze's adjoint)
  scatter_add,  // args: c, then one index per dim: a tensor shaped like gather's, += c at each index (gather's adjoint)
  store,        // args: x: x computed into a buffer of its own, read by several products
  last = store,  // the last op: op_table below has a row for each op up to here
};

// What the layers below the DSL know about an op, said once: one row per op, in the enum's order
// (checked below). Whatever else an op comes to need everywhere (how it differentiates) is a
// field here, so that a new op is one row and its rules, not a hunt for every list of ops.
struct op_traits {
  op kind;
  std::string_view name;      // in printed expressions, the cost table, Func names and the cache key
  bool leaf = false;          // no arguments: a tensor, a constant, a dim's size, a placeholder
  bool terminal = false;      // a tensor the caller passes
  bool elementwise = false;   // each element from its operands' elements at the same index (broadcast)
  bool materialised = false;  // the generic lowering computes it into a buffer of its own
  bool normalises = false;    // normalises its operand over the last axis (softmax): attention weights
};

inline constexpr op_traits op_table[] = {
    {.kind = op::input, .name = "input", .leaf = true, .terminal = true},
    {.kind = op::weight, .name = "weight", .leaf = true, .terminal = true},
    {.kind = op::int_input, .name = "int_input", .leaf = true, .terminal = true},
    {.kind = op::constant, .name = "constant", .leaf = true},
    {.kind = op::dim_value, .name = "dim_value", .leaf = true},
    {.kind = op::placeholder, .name = "placeholder", .leaf = true},
    {.kind = op::matmul, .name = "matmul", .materialised = true},
    {.kind = op::transpose, .name = "transpose", .materialised = true},
    {.kind = op::softmax, .name = "softmax", .materialised = true, .normalises = true},
    {.kind = op::neg, .name = "neg", .elementwise = true},
    {.kind = op::tanh, .name = "tanh", .elementwise = true},
    {.kind = op::exp, .name = "exp", .elementwise = true},
    {.kind = op::log, .name = "log", .elementwise = true},
    {.kind = op::abs, .name = "abs", .elementwise = true},
    {.kind = op::sqrt, .name = "sqrt", .elementwise = true},
    {.kind = op::rsqrt, .name = "rsqrt", .elementwise = true},
    {.kind = op::sigmoid, .name = "sigmoid", .elementwise = true},
    {.kind = op::relu, .name = "relu", .elementwise = true},
    {.kind = op::logical_not, .name = "not", .elementwise = true},
    {.kind = op::add, .name = "add", .elementwise = true},
    {.kind = op::sub, .name = "sub", .elementwise = true},
    {.kind = op::mul, .name = "mul", .elementwise = true},
    {.kind = op::div, .name = "div", .elementwise = true},
    {.kind = op::mod, .name = "mod", .elementwise = true},
    {.kind = op::floor_div, .name = "floor_div", .elementwise = true},
    {.kind = op::minimum, .name = "min", .elementwise = true},
    {.kind = op::maximum, .name = "max", .elementwise = true},
    {.kind = op::lt, .name = "lt", .elementwise = true},
    {.kind = op::le, .name = "le", .elementwise = true},
    {.kind = op::gt, .name = "gt", .elementwise = true},
    {.kind = op::ge, .name = "ge", .elementwise = true},
    {.kind = op::eq, .name = "eq", .elementwise = true},
    {.kind = op::ne, .name = "ne", .elementwise = true},
    {.kind = op::logical_and, .name = "and", .elementwise = true},
    {.kind = op::logical_or, .name = "or", .elementwise = true},
    {.kind = op::select, .name = "select", .elementwise = true},
    {.kind = op::mask, .name = "mask", .elementwise = true},
    {.kind = op::modify, .name = "modify", .elementwise = true},
    {.kind = op::split_heads, .name = "split_heads"},
    {.kind = op::concat_heads, .name = "concat_heads"},
    {.kind = op::unsqueeze, .name = "unsqueeze"},
    {.kind = op::repeat_heads, .name = "repeat_heads"},
    {.kind = op::gather, .name = "gather"},
    {.kind = op::bind, .name = "bind", .elementwise = true},
    {.kind = op::sum_to, .name = "sum_to", .materialised = true},
    {.kind = op::sum_groups, .name = "sum_groups", .materialised = true},
    {.kind = op::squeeze, .name = "squeeze"},
    {.kind = op::scatter_add, .name = "scatter_add", .materialised = true},
    {.kind = op::store, .name = "store", .materialised = true},
};

static_assert(std::size(op_table) == static_cast<std::size_t>(op::last) + 1, "ir::op_table: one row per ir::op");
static_assert(
    [] {
      for (std::size_t k = 0; k < std::size(op_table); ++k)
        if (op_table[k].kind != static_cast<op>(k)) return false;
      return true;
    }(),
    "ir::op_table: the rows are in the order of enum ir::op");

constexpr const op_traits& traits(op k) { return op_table[static_cast<std::size_t>(k)]; }
constexpr std::string_view op_name(op k) { return traits(k).name; }
constexpr bool is_leaf(op k) { return traits(k).leaf; }
constexpr bool is_terminal(op k) { return traits(k).terminal; }
constexpr bool is_elementwise(op k) { return traits(k).elementwise; }
constexpr bool is_materialised(op k) { return traits(k).materialised; }
constexpr bool normalises(op k) { return traits(k).normalises; }

enum class placeholder { score, q_idx, kv_idx, head };

// How a matmul reads to a human and in the cost table. `weighted`: a left term of exactly 0
// never touches the right operand (0·NaN is 0), as attention weights combine values; the
// gradient's products by score gradients, which are 0 at masked pairs, are weighted.
enum class product_kind { matmul, project, combine, weighted };

struct dim {
  std::string_view name;  // names live in the expression types' static storage
  std::int64_t size = 0;  // 0: bound at run time
  dim_role role = dim_role::plain;
  std::string_view numerator, denominator;  // for quotient dims (D/H)
  std::int64_t numerator_size = 0, denominator_size = 0;
  constexpr bool operator==(const dim&) const = default;
};

// A float tensor's element type in memory. Arithmetic, the online softmax's state and every sum
// are float32 whatever it is: a tensor's elements are converted as they are read, and the output
// rounded once as it is stored.
enum class element : std::uint8_t { f32, bf16, f16 };

constexpr std::string_view element_name(element e) {
  return e == element::bf16 ? "bfloat16" : e == element::f16 ? "float16" : "float32";
}

struct node {
  op kind{};
  std::vector<int> args;
  std::vector<dim> shape;  // row-major, batch excluded
  bool batched = false;    // has the implicit leading batch dim
  std::string_view name;   // terminals: the tensor's name; dim_value: the dim's name
  double value = 0;        // constant's value
  int param = 0;           // placeholder id, unsqueeze axis, product_kind
  element type = element::f32;  // input and weight: the tensor's element type in memory; the root: the output's
  constexpr bool operator==(const node&) const = default;
};

struct graph {
  std::vector<node> nodes;
  int root = -1;
  std::vector<int> terminals;  // call order: inputs, weights, integer inputs; each by first appearance
  // More results after the root, in order (a gradient graph: one per differentiated tensor).
  std::vector<int> more_outputs;

  constexpr const node& at(int i) const { return nodes[static_cast<std::size_t>(i)]; }
  constexpr const node& output() const { return at(root); }
  // Every result: the root, then more_outputs.
  constexpr std::vector<int> outputs() const {
    std::vector<int> o{root};
    o.insert(o.end(), more_outputs.begin(), more_outputs.end());
    return o;
  }
};

// Does some node of g span a dim called `name`, or read its size?
constexpr bool has_dim(const graph& g, std::string_view name) {
  for (const node& n : g.nodes) {
    if (n.kind == op::dim_value && n.name == name) return true;
    for (const dim& d : n.shape)
      if (d.name == name) return true;
  }
  return false;
}

// The names of g's dims sized at run time (quotients follow from theirs), sorted, each once.
inline std::vector<std::string> run_time_dims(const graph& g) {
  std::vector<std::string> names;
  for (const node& n : g.nodes)
    for (const dim& d : n.shape)
      if (d.size == 0 && d.numerator.empty() && std::find(names.begin(), names.end(), d.name) == names.end())
        names.emplace_back(d.name);
  std::sort(names.begin(), names.end());
  return names;
}

// A matmul's product_kind, as it reads to a human and in the cost table.
constexpr std::string_view product_name(const node& matmul) {
  constexpr std::string_view names[] = {"matmul", "project", "combine", "weighted"};
  return names[matmul.param];
}

// Number of elements of a shape, when every dim is static (0 otherwise).
constexpr std::int64_t static_elements(const std::vector<dim>& s) {
  std::int64_t n = 1;
  for (const auto& d : s) n *= d.size;
  return n;
}

// The nodes that normalise their operand (softmax), children first.
constexpr std::vector<int> normalising_nodes(const graph& g) {
  std::vector<int> found;
  for (int i = 0; i < static_cast<int>(g.nodes.size()); ++i)
    if (normalises(g.at(i).kind)) found.push_back(i);
  return found;
}

// The attention weights an expression returns (with_weights): its outermost normalisation, the
// last in node order; -1 if it has none. With a log-sum-exp there is exactly one (the caller checks).
constexpr int weights_softmax(const graph& g) {
  for (int i = static_cast<int>(g.nodes.size()) - 1; i >= 0; --i)
    if (normalises(g.at(i).kind)) return i;
  return -1;
}

// Does n span the same last two dims as `pair` (an attention's weights: its queries and keys)?
constexpr bool spans_pair_of(const node& n, const node& pair) {
  const std::size_t r = n.shape.size(), rp = pair.shape.size();
  return r >= 2 && rp >= 2 && n.shape[r - 2].name == pair.shape[rp - 2].name && n.shape[r - 1].name == pair.shape[rp - 1].name;
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
    s += ")" + std::string(n.name) + ":" + exact_text(n.value) + ":" + std::to_string(n.param) +
         (n.type == element::f32 ? "" : "@" + std::string(element_name(n.type))) + "{";
    for (const auto& d : n.shape)
      s += std::string(d.name) + "=" + std::to_string(d.size) + "/" + std::to_string(static_cast<int>(d.role)) + ",";
    s += "};";
  }
  s += "root=" + std::to_string(g.root);
  for (int o : g.more_outputs) s += "," + std::to_string(o);
  return s;
}

}  // namespace attn::ir
