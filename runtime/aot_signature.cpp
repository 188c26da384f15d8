#include "aot_signature.hpp"

#include "dim_bindings.hpp"
#include "dsl/gradient.hpp"
#include "errors.hpp"
#include "lowering_choice.hpp"
#include "tensor_checks.hpp"

namespace attn::detail {

namespace {

aot_tensor tensor_of(const ir::node& n, std::string name, bool output, const dim_sizes& bound) {
  aot_tensor t{.name = std::move(name), .output = output, .type = dtype_of(n), .batched = n.batched, .dims = {}, .note = {}};
  for (const ir::dim& d : n.shape) {
    aot_dim a{.name = std::string(d.name), .size = d.size, .by = aot_dim::set_by::expression};
    if (d.size == 0) {
      const auto b = bound.find(d.name);
      a.size = b == bound.end() ? 0 : b->second;
      a.by = b == bound.end() ? aot_dim::set_by::caller : aot_dim::set_by::binding;
    }
    t.dims.push_back(a);
  }
  return t;
}

}  // namespace

std::vector<aot_tensor> aot_signature(const ir::graph& g, const aot::options& o) {
  const dim_sizes bound = checked_bindings(g, o.bind);
  std::vector<aot_tensor> s;
  for (int t : g.terminals) s.push_back(tensor_of(g.at(t), std::string(g.at(t).name), false, bound));
  if (const int dy = ir::output_gradient_position(g); dy >= 0) {
    s[static_cast<std::size_t>(dy)].note = "the output's gradient";
    for (std::size_t k = static_cast<std::size_t>(dy) + 1; k < s.size(); ++k)
      s[k].note = s[k].name == ir::saved_lse_name ? "the forward's log-sum-exp (its lse output); read by the fused backward"
                                                  : "the forward's output; read by the fused backward";
    // d_<name> for each float tensor of the forward, in order (the graph's outputs).
    const std::vector<int> outputs = g.outputs();
    const std::vector<dtype> types = result_dtypes(g);
    std::size_t next = 0;
    for (int k = 0; k < dy; ++k) {
      const ir::node& t = g.at(g.terminals[static_cast<std::size_t>(k)]);
      if (t.kind == ir::op::int_input) continue;
      s.push_back(tensor_of(g.at(outputs[next]), "d_" + std::string(t.name), true, bound));
      s.back().type = types[next++];
      s.back().note = "the gradient of " + std::string(t.name);
    }
    return s;
  }
  s.push_back(tensor_of(g.output(), "output", true, bound));
  if (o.with_weights) {
    const int w = ir::weights_softmax(g);
    if (w < 0) throw argument_error("with_weights: the expression has no softmax");
    s.push_back(tensor_of(g.at(w), "weights", true, bound));
    s.back().note = "the attention weights";
  }
  if (o.with_lse) {
    ir::node rows = g.at(lse_softmax(g));  // argument_error unless exactly one softmax
    rows.shape.pop_back();
    s.push_back(tensor_of(rows, "lse", true, bound));
    s.back().note = "each row's log-sum-exp of its kept scores; -inf for a row without one";
  }
  return s;
}

}  // namespace attn::detail
