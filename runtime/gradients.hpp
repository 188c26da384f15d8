#pragma once
// attn::jit_gradients(expr [, options]): the backward pass of any expression, derived from it
// (dsl/gradient.hpp), compiled once, then called with the output's gradient, what the forward
// saved, and the forward's tensors:
//   auto forward = attn::jit(y, {.with_lse = true});
//   auto grad = attn::jit_gradients(y);
//   auto o = forward.run(x, wq, wk, wv);                                   // o.output, o.lse
//   attn::gradients d = grad(dy, attn::saved{o.output, o.lse}, x, wq, wk, wv);
//   d["wq"], d["x"]                                  // d(sum(dy ∘ y)) / d(tensor)
// Each gradient is in its tensor's element type (d.get<attn::bfloat16>("k") for a bf16 one), and
// dy in the output's.
// Without `saved` (grad(dy, x, wq, wk, wv), or by name: grad(dy, {{"x", x}, ...})) the call
// computes them first where the backward reads them: one forward more.
// A training loop that keeps its gradient buffers has them written in place, nothing allocated:
//   grad.into({{"x", dx}, {"wq", dwq}, {"wk", dwk}, {"wv", dwv}}, dy, attn::saved{o.output, o.lse}, x, wq, wk, wv);
// One gradient per float tensor the expression reads (inputs, weights, tables read by gather),
// shaped like it; a weight's is summed over the batch; integer tensors get none.
#include <array>
#include <concepts>
#include <memory>
#include <string>
#include <string_view>
#include <vector>
#include "dsl/dsl.hpp"
#include "kernel.hpp"
#include "named_call.hpp"

namespace attn {

// The gradients of one call: names[k]'s gradient is values[k], in the expression's call order,
// each in its tensor's element type (float32, or bfloat16 / float16 as declared; computed in
// float32, rounded once as stored).
struct gradients {
  std::vector<std::string> names;
  std::vector<any_tensor> values;

  // The gradient of the tensor called `name` (argument_error if the expression has no such float tensor).
  const any_tensor& at(std::string_view name) const;
  // ... as a tensor of its element type T (a dtype_error naming it for another T).
  template <class T>
  const tensor<T>& get(std::string_view name) const {
    const any_tensor& g = at(name);
    if (g.type() != dtype_of<T>())
      throw dtype_error("the gradient of '" + std::string(name) + "' is " + dtype_name(g.type()) + ", read as " + dtype_name(dtype_of<T>()));
    return g.as<T>();
  }
  // The gradient of a float32 tensor.
  const tensor<float>& operator[](std::string_view name) const { return get<float>(name); }
  std::size_t size() const { return values.size(); }
};

// What the forward saved for its backward: its output and each row's log-sum-exp (a kernel
// compiled with_lse gives both: outputs::output, outputs::lse). An expression with exactly one
// softmax takes them; the fused backward reads P = exp(S - lse) and rowsum(dY ∘ y) from them
// instead of recomputing the forward (the generic backward checks their shapes and recomputes).
struct saved {
  tensor_view output;
  tensor_view lse;
};

namespace detail {

// A compiled gradient graph, and its forward (for the call that does not give what it saved).
struct gradient_program {
  std::shared_ptr<const compiled_kernel> backward;
  ir::graph forward;
};

// The compiled gradient graph of `forward` (argument_error where it cannot be differentiated).
std::shared_ptr<const gradient_program> compile_gradients(const ir::graph& forward, const jit_options& options);
// Runs it: `inputs` in the forward's call order, then dY; then what the forward saved, or nullptr.
gradients run_gradients(const gradient_program& p, std::span<const tensor_view> inputs, const saved* s);
// ... into the caller's tensors, one per gradient, named like the tensor.
void gradients_into(const gradient_program& p, std::span<const named_tensor> targets, std::span<const tensor_view> inputs,
                    const saved* s);
// The forward's tensors in call order from names, then dY.
std::vector<tensor_view> gradient_call(const gradient_program& p, const tensor_view& d_output, std::span<const named_tensor> named);
// The forward's tensors' names, in call order.
std::vector<std::string> forward_parameters(const compiled_kernel& backward);

}  // namespace detail

template <dsl::expression E>
class gradient_kernel {
 public:
  static constexpr std::size_t arity = [] {
    if constexpr (dsl::has_shape_error<E>) return std::size_t{0};  // reported by jit_gradients
    else return dsl::to_ir(E{}).terminals.size();
  }();

  explicit gradient_kernel(std::shared_ptr<const detail::gradient_program> p) : p_(std::move(p)) {}

  // dY (shaped like the expression's output), [what the forward saved,] then the forward's
  // tensors as kernel<E> takes them.
  template <class... T>
    requires(std::convertible_to<const T&, tensor_view> && ...)
  gradients operator()(const tensor_view& d_output, const T&... inputs) const {
    return call(d_output, nullptr, inputs...);
  }
  template <class... T>
    requires(std::convertible_to<const T&, tensor_view> && ...)
  gradients operator()(const tensor_view& d_output, const saved& s, const T&... inputs) const {
    return call(d_output, &s, inputs...);
  }
  gradients operator()(const tensor_view& d_output, std::initializer_list<named_tensor> named) const {
    return detail::run_gradients(*p_, detail::gradient_call(*p_, d_output, named), nullptr);
  }
  gradients operator()(const tensor_view& d_output, std::span<const named_tensor> named) const {
    return detail::run_gradients(*p_, detail::gradient_call(*p_, d_output, named), nullptr);
  }
  gradients operator()(const tensor_view& d_output, const saved& s, std::initializer_list<named_tensor> named) const {
    return detail::run_gradients(*p_, detail::gradient_call(*p_, d_output, named), &s);
  }
  gradients operator()(const tensor_view& d_output, const saved& s, std::span<const named_tensor> named) const {
    return detail::run_gradients(*p_, detail::gradient_call(*p_, d_output, named), &s);
  }

  // Writes each gradient into the caller's tensor given under its tensor's name (any strides;
  // shaped like that tensor, in its element type): every float tensor's gradient exactly once (a
  // missing, unknown or repeated name is an argument_error). Nothing is written when a check fails.
  template <class... T>
    requires(std::convertible_to<const T&, tensor_view> && ...)
  void into(std::initializer_list<named_tensor> targets, const tensor_view& d_output, const T&... inputs) const {
    call_into(targets, d_output, nullptr, inputs...);
  }
  template <class... T>
    requires(std::convertible_to<const T&, tensor_view> && ...)
  void into(std::initializer_list<named_tensor> targets, const tensor_view& d_output, const saved& s, const T&... inputs) const {
    call_into(targets, d_output, &s, inputs...);
  }
  void into(std::initializer_list<named_tensor> targets, const tensor_view& d_output, std::initializer_list<named_tensor> named) const {
    detail::gradients_into(*p_, targets, detail::gradient_call(*p_, d_output, named), nullptr);
  }
  void into(std::initializer_list<named_tensor> targets, const tensor_view& d_output, const saved& s,
            std::initializer_list<named_tensor> named) const {
    detail::gradients_into(*p_, targets, detail::gradient_call(*p_, d_output, named), &s);
  }

  // The forward's tensors, in call order.
  std::vector<std::string> parameters() const { return detail::forward_parameters(*p_->backward); }
  // The gradient graph (dsl::to_string prints it, dsl::cost counts it).
  const ir::graph& graph() const { return p_->backward->graph(); }
  std::string describe() const { return p_->backward->describe(); }
  std::string loop_nest(listing format = listing::text) const { return p_->backward->loop_nest(format); }
  const compiled_kernel& compiled() const { return *p_->backward; }

 private:
  template <class... T>
  gradients call(const tensor_view& d_output, const saved* s, const T&... inputs) const {
    return detail::run_gradients(*p_, call_views(d_output, inputs...), s);
  }
  template <class... T>
  void call_into(std::span<const named_tensor> targets, const tensor_view& d_output, const saved* s, const T&... inputs) const {
    detail::gradients_into(*p_, targets, call_views(d_output, inputs...), s);
  }
  template <class... T>
  static std::array<tensor_view, sizeof...(T) + 1> call_views(const tensor_view& d_output, const T&... inputs) {
    static_assert(sizeof...(T) == arity || dsl::has_shape_error<E>,
                  "gradient call: [the gradients' tensors,] dY, [attn::saved{output, lse},] then one tensor per input, weight "
                  "and integer input of the expression, in the forward's order (see parameters())");
    return {tensor_view(inputs)..., d_output};
  }

  std::shared_ptr<const detail::gradient_program> p_;
};

// On a CPU, an attention's backward is fused (FlashAttention-2's tiles, no Nq × Nk buffer) where
// its pairs' gradients leave the tiles through products only (docs/gradients.md); otherwise,
// and with path = generic, the generic lowering computes every gradient. path = fused refuses an
// expression the fused backward does not cover. with_weights and with_lse do not apply.
template <dsl::well_shaped_expression E>
gradient_kernel<E> jit_gradients(const E& e, const jit_options& options = {}) {
  return gradient_kernel<E>(detail::compile_gradients(dsl::to_ir(e), options));
}
template <dsl::fixed_string M>
gradient_kernel<dsl::shaped<dsl::shape_error<M>>> jit_gradients(const dsl::shaped<dsl::shape_error<M>>&, const jit_options& = {}) {
  static_assert(dsl::well_shaped<dsl::reported_t<dsl::shape_error<M>>>, "attn shape error: the message is in shape_error<...>");
  return gradient_kernel<dsl::shaped<dsl::shape_error<M>>>(nullptr);
}

}  // namespace attn
