#include "gradients.hpp"

#include <stdexcept>
#include "dim_bindings.hpp"
#include "dsl/gradient.hpp"
#include "errors.hpp"
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

}  // namespace

gradients run_gradients(const gradient_program& p, std::span<const tensor_view> inputs, const saved* s) {
  const ir::graph& g = p.backward->graph();
  const std::size_t dy = static_cast<std::size_t>(ir::output_gradient_position(g));
  const bool takes_saved = g.terminals.size() > dy + 1;
  std::vector<tensor_view> views(inputs.begin(), inputs.end());
  std::vector<any_tensor> computed;
  if (s != nullptr && !takes_saved)
    throw argument_error("saved: the expression has " + std::to_string(ir::normalising_nodes(p.forward).size()) +
                         " softmaxes, and a saved log-sum-exp is defined for exactly one; call without saved");
  if (s != nullptr) {
    views.insert(views.end(), {s->output, s->lse});
  } else if (takes_saved) {
    computed = saved_for(p, inputs.first(dy));
    for (const any_tensor& t : computed) views.push_back(t.view());
  }
  std::vector<any_tensor> values = p.backward->output_buffers(views);
  std::vector<tensor_view> more;
  for (std::size_t k = 1; k < values.size(); ++k) more.push_back(values[k].view());
  p.backward->run_into(views, values.front().view(), nullptr, nullptr, more);
  gradients d;
  for (std::size_t i = 0; i < dy; ++i) {
    const ir::node& t = g.at(g.terminals[i]);
    if (t.kind == ir::op::int_input) continue;
    any_tensor& v = values[d.names.size()];
    d.names.emplace_back(t.name);
    // A tensor given without its batch dim serves the whole batch: its gradient is the batch's sum.
    const bool shared = t.batched && inputs[i].rank == static_cast<int>(t.shape.size()) && v.view().rank == inputs[i].rank + 1;
    d.values.push_back(shared ? summed_over_batch(v) : std::move(v));
  }
  return d;
}

std::vector<tensor_view> gradient_call(const gradient_program& p, const tensor_view& d_output, std::span<const named_tensor> named) {
  std::vector<tensor_view> views = in_call_order(forward_parameters(*p.backward), named);
  views.push_back(d_output);
  return views;
}

}  // namespace detail
}  // namespace attn
