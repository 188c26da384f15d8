#pragma once
// attn::jit(expr [, options]): compile an expression for this machine once, then call it.
//   auto k = attn::jit(y);
//   attn::tensor<float> out = k(x, wq, wk, wv);
// Tensors are passed inputs first, then weights, then integer inputs (lengths), each kind in order of first
// appearance in the expression (kernel::parameters() lists the names), or by name in any order:
//   attn::tensor<float> out = k({{"x", x}, {"wq", wq}, {"wk", wk}, {"wv", wv}});
// The output is float32, or bfloat16 / float16 where every float tensor is (kernel::output_value).
// Tensors may carry a leading batch dim (inputs, integer inputs) or not (batch of 1); weights never do.
#include <array>
#include <concepts>
#include <span>
#include <utility>
#include "dsl/dsl.hpp"
#include "gradients.hpp"
#include "kernel.hpp"
#include "named_call.hpp"

namespace attn {

template <dsl::expression E>
class kernel {
 public:
  static constexpr std::size_t arity = [] {
    if constexpr (dsl::has_shape_error<E>) return std::size_t{0};  // reported by jit
    else return dsl::to_ir(E{}).terminals.size();
  }();

  // The output's element type: float, or bfloat16 / float16 where the expression's float tensors
  // all are (dsl::output_as chooses another).
  static constexpr ir::element output_element = [] {
    if constexpr (dsl::has_shape_error<E>) return ir::element::f32;
    else return ir::element{dsl::to_ir(E{}).output().type};
  }();
  using output_value = stored_value<output_element>;

  explicit kernel(std::shared_ptr<const compiled_kernel> k) : k_(std::move(k)) {}

  template <class... T>
    requires(std::convertible_to<const T&, tensor_view> && ...)
  tensor<output_value> operator()(const T&... inputs) const {
    return run(inputs...).output;
  }

  // The output and, if compiled with_weights, the attention weights; with_lse, the log-sum-exp.
  template <class... T>
    requires(std::convertible_to<const T&, tensor_view> && ...)
  basic_outputs<output_value> run(const T&... inputs) const {
    check_arity<sizeof...(T)>();
    const std::array<tensor_view, sizeof...(T)> views{tensor_view(inputs)...};
    return k_->run<output_value>(views);
  }

  // Writes into the caller's memory (any strides); untouched if a check fails.
  template <class... T>
    requires(std::convertible_to<const T&, tensor_view> && ...)
  void into(const tensor_view& output, const T&... inputs) const {
    check_arity<sizeof...(T)>();
    const std::array<tensor_view, sizeof...(T)> views{tensor_view(inputs)...};
    k_->run_into(views, output, nullptr);
  }

  template <class... T>
    requires(std::convertible_to<const T&, tensor_view> && ...)
  void into_with_weights(const tensor_view& output, const tensor_view& weights, const T&... inputs) const {
    check_arity<sizeof...(T)>();
    const std::array<tensor_view, sizeof...(T)> views{tensor_view(inputs)...};
    k_->run_into(views, output, &weights);
  }

  // Compiled with_lse: the output and each row's log-sum-exp (outputs::lse's shape).
  template <class... T>
    requires(std::convertible_to<const T&, tensor_view> && ...)
  void into_with_lse(const tensor_view& output, const tensor_view& lse, const T&... inputs) const {
    check_arity<sizeof...(T)>();
    const std::array<tensor_view, arity> views{tensor_view(inputs)...};
    k_->run_into(views, output, nullptr, &lse);
  }

  // By name, in any order: every parameter exactly once (argument_error naming a missing, unknown
  // or repeated name).
  tensor<output_value> operator()(std::initializer_list<named_tensor> named) const { return run(named).output; }
  basic_outputs<output_value> run(std::initializer_list<named_tensor> named) const {
    return k_->run<output_value>(detail::in_call_order(k_->parameter_names(), named));
  }
  basic_outputs<output_value> run(std::span<const named_tensor> named) const {
    return k_->run<output_value>(detail::in_call_order(k_->parameter_names(), named));
  }
  void into(const tensor_view& output, std::initializer_list<named_tensor> named) const {
    k_->run_into(detail::in_call_order(k_->parameter_names(), named), output, nullptr);
  }

  std::vector<std::string> parameters() const { return k_->parameter_names(); }
  std::string loop_nest(listing format = listing::text) const { return k_->loop_nest(format); }
  const compiled_kernel& compiled() const { return *k_; }

 private:
  // (An expression with a shape error has no arity: its error, reported by jit, is the only one.)
  template <std::size_t N>
  static constexpr void check_arity() {
    static_assert(N == arity || dsl::has_shape_error<E>, "kernel call: pass one tensor per input, weight and integer input of the expression, "
                              "inputs, then weights, then integer inputs (see kernel::parameters())");
  }
  std::shared_ptr<const compiled_kernel> k_;
};

template <dsl::well_shaped_expression E>
kernel<E> jit(const E& e, const jit_options& options = {}) {
  return kernel<E>(compiled_kernel::get(dsl::to_ir(e), options));
}
// A shape error is reported here, one step from the caller's line (see dsl::shaped); the kernel
// it returns takes any call without a second error.
template <dsl::fixed_string M>
kernel<dsl::shaped<dsl::shape_error<M>>> jit(const dsl::shaped<dsl::shape_error<M>>&, const jit_options& = {}) {
  static_assert(dsl::well_shaped<dsl::reported_t<dsl::shape_error<M>>>, "attn shape error: the message is in shape_error<...>");
  return kernel<dsl::shaped<dsl::shape_error<M>>>(nullptr);
}

}  // namespace attn
