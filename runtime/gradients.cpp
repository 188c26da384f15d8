#include "gradients.hpp"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include "dim_bindings.hpp"
#include "aliasing.hpp"
#include "dsl/gradient.hpp"
#include "errors.hpp"
#include "halide_buffers.hpp"
#include "tensor_checks.hpp"

namespace attn {

const any_tensor& gradients::at(std::string_view name) const {
  for (std::size_t k = 0; k < names.size(); ++k)
    if (names[k] == name) return values[k];
  std::string known;
  for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
  throw argument_error("no gradient of '" + std::string(name) + "': the float tensors are " + known);
}

namespace detail {

std::shared_ptr<const gradient_program> compile_gradients(const ir::graph& forward, const jit_options& options) {
  if (options.with_weights || options.with_lse) throw argument_error("jit_gradients: with_weights and with_lse do not apply");
  ir::graph g;
  try {
    g = ir::gradient(forward);
  } catch (const std::invalid_argument& e) {
    throw argument_error(e.what());
  }
  return std::make_shared<const gradient_program>(gradient_program{compiled_kernel::get(g, options), forward});
}

std::vector<std::string> forward_parameters(const compiled_kernel& backward) {
  std::vector<std::string> names = backward.parameter_names();
  names.resize(static_cast<std::size_t>(ir::output_gradient_position(backward.graph())));
  return names;
}

namespace {

// What the forward saved, for a call that does not give it: computed by the forward with_lse where
// the backward reads it; else zeros of its shape (read by nothing, only checked).
std::vector<any_tensor> saved_for(const gradient_program& p, std::span<const tensor_view> forward_inputs) {
  const compiled_kernel& k = *p.backward;
  const call_shape call = check_inputs(p.forward, forward_inputs, checked_bindings(p.forward, k.options().bind));
  const ir::graph& g = k.graph();
  std::vector<any_tensor> saved;
  for (std::string_view name : {ir::saved_output_name, ir::saved_lse_name}) {
    const ir::node& t = g.at(ir::saved_tensor(g, name));
    saved.emplace_back(dtype_of(t), result_sizes(t, call));
  }
  if (k.reads(ir::saved_output_name) || k.reads(ir::saved_lse_name)) {
    jit_options o = k.options();
    o.with_lse = true;
    const tensor_view lse = saved[1].view();
    compiled_kernel::get(p.forward, o)->run_into(forward_inputs, saved[0].view(), nullptr, &lse);
  }
  return saved;
}

// The sum of g over its leading (batch) dim, added in batch order in float32, stored in g's type.
any_tensor summed_over_batch(const any_tensor& g) {
  std::vector<std::int64_t> sizes = g.sizes();
  const std::int64_t batch = sizes.front();
  sizes.erase(sizes.begin());
  const std::vector<float> items = g.floats();
  std::vector<float> s(items.size() / static_cast<std::size_t>(std::max<std::int64_t>(batch, 1)));
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::size_t i = 0; i < s.size(); ++i) s[i] += items[static_cast<std::size_t>(b) * s.size() + i];
  return any_tensor(g.type(), std::move(sizes), s);
}

// The backward's tensors: the forward's (`inputs`), dY, then what the forward saved (`s`, or
// computed into `computed` where the backward reads it).
std::vector<tensor_view> backward_inputs(const gradient_program& p, std::span<const tensor_view> inputs, const saved* s,
                                         std::vector<any_tensor>& computed) {
  const ir::graph& g = p.backward->graph();
  const std::size_t dy = static_cast<std::size_t>(ir::output_gradient_position(g));
  const bool takes_saved = g.terminals.size() > dy + 1;
  std::vector<tensor_view> views(inputs.begin(), inputs.end());
  if (s != nullptr && !takes_saved)
    throw argument_error("saved: the expression has " + std::to_string(ir::normalising_nodes(p.forward).size()) +
                         " softmaxes, and a saved log-sum-exp is defined for exactly one; call without saved");
  if (s != nullptr) {
    views.insert(views.end(), {s->output, s->lse});
  } else if (takes_saved) {
    computed = saved_for(p, inputs.first(dy));
    for (const any_tensor& t : computed) views.push_back(t.view());
  }
  return views;
}

// The forward's float tensors (each has a gradient), as positions in its call, in order: the
// backward's results' order.
std::vector<std::size_t> differentiated(const ir::graph& backward) {
  std::vector<std::size_t> positions;
  for (std::size_t i = 0; i < static_cast<std::size_t>(ir::output_gradient_position(backward)); ++i)
    if (backward.at(backward.terminals[i]).kind != ir::op::int_input) positions.push_back(i);
  return positions;
}

// Is input i a tensor given without its batch dim that serves a batched call? Its gradient is
// the sum of the backward's per-item gradients.
bool shared_by_batch(const ir::graph& g, std::span<const tensor_view> inputs, std::size_t i, const call_shape& call) {
  const ir::node& t = g.at(g.terminals[i]);
  return t.batched && call.explicit_batch && inputs[i].rank == static_cast<int>(t.shape.size());
}

}  // namespace

gradients run_gradients(const gradient_program& p, std::span<const tensor_view> inputs, const saved* s) {
  const compiled_kernel& k = *p.backward;
  const ir::graph& g = k.graph();
  std::vector<any_tensor> computed;
  const std::vector<tensor_view> views = backward_inputs(p, inputs, s, computed);
  std::vector<any_tensor> values = k.output_buffers(views);
  std::vector<tensor_view> more;
  for (std::size_t r = 1; r < values.size(); ++r) more.push_back(values[r].view());
  k.run_into(views, values.front().view(), nullptr, nullptr, more);
  const call_shape call = check_inputs(g, views, checked_bindings(g, k.options().bind));
  gradients d;
  for (std::size_t i : differentiated(g)) {
    any_tensor& v = values[d.names.size()];
    d.names.emplace_back(g.at(g.terminals[i]).name);
    d.values.push_back(shared_by_batch(g, inputs, i, call) ? summed_over_batch(v) : std::move(v));
  }
  return d;
}

void gradients_into(const gradient_program& p, std::span<const named_tensor> named_targets, std::span<const tensor_view> inputs,
                    const saved* s) {
  const compiled_kernel& k = *p.backward;
  const ir::graph& g = k.graph();
  const std::vector<std::size_t> positions = differentiated(g);
  std::vector<std::string> names;
  for (std::size_t i : positions) names.emplace_back(g.at(g.terminals[i]).name);
  const std::vector<tensor_view> targets = in_call_order(names, named_targets, "gradients");
  std::vector<any_tensor> computed;
  const std::vector<tensor_view> views = backward_inputs(p, inputs, s, computed);
  const call_shape call = check_inputs(g, views, checked_bindings(g, k.options().bind));
  const std::vector<dtype> types = result_dtypes(g);
  const std::vector<int> result_nodes = g.outputs();
  // Checked here to name the tensors; a shared tensor's per-item gradients go to a buffer of
  // their own first, summed into the caller's once the call succeeds.
  std::vector<std::optional<any_tensor>> per_item(targets.size());
  std::vector<tensor_view> results;
  for (std::size_t r = 0; r < targets.size(); ++r) {
    std::vector<std::int64_t> sizes = result_sizes(g.at(result_nodes[r]), call);
    const bool shared = shared_by_batch(g, inputs, positions[r], call);
    const std::string who = "gradient of '" + names[r] + "'";
    check_output(who.c_str(), targets[r], shared ? std::vector<std::int64_t>(sizes.begin() + 1, sizes.end()) : sizes, types[r]);
    check_no_self_overlap("the " + who, targets[r]);
    for (std::size_t q = 0; q < r; ++q)
      if (may_overlap(targets[q], targets[r]))
        throw argument_error("the gradients of '" + names[q] + "' and '" + names[r] + "' overlap in memory");
    if (shared) per_item[r].emplace(types[r], std::move(sizes));
    results.push_back(shared ? per_item[r]->view() : targets[r]);
  }
  k.run_into(views, results.front(), nullptr, nullptr, std::span(results).subspan(1));
  for (std::size_t r = 0; r < targets.size(); ++r)
    if (shared_by_batch(g, inputs, positions[r], call)) strided_copy(summed_over_batch(*per_item[r]).view(), targets[r]);
}

std::vector<tensor_view> gradient_call(const gradient_program& p, const tensor_view& d_output, std::span<const named_tensor> named) {
  std::vector<tensor_view> views = in_call_order(forward_parameters(*p.backward), named);
  views.push_back(d_output);
  return views;
}

}  // namespace detail
}  // namespace attn
