#include "gradients.hpp"

#include <stdexcept>
#include "dsl/gradient.hpp"
#include "errors.hpp"

namespace attn {

const tensor<float>& gradients::operator[](std::string_view name) const {
  for (std::size_t k = 0; k < names.size(); ++k)
    if (names[k] == name) return values[k];
  std::string known;
  for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
  throw argument_error("no gradient of '" + std::string(name) + "': the float tensors are " + known);
}

namespace detail {

std::shared_ptr<const compiled_kernel> compile_gradients(const ir::graph& forward, const jit_options& options) {
  if (options.with_weights || options.with_lse) throw argument_error("jit_gradients: with_weights and with_lse do not apply");
  ir::graph g;
  try {
    g = ir::gradient(forward);
  } catch (const std::invalid_argument& e) {
    throw argument_error(e.what());
  }
  return compiled_kernel::get(g, options);
}

namespace {

// The sum of g over its leading (batch) dim, added in batch order.
tensor<float> summed_over_batch(const tensor<float>& g) {
  std::vector<std::int64_t> sizes = g.sizes();
  const std::int64_t batch = sizes.front();
  sizes.erase(sizes.begin());
  tensor<float> s(sizes);
  const std::size_t n = s.values().size();
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::size_t i = 0; i < n; ++i) s.values()[i] += g.values()[static_cast<std::size_t>(b) * n + i];
  return s;
}

}  // namespace

gradients run_gradients(const compiled_kernel& k, std::span<const tensor_view> inputs) {
  const ir::graph& g = k.graph();
  outputs out = k.run(inputs);
  std::vector<tensor<float>> values{std::move(out.output)};
  for (tensor<float>& m : out.more) values.push_back(std::move(m));
  gradients d;
  for (std::size_t i = 0; i + 1 < g.terminals.size(); ++i) {  // the last terminal is dY
    const ir::node& t = g.at(g.terminals[i]);
    if (t.kind == ir::op::int_input) continue;
    tensor<float>& v = values[d.names.size()];
    d.names.emplace_back(t.name);
    // A tensor given without its batch dim serves the whole batch: its gradient is the batch's sum.
    const bool shared = t.batched && inputs[i].rank == static_cast<int>(t.shape.size()) && v.rank() == inputs[i].rank + 1;
    d.values.push_back(shared ? summed_over_batch(v) : std::move(v));
  }
  return d;
}

std::vector<tensor_view> gradient_call(const compiled_kernel& k, const tensor_view& d_output, std::span<const named_tensor> named) {
  std::vector<std::string> forward = k.parameter_names();
  forward.pop_back();  // d_output, given apart
  std::vector<tensor_view> views = in_call_order(forward, named);
  views.push_back(d_output);
  return views;
}

}  // namespace detail
}  // namespace attn
