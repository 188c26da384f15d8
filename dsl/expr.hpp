#pragma once
// The expression node types. An expression's C++ type carries its whole tree and its shape;
// its value carries only run-time constants (a scale factor). Ops (linear.hpp, elementwise.hpp, ...)
// supply the shape rule; to_ir.hpp turns any expression into an ir::graph.
#include <concepts>
#include <type_traits>
#include <boost/hana/tuple.hpp>
#include "ir.hpp"
#include "shape.hpp"

namespace attn::dsl {

enum class terminal_kind { input, weight, int_input };

// A tensor the kernel reads. Inputs and integer inputs have a batch dim; weights are shared by the batch.
// Element: a float tensor's type in memory (read as float32).
template <fixed_string Name, terminal_kind Kind, ir::element Element, class... Dims>
struct terminal {
  static constexpr auto name_text = Name;
  static constexpr terminal_kind kind = Kind;
  static constexpr ir::element element = Element;
  using shape_type = hana::tuple<Dims...>;
  static constexpr bool batched = Kind != terminal_kind::weight;
  static constexpr bool free_placeholders = false;
};

// A scalar constant (a scale factor, a bias, a cap).
struct constant {
  float value;
  using shape_type = hana::tuple<>;
  static constexpr bool batched = false;
  static constexpr bool free_placeholders = false;
};

// The size of a dim as a scalar, for rsqrt(Dk) or a slope that depends on a length.
template <class Dim>
struct dim_value {
  using dim_type = Dim;
  using shape_type = hana::tuple<>;
  static constexpr bool batched = false;
  static constexpr bool free_placeholders = false;
};

// score, q_idx, kv_idx, head: the free variables of masks and score modifiers.
template <ir::placeholder Which>
struct placeholder {
  static constexpr ir::placeholder which = Which;
  using shape_type = hana::tuple<>;
  static constexpr bool batched = false;
  static constexpr bool free_placeholders = true;
};

// What a node derives from: its shape. A shape error makes it shaped<shape_error<M>>, which every
// function that uses an expression (shape_of, to_ir, cost, to_string, shape_text, to_dot,
// attn::jit) takes in an overload of its own: that overload reports the error, and its only
// template argument is the message, so no line of the compiler's report spells the expression's
// type (thousands of characters for a real layer).
template <class Shape>
struct shaped {};
template <fixed_string M>
struct shaped<shape_error<M>> {
  using shape_type = shape_error<M>;
  static constexpr bool batched = false;
  static constexpr bool free_placeholders = false;
};

template <class T> struct is_expression : std::false_type {};
template <fixed_string N, terminal_kind K, ir::element E, class... D> struct is_expression<terminal<N, K, E, D...>> : std::true_type {};
template <> struct is_expression<constant> : std::true_type {};
template <class D> struct is_expression<dim_value<D>> : std::true_type {};
template <ir::placeholder W> struct is_expression<placeholder<W>> : std::true_type {};
template <fixed_string M> struct is_expression<shaped<shape_error<M>>> : std::true_type {};

template <class T>
concept expression = is_expression<std::remove_cvref_t<T>>::value;

namespace detail {
// An argument's error passes through unchanged; otherwise the op's shape rule decides.
template <class Op, class... Args>
constexpr auto node_shape() {
  using failed = first_shape_error_t<typename Args::shape_type...>;
  if constexpr (!std::is_void_v<failed>) return failed{};
  else return Op::shape(typename Args::shape_type{}...);
}
}  // namespace detail

// An operation applied to argument expressions. Op supplies:
//   static constexpr ir::op ir_kind;
//   static constexpr auto shape(ArgShapes...)        -- the shape rule: the shape, or a shape_error
//                                                       naming the dims (never a compile error itself)
//   static constexpr bool binds_placeholders          -- mask / modify close over placeholders
//   constexpr void annotate(ir::node&) const          -- extra data for the IR (optional)
template <class Op, class... Args>
struct node : shaped<decltype(detail::node_shape<Op, Args...>())> {
  Op op;
  hana::tuple<Args...> args;

  using shape_type = decltype(detail::node_shape<Op, Args...>());
  static constexpr bool batched = (Args::batched || ... || false);
  static constexpr bool free_placeholders = !Op::binds_placeholders && (Args::free_placeholders || ... || false);
};
template <class Op, class... A> struct is_expression<node<Op, A...>> : std::true_type {};

// Anything that may stand where an expression is expected: numbers become constants, dims their sizes.
template <class T>
constexpr auto as_expr(const T& x) {
  if constexpr (expression<T>) return x;
  else if constexpr (std::is_arithmetic_v<T>) return constant{static_cast<float>(x)};
  else if constexpr (is_dim_v<T>) return dim_value<T>{};
  else static_assert(expression<T>, "not an attn expression, number or dim");
}

template <class T>
concept operand = expression<T> || std::is_arithmetic_v<std::remove_cvref_t<T>> || is_dim_v<std::remove_cvref_t<T>>;

template <class Op, class... Args>
constexpr auto make_node(Op op, const Args&... args) {
  return node<Op, std::remove_cvref_t<decltype(as_expr(args))>...>{{}, op, hana::make_tuple(as_expr(args)...)};
}

template <class E>
inline constexpr bool has_shape_error = is_shape_error_v<typename E::shape_type>;

template <class E>
concept well_shaped_expression = expression<E> && !has_shape_error<E>;

// The shape (a hana tuple of dims); a compile error with the message if the expression has a shape error.
template <well_shaped_expression E>
constexpr auto shape_of(const E&) {
  return typename E::shape_type{};
}
// A shape error is reported here and in each function that uses an expression: GCC names the
// failing well_shaped<shape_error<"...">> in a note, Clang in this line. Written out where it
// reports, so no trace of the library follows.
template <fixed_string M>
constexpr auto shape_of(const shaped<shape_error<M>>&) {
  static_assert(well_shaped<reported_t<shape_error<M>>>, "attn shape error: the message is in shape_error<...>");
  return shape_error<M>{};
}

template <expression E>
inline constexpr std::size_t rank_of = rank_v<typename E::shape_type>;

// ---- terminals and placeholders a user writes ----

// Element types of float tensors in memory: input<"k", bf16>(H, T, Dh). float32 by default.
inline constexpr ir::element f32 = ir::element::f32;
inline constexpr ir::element bf16 = ir::element::bf16;
inline constexpr ir::element f16 = ir::element::f16;

template <fixed_string Name, ir::element Element = f32, class... Dims>
constexpr auto input(Dims...) {
  static_assert((is_dim_v<Dims> && ...), "input<\"name\">(dims...) takes dims");
  return terminal<Name, terminal_kind::input, Element, Dims...>{};
}

template <fixed_string Name, ir::element Element = f32, class... Dims>
constexpr auto weight(Dims...) {
  static_assert((is_dim_v<Dims> && ...), "weight<\"name\">(dims...) takes dims");
  return terminal<Name, terminal_kind::weight, Element, Dims...>{};
}

// Integer (int32) data with a batch dim: per-token document ids, positions, bucket indices; read
// inside masks and modifiers with gather(doc, q_idx) (gather.hpp).
template <fixed_string Name, class... Dims>
constexpr auto int_input(Dims...) {
  static_assert((is_dim_v<Dims> && ...), "int_input<\"name\">(dims...) takes dims");
  return terminal<Name, terminal_kind::int_input, f32, Dims...>{};
}

// Per-sequence valid lengths (int32, one per batch element), for key padding: an integer input
// without dims.
template <fixed_string Name>
inline constexpr terminal<Name, terminal_kind::int_input, f32> lengths{};

// The type a result is stored in, where the rule's does not suit (to_ir.hpp: the float tensors'
// common type, float32 where they differ): output_as<f32>(y) keeps a bfloat16 attention's output
// in float32; output_as<bf16>(y) rounds a float32 one's. Only the whole expression has a storage
// type: output_as inside another operation is an error when it converts to IR.
template <ir::element Element, class E>
struct stored_as {
  E value;
  static constexpr ir::element element = Element;
  using shape_type = typename E::shape_type;
  static constexpr bool batched = E::batched;
  static constexpr bool free_placeholders = E::free_placeholders;
};
template <ir::element El, class E> struct is_expression<stored_as<El, E>> : std::true_type {};
template <class T> inline constexpr bool is_stored_as_v = false;
template <ir::element El, class E> inline constexpr bool is_stored_as_v<stored_as<El, E>> = true;

template <ir::element Element, expression E>
constexpr auto output_as(const E& e) {
  if constexpr (is_shape_error_v<typename E::shape_type>) return e;  // reported where it is used
  else return stored_as<Element, E>{e};
}

inline constexpr placeholder<ir::placeholder::score> score{};
inline constexpr placeholder<ir::placeholder::q_idx> q_idx{};
inline constexpr placeholder<ir::placeholder::kv_idx> kv_idx{};
inline constexpr placeholder<ir::placeholder::head> head{};

}  // namespace attn::dsl
