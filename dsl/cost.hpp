#pragma once
// The cost model: for each step of an expression, its work in the seeds' units (multiply-adds
// for products, elements for softmax and elementwise steps), FLOPs and bytes, as polynomials in
// the dims, per batch element. Everything is constexpr: static_assert(cost(y).at(T = 5).flops == ...).
//   FLOPs: a multiply-add is 2; softmax is 5 per element (max, subtract, exp, sum, divide);
//   every other elementwise op is 1. Layout steps (transpose, heads) cost nothing.
//   Bytes: float32; a step reads its operands and writes its result (no fusion assumed);
//   the expression's total is the compulsory traffic: its tensors in, its result out.
#include <string>
#include <vector>
#include "polynomial.hpp"
#include "to_ir.hpp"

namespace attn::dsl {

struct cost_step {
  std::string_view label; // "project", "matmul", "scale", "softmax", "combine", ...
  polynomial work;        // seeds' units
  polynomial flops;
  polynomial bytes;
  std::int64_t heads = 1; // > 1 when the step runs once per head
};

struct step_value {
  std::string_view label;
  double work, per_head_work, flops, bytes;
};

struct cost_values {
  double work = 0, flops = 0, bytes = 0;
  std::vector<step_value> steps;
};

struct cost_report {
  std::vector<cost_step> steps;
  polynomial compulsory_bytes;
  std::vector<ir::dim> quotients;  // D/H dims: D·H⁻¹ >= 1, used by big_o

  constexpr polynomial work() const { return sum(&cost_step::work); }
  constexpr polynomial flops() const { return sum(&cost_step::flops); }
  constexpr polynomial bytes() const { return compulsory_bytes; }

  template <class... B>
  constexpr cost_values at(const B&... b) const {
    cost_values v;
    for (const cost_step& s : steps) {
      double w = s.work.at(b...);
      v.steps.push_back({s.label, w, w / static_cast<double>(s.heads), s.flops.at(b...), s.bytes.at(b...)});
      v.work += w;
      v.flops += v.steps.back().flops;
    }
    v.bytes = compulsory_bytes.at(b...);
    return v;
  }

 private:
  constexpr polynomial sum(polynomial cost_step::*field) const {
    polynomial p;
    for (const cost_step& s : steps) p += s.*field;
    return p;
  }
};

namespace detail {

constexpr std::string_view step_label(const ir::graph& g, const ir::node& n) {
  using ir::op;
  switch (n.kind) {
    case op::matmul: return ir::product_name(n);
    case op::mul:
      for (int a : n.args)
        if (g.at(a).shape.empty()) return "scale";
      return "mul";
    default: return ir::op_name(n.kind);
  }
}

// Elementwise ops inside a mask predicate or score modifier run once per score.
constexpr int count_elementwise(const ir::graph& g, int i) {
  const ir::node& n = g.at(i);
  int c = ir::is_elementwise(n.kind) ? 1 : 0;
  for (int a : n.args) c += count_elementwise(g, a);
  return c;
}

constexpr std::int64_t heads_in(const std::vector<ir::dim>& shape) {
  for (const auto& d : shape)
    if (d.role == dim_role::heads) return d.size;
  return 1;
}

// float32 and int32 are both 4 bytes.
constexpr polynomial bytes_of(const std::vector<ir::dim>& shape) { return monomial(4, shape); }

constexpr void mark_subtree(const ir::graph& g, int i, std::vector<char>& inside) {
  if (inside[static_cast<std::size_t>(i)]) return;  // and so is everything below it: each node once
  inside[static_cast<std::size_t>(i)] = true;
  for (int a : g.at(i).args) mark_subtree(g, a, inside);
}

}  // namespace detail

constexpr cost_report cost(const ir::graph& g) {
  using ir::op;
  cost_report r;
  // vector<char>, not vector<bool>: Clang (14 at least) rejects libstdc++ 12's constexpr vector<bool>
  // ("assignment to object outside its lifetime"), so static_assert(cost(y)...) did not compile.
  std::vector<char> inside(g.nodes.size(), 0), computed(g.nodes.size(), 0);
  for (const ir::node& n : g.nodes)
    if (n.kind == op::mask || n.kind == op::modify) detail::mark_subtree(g, n.args[1], inside);
  // Only what the outputs need (a gradient graph keeps forward nodes it does not read).
  for (int o : g.outputs()) detail::mark_subtree(g, o, computed);
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::node& n = g.nodes[i];
    if (!computed[i]) continue;
    for (const auto& d : n.shape)
      if (!d.numerator.empty() && std::find(r.quotients.begin(), r.quotients.end(), d) == r.quotients.end())
        r.quotients.push_back(d);
    if (inside[i] || n.shape.empty() || ir::is_terminal(n.kind)) continue;
    polynomial elements = monomial(1, n.shape);
    cost_step s{detail::step_label(g, n), {}, {}, {}, detail::heads_in(n.shape)};
    if (n.kind == op::matmul) {
      std::vector<ir::dim> dims = n.shape;
      dims.push_back(g.at(n.args[0]).shape.back());  // the contracted dim
      s.work = monomial(1, dims);
      s.flops = s.work * 2;
    } else if (n.kind == op::softmax) {
      s.work = elements;
      s.flops = elements * 5;
    } else if (n.kind == op::sum_to || n.kind == op::sum_groups || n.kind == op::scatter_add) {
      s.work = monomial(1, g.at(n.args[0]).shape);  // one addition per element summed
      s.flops = s.work;
    } else if (ir::is_elementwise(n.kind)) {
      // A mask costs its predicate's ops plus the select to -inf; a modifier replaces each
      // score by f, so it costs f's ops only.
      s.work = elements;
      if (n.kind == op::mask) s.flops = elements * (detail::count_elementwise(g, n.args[1]) + 1);
      else if (n.kind == op::modify) s.flops = elements * detail::count_elementwise(g, n.args[1]);
      else s.flops = elements;
    } else {
      continue;  // layout only: transpose, split/concat/repeat heads, unsqueeze, squeeze, store
    }
    for (int a : n.args) s.bytes += detail::bytes_of(g.at(a).shape);
    s.bytes += detail::bytes_of(n.shape);
    r.steps.push_back(std::move(s));
  }
  for (int t : g.terminals) r.compulsory_bytes += detail::bytes_of(g.at(t).shape);
  for (int o : g.outputs()) r.compulsory_bytes += detail::bytes_of(g.at(o).shape);
  return r;
}

template <well_shaped_expression E>
constexpr cost_report cost(const E& e) {
  return cost(to_ir(e));
}
// Reports a shape error itself (one step from the caller's line), then does not call to_ir.
template <fixed_string M>
constexpr cost_report cost(const shaped<shape_error<M>>&) {
  static_assert(well_shaped<reported_t<shape_error<M>>>, "attn shape error: the message is in shape_error<...>");
  return {};
}

}  // namespace attn::dsl

#include "cost_text.hpp"
