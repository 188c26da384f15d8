#pragma once
// Reverse-mode differentiation on the IR: an expression's graph -> its gradient graph, which
// computes d(sum(dY ∘ y))/dt for every float tensor t the expression reads (inputs, weights and
// tables read by gather), from the same tensors and dY. The gradient graph is an ir::graph like
// any other: printed, costed and lowered by the same code as the forward.
//
// Why on the IR and not with Halide's propagate_adjoints: the rules below are said once per op
// and stay Halide-free; the fused backward reuses them (a modifier's derivative is IR too); the
// masks' zero gradient and the NaN-free products are explicit rules here rather than properties
// of a derived Halide pipeline.
//
// The graph keeps the forward's nodes (same indices) and appends the adjoints. Its terminals are
// the forward's, then `d_output` (dY, shaped like y), then, where the forward has exactly one
// softmax, what the forward saved: `output` (y) and `lse` (the softmax's log-sum-exp per row,
// shaped like the softmax without its key axis). The saved tensors are read by a lowering that
// can use them (the fused backward: P from the lse, rowsum(dY ∘ y)) and ignored by one that
// recomputes. Its outputs (root, then more_outputs) are the gradients of the forward's float
// tensors in call order, each shaped like its tensor (a weight's gradient is summed over the batch)
// and stored in its type; dY is in the output's type.
//
// Non-differentiable points follow PyTorch: relu'(0) = 0, abs'(0) = 0, min/max split a tie's
// gradient evenly, comparisons, logical ops and floor division pass none, gather's indices none.
// A masked score gets exactly 0 (select, not a product), and every product by a score's gradient
// is `weighted` (product_kind): 0 where a mask removed the pair, even against a NaN or inf value.
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>
#include "ir.hpp"

namespace attn::ir {

// The output's gradient dY in a gradient graph's call: the first tensor after the forward's.
inline constexpr std::string_view output_gradient_name = "d_output";
// What the forward saved, after dY (for a forward with exactly one softmax).
inline constexpr std::string_view saved_output_name = "output";
inline constexpr std::string_view saved_lse_name = "lse";

namespace detail {

inline constexpr dim unit_dim{"1", 1, dim_role::unit, {}, {}, 0, 0};

class differentiator {
 public:
  explicit differentiator(const graph& f) : f_(f), g_(f), pending_(f.nodes.size()) {
    placeholders_.resize(f.nodes.size());
    tensors_.resize(f.nodes.size());
    score_.resize(f.nodes.size());
    for (std::size_t i = 0; i < f.nodes.size(); ++i) {
      const node& n = f.nodes[i];
      placeholders_[i] = n.kind == op::placeholder;
      score_[i] = n.kind == op::placeholder && n.param == static_cast<int>(placeholder::score);
      tensors_[i] = n.kind == op::input || n.kind == op::weight;
      for (int a : n.args) {
        placeholders_[i] = placeholders_[i] || placeholders_[static_cast<std::size_t>(a)];
        score_[i] = score_[i] || score_[static_cast<std::size_t>(a)];
        tensors_[i] = tensors_[i] || tensors_[static_cast<std::size_t>(a)];
      }
    }
  }

  graph run() {
    const bool saves = normalising_nodes(f_).size() == 1;
    for (int t : f_.terminals) {
      const std::string_view name = f_.at(t).name;
      if (name == output_gradient_name || (saves && (name == saved_output_name || name == saved_lse_name)))
        throw std::invalid_argument("gradient: a tensor is named '" + std::string(name) +
                                    "', a name the gradient's call gives to " +
                                    (name == output_gradient_name ? "the output's gradient" : "what the forward saved") +
                                    "; rename it");
    }
    node dy;
    dy.kind = op::input;
    dy.shape = f_.output().shape;
    dy.batched = f_.output().batched;
    dy.name = output_gradient_name;
    dy.type = f_.output().type;  // in the output's type
    const int d_output = add(dy);
    contribute(f_.root, d_output);
    for (int i = static_cast<int>(f_.nodes.size()) - 1; i >= 0; --i)
      if (!pending_[static_cast<std::size_t>(i)].empty() && !is_terminal(f_.at(i).kind)) backprop(i, adjoint(i));
    std::vector<int> outputs;
    for (int t : f_.terminals)
      if (f_.at(t).kind != op::int_input) outputs.push_back(pending_[static_cast<std::size_t>(t)].empty() ? zeros(t) : adjoint(t));
    if (outputs.empty()) throw std::invalid_argument("gradient: the expression reads no float tensor");
    g_.terminals.push_back(d_output);
    if (saves) {
      node y;
      y.kind = op::input;
      y.shape = f_.output().shape;
      y.batched = f_.output().batched;
      y.name = saved_output_name;
      y.type = f_.output().type;  // as the forward stored it
      g_.terminals.push_back(add(y));
      node lse;
      lse.kind = op::input;
      lse.shape = f_.at(normalising_nodes(f_).front()).shape;
      lse.shape.pop_back();
      lse.batched = f_.at(normalising_nodes(f_).front()).batched;
      lse.name = saved_lse_name;
      g_.terminals.push_back(add(lse));
    }
    g_.root = outputs.front();
    g_.more_outputs.assign(outputs.begin() + 1, outputs.end());
    return std::move(g_);
  }

 private:
  const node& at(int i) const { return g_.at(i); }
  bool reads_placeholders(int i) const { return i < std::ssize(placeholders_) && placeholders_[static_cast<std::size_t>(i)]; }
  bool reads_tensors(int i) const { return i < std::ssize(tensors_) && tensors_[static_cast<std::size_t>(i)]; }
  bool reads_score(int i) const { return i < std::ssize(score_) && score_[static_cast<std::size_t>(i)]; }

  // A node equal to one the graph has (the same op on the same operands: the same values) is that
  // one: a transpose or product the rules ask for twice is computed once.
  int add(node n) {
    for (std::size_t i = 0; i < g_.nodes.size(); ++i)
      if (g_.nodes[i] == n && !is_terminal(n.kind)) return static_cast<int>(i);
    g_.nodes.push_back(std::move(n));
    return static_cast<int>(g_.nodes.size()) - 1;
  }

  // Shapes broadcast from the right; a unit axis takes the other's dim.
  static std::vector<dim> broadcast(const std::vector<dim>& a, const std::vector<dim>& b) {
    const std::vector<dim>& longer = a.size() >= b.size() ? a : b;
    const std::vector<dim>& shorter = a.size() >= b.size() ? b : a;
    std::vector<dim> s = longer;
    const std::size_t off = longer.size() - shorter.size();
    for (std::size_t k = 0; k < shorter.size(); ++k)
      if (s[off + k].role == dim_role::unit) s[off + k] = shorter[k];
    return s;
  }

  int elementwise(op kind, std::vector<int> args) {
    node n;
    n.kind = kind;
    for (int a : args) {
      n.shape = broadcast(n.shape, at(a).shape);
      n.batched = n.batched || at(a).batched;
    }
    n.args = std::move(args);
    return add(std::move(n));
  }
  int constant(double v) {
    node n;
    n.kind = op::constant;
    n.value = v;
    return add(std::move(n));
  }
  int shaped(op kind, std::vector<int> args, std::vector<dim> shape, bool batched, int param = 0) {
    node n;
    n.kind = kind;
    n.args = std::move(args);
    n.shape = std::move(shape);
    n.batched = batched;
    n.param = param;
    return add(std::move(n));
  }
  int zeros(int like) { return shaped(op::constant, {}, at(like).shape, at(like).batched); }

  int neg(int a) { return elementwise(op::neg, {a}); }
  int mul(int a, int b) { return elementwise(op::mul, {a, b}); }
  int div(int a, int b) { return elementwise(op::div, {a, b}); }
  int sub(int a, int b) { return elementwise(op::sub, {a, b}); }
  int select(int c, int a, int b) { return elementwise(op::select, {c, a, b}); }
  int where(int c, int a) { return select(c, a, constant(0)); }  // a where c holds, else exactly 0
  // w·x, but exactly 0 where w is 0 (a masked probability), whatever x is.
  int weighted(int w, int x) { return select(elementwise(op::eq, {w, constant(0)}), constant(0), mul(w, x)); }
  int bind(int scores, int e) { return shaped(op::bind, {scores, e}, at(scores).shape, at(scores).batched || at(e).batched); }
  int store(int x) { return is_materialised(at(x).kind) || is_terminal(at(x).kind) ? x : shaped(op::store, {x}, at(x).shape, at(x).batched); }

  int transposed(int x) {
    const node& n = at(x);
    if (n.kind == op::transpose) return n.args[0];
    std::vector<dim> s = n.shape;
    std::swap(s[s.size() - 1], s[s.size() - 2]);
    return shaped(op::transpose, {x}, std::move(s), n.batched);
  }
  int unsqueezed(int x, std::size_t axis) {
    std::vector<dim> s = at(x).shape;
    s.insert(s.begin() + static_cast<std::ptrdiff_t>(axis), unit_dim);
    return shaped(op::unsqueeze, {x}, std::move(s), at(x).batched, static_cast<int>(axis));
  }
  // a·b with the forward's broadcasting of leading dims: (.., M, K)·(.., K, N), or a vector side.
  int product(int a, int b, product_kind kind) {
    const auto &sa = at(a).shape, &sb = at(b).shape;
    std::vector<dim> s;
    if (sb.size() == 1) s.assign(sa.begin(), sa.end() - 1);
    else if (sa.size() == 1) s.assign(sb.begin(), sb.end() - 2), s.push_back(sb.back());
    else {
      s = broadcast(std::vector<dim>(sa.begin(), sa.end() - 2), std::vector<dim>(sb.begin(), sb.end() - 2));
      s.push_back(sa[sa.size() - 2]);
      s.push_back(sb.back());
    }
    return shaped(op::matmul, {a, b}, std::move(s), at(a).batched || at(b).batched, static_cast<int>(kind));
  }

  void contribute(int i, int c) { pending_[static_cast<std::size_t>(i)].push_back(c); }

  // Node i's adjoint: its contributions summed, each first reduced to i's shape where it broadcasts
  // past it (sum_to over the broadcast axes and the batch).
  int adjoint(int i) {
    const node& n = f_.at(i);
    int total = -1;
    for (int c : pending_[static_cast<std::size_t>(i)]) {
      if (at(c).shape != n.shape || at(c).batched != n.batched) c = shaped(op::sum_to, {c}, n.shape, n.batched);
      total = total < 0 ? c : elementwise(op::add, {total, c});
    }
    pending_[static_cast<std::size_t>(i)] = {total};
    return total;
  }

  // The contributions of an elementwise node i with adjoint a to its operands, as (operand, value).
  std::vector<std::pair<int, int>> elementwise_rule(int i, int a) {
    const node& n = f_.at(i);
    const int x = n.args.empty() ? -1 : n.args[0], y = n.args.size() > 1 ? n.args[1] : -1;
    auto tie = [&](op wins) {  // max/min: the winner takes it all, a tie splits it evenly
      const int half = mul(a, constant(0.5));
      return std::vector<std::pair<int, int>>{
          {x, select(elementwise(wins, {x, y}), a, where(elementwise(op::eq, {x, y}), half))},
          {y, select(elementwise(wins, {y, x}), a, where(elementwise(op::eq, {x, y}), half))}};
    };
    switch (n.kind) {
      case op::neg: return {{x, neg(a)}};
      case op::tanh: return {{x, mul(a, sub(constant(1), mul(i, i)))}};
      case op::exp: return {{x, mul(a, i)}};
      case op::log: return {{x, div(a, x)}};
      case op::abs:
        return {{x, select(elementwise(op::gt, {x, constant(0)}), a, where(elementwise(op::lt, {x, constant(0)}), neg(a)))}};
      case op::sqrt: return {{x, div(mul(a, constant(0.5)), i)}};
      case op::rsqrt: return {{x, mul(a, div(mul(i, constant(-0.5)), x))}};
      case op::sigmoid: return {{x, mul(a, mul(i, sub(constant(1), i)))}};
      case op::relu: return {{x, where(elementwise(op::gt, {x, constant(0)}), a)}};
      case op::add: return {{x, a}, {y, a}};
      case op::sub: return {{x, a}, {y, neg(a)}};
      case op::mul: return {{x, mul(a, y)}, {y, mul(a, x)}};
      case op::div: return {{x, div(a, y)}, {y, neg(div(mul(a, i), y))}};
      case op::mod: return {{x, a}, {y, neg(mul(a, elementwise(op::floor_div, {x, y})))}};
      case op::maximum: return tie(op::gt);
      case op::minimum: return tie(op::lt);
      case op::select: return {{y, where(n.args[0], a)}, {n.args[2], select(n.args[0], constant(0), a)}};
      case op::floor_div: case op::lt: case op::le: case op::gt: case op::ge: case op::eq: case op::ne:
      case op::logical_and: case op::logical_or: case op::logical_not:
        return {};  // piecewise constant, or not a number
      default: throw std::logic_error("gradient: " + std::string(op_name(n.kind)) + " is not elementwise");
    }
  }

  // The masks under a modifier's scores: the modifier's result is -inf where they remove the pair
  // (lowering: modify(mask(S, p), f) runs as mask(modify(S, f), p)), so f gets no gradient there.
  std::vector<int> masks_under(int scores) const {
    std::vector<int> masks;
    for (int s = scores; f_.at(s).kind == op::mask; s = f_.at(s).args[0]) masks.push_back(s);
    return masks;
  }

  // Inside a modifier's f (the nodes that read placeholders), adjoints are values at each score's
  // index, evaluated under bind(scores, ...) where they leave f: into the scores, into a tensor
  // or other node outside f (then reduced to its shape), into a gathered table (scatter_add).
  void backprop_modifier(int scores, int f, int a) {
    std::vector<std::vector<int>> local(f_.nodes.size());
    auto route = [&](int to, int value) {
      if (!reads_tensors(to) && !reads_score(to)) return;
      if (reads_placeholders(to)) local[static_cast<std::size_t>(to)].push_back(value);
      else contribute(to, bind(scores, value));
    };
    for (int m : masks_under(scores)) a = where(f_.at(m).args[1], a);
    route(f, a);
    for (int i = f; i >= 0; --i) {
      const std::vector<int>& parts = local[static_cast<std::size_t>(i)];
      if (parts.empty()) continue;
      int total = parts.front();
      for (std::size_t k = 1; k < parts.size(); ++k) total = elementwise(op::add, {total, parts[k]});
      const node& n = f_.at(i);
      if (n.kind == op::placeholder) {
        if (n.param == static_cast<int>(placeholder::score)) contribute(scores, bind(scores, total));
      } else if (n.kind == op::gather) {
        gather_adjoint(i, bind(scores, total));
      } else if (is_elementwise(n.kind) && n.kind != op::mask && n.kind != op::modify) {
        for (const auto& [to, value] : elementwise_rule(i, total)) route(to, value);
      } else {
        throw std::invalid_argument("gradient: " + std::string(op_name(n.kind)) + " inside a score modifier is not differentiable");
      }
    }
  }

  // gather(table, indices...) with adjoint c (at the indices' domain): c added into the table.
  void gather_adjoint(int i, int c) {
    const node& n = f_.at(i);
    const int table = n.args[0];
    if (f_.at(table).kind == op::int_input) return;
    for (std::size_t k = 1; k < n.args.size(); ++k)
      if (reads_score(n.args[k])) throw std::invalid_argument("gradient: a gather index reads the score");
    std::vector<int> args{c};
    args.insert(args.end(), n.args.begin() + 1, n.args.end());
    contribute(table, shaped(op::scatter_add, std::move(args), f_.at(table).shape, f_.at(table).batched));
  }

  void backprop_product(int i, int a) {
    const node& n = f_.at(i);
    const int x = n.args[0], y = n.args[1];
    const std::size_t rx = f_.at(x).shape.size(), ry = f_.at(y).shape.size();
    a = store(a);
    if (rx >= 2 && ry >= 2) {  // (.., M, K)·(.., K, N)
      if (reads_tensors(x)) contribute(x, product(a, transposed(y), product_kind::weighted));
      if (reads_tensors(y)) contribute(y, product(transposed(x), a, product_kind::matmul));
    } else if (ry == 1 && rx >= 2) {  // (.., M, K)·(K) -> (.., M): dx = a ⊗ y, dy = Σ_{.., M} x ∘ a
      const int column = unsqueezed(a, n.shape.size());
      if (reads_tensors(x)) contribute(x, mul(column, y));
      if (reads_tensors(y)) contribute(y, mul(x, column));
    } else if (rx == 1 && ry >= 2) {  // (K)·(.., K, N) -> (.., N): dx = Σ_{..} y·a, dy = x ⊗ a
      if (reads_tensors(x)) contribute(x, mul(transposed(y), unsqueezed(a, n.shape.size())));  // (.., N, K), summed to (K)
      if (reads_tensors(y)) contribute(y, mul(unsqueezed(x, 1), unsqueezed(a, n.shape.size() - 1)));
    } else {  // (K)·(K) -> a scalar
      if (reads_tensors(x)) contribute(x, mul(a, y));
      if (reads_tensors(y)) contribute(y, mul(a, x));
    }
  }

  // y = softmax(x) over the last axis: dx = y ∘ (dy - Σ_row y ∘ dy), exactly 0 where y is 0.
  void backprop_softmax(int i, int a) {
    const node& n = f_.at(i);
    std::vector<dim> row = n.shape;
    row.back() = unit_dim;
    const int dot = shaped(op::sum_to, {weighted(i, a)}, std::move(row), n.batched);
    contribute(n.args[0], weighted(i, sub(a, dot)));
  }

  void backprop(int i, int a) {
    const node& n = f_.at(i);
    auto pass = [&](int to, int value) {
      if (reads_tensors(to)) contribute(to, value);
    };
    const int x = n.args.empty() ? -1 : n.args[0];
    switch (n.kind) {
      case op::input: case op::weight: case op::int_input: case op::constant: case op::dim_value: case op::placeholder:
        return;
      case op::matmul: return backprop_product(i, a);
      case op::softmax: return backprop_softmax(i, a);
      case op::transpose: return pass(x, transposed(a));
      case op::mask: return pass(x, bind(x, where(n.args[1], a)));
      case op::modify: return backprop_modifier(x, n.args[1], a);
      case op::split_heads: return pass(x, shaped(op::concat_heads, {a}, f_.at(x).shape, f_.at(x).batched));
      case op::concat_heads: return pass(x, shaped(op::split_heads, {a}, f_.at(x).shape, f_.at(x).batched));
      case op::repeat_heads: return pass(x, shaped(op::sum_groups, {a}, f_.at(x).shape, f_.at(x).batched));
      case op::unsqueeze: return pass(x, shaped(op::squeeze, {a}, f_.at(x).shape, f_.at(x).batched, n.param));
      case op::gather: return gather_adjoint(i, a);
      case op::bind: case op::sum_to: case op::sum_groups: case op::squeeze: case op::scatter_add: case op::store:
        throw std::logic_error("gradient: " + std::string(op_name(n.kind)) + " in an expression");
      default:
        for (const auto& [to, value] : elementwise_rule(i, a)) pass(to, value);
    }
  }

  const graph& f_;
  graph g_;
  std::vector<std::vector<int>> pending_;  // contributions to each forward node's adjoint
  std::vector<char> placeholders_;         // the node reads a placeholder (it lies inside a mask or modifier)
  std::vector<char> tensors_;              // the node reads a float tensor (a gradient may flow to it)
  std::vector<char> score_;                // the node reads the placeholder `score`
};

}  // namespace detail

// The position of the output's gradient among g's terminals, or -1 (g is not a gradient graph).
constexpr int output_gradient_position(const graph& g) {
  for (std::size_t k = 0; k < g.terminals.size(); ++k)
    if (g.at(g.terminals[k]).name == output_gradient_name && g.at(g.terminals[k]).kind == op::input) return static_cast<int>(k);
  return -1;
}

// Is g a gradient graph (dY among its tensors)?
constexpr bool is_gradient(const graph& g) { return output_gradient_position(g) >= 0; }

// The element type each result of g is stored in, in g.outputs()'s order: the expression's
// output type (the root's); in a gradient graph each gradient its tensor's type.
constexpr std::vector<element> result_types(const graph& g) {
  std::vector<element> types;
  const int dy = output_gradient_position(g);
  if (dy < 0) {
    types.assign(1 + g.more_outputs.size(), element::f32);
    types.front() = g.output().type;
    return types;
  }
  for (int k = 0; k < dy; ++k)
    if (const node& t = g.at(g.terminals[static_cast<std::size_t>(k)]); t.kind != op::int_input) types.push_back(t.type);
  return types;
}

// A tensor the forward saved (saved_output_name, saved_lse_name) in a gradient graph, or -1.
constexpr int saved_tensor(const graph& g, std::string_view name) {
  const int dy = output_gradient_position(g);
  if (dy < 0) return -1;
  for (std::size_t k = static_cast<std::size_t>(dy) + 1; k < g.terminals.size(); ++k)
    if (g.at(g.terminals[k]).name == name) return g.terminals[k];
  return -1;
}

// The gradient graph of f (see above). Throws std::invalid_argument where f cannot be
// differentiated (a gather index that reads the score, a tensor named d_output).
inline graph gradient(const graph& f) { return detail::differentiator(f).run(); }

}  // namespace attn::ir
