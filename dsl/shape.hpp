#pragma once
// Shapes are hana tuples of named dims, row-major (the last dim is the innermost).
// The batch dimension is implicit: every expression is computed per batch element.
#include <cstddef>
#include <type_traits>
#include <utility>
#include <boost/hana/at.hpp>
#include <boost/hana/equal.hpp>
#include <boost/hana/length.hpp>
#include <boost/hana/range.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/unpack.hpp>
#include "dim.hpp"

namespace attn::dsl {

template <class... Dims>
constexpr auto shape(Dims...) {
  static_assert((is_dim_v<Dims> && ...), "shape(...) takes dims, e.g. shape(T, D)");
  return hana::tuple<Dims...>{};
}

// A failed shape rule, as a type: shape_error<"matmul: inner dims differ: Dk (64) vs D (512)">.
// Shape rules return it instead of a shape, and an expression with a failing argument has that
// argument's error as its shape, so nothing fails while an expression is built. The error is
// reported where the expression is used, by one static_assert in the function that uses it
// (shape_of, to_ir, cost, to_string, shape_text, to_dot, attn::jit; each has an overload for
// expressions with an error, expr.hpp's shaped): the message, the line that uses the expression,
// and no trace of the library's templates nor the expression's type.
template <fixed_string Message>
struct shape_error {
  static constexpr auto message = Message;
};

template <class S> inline constexpr bool is_shape_error_v = false;
template <fixed_string M> inline constexpr bool is_shape_error_v<shape_error<M>> = true;

// The rank of a shape (0 for an error, so code that inspects a failed shape does not fail again).
template <class Shape>
inline constexpr std::size_t rank_v = decltype(hana::length(std::declval<Shape>()))::value;
template <fixed_string M>
inline constexpr std::size_t rank_v<shape_error<M>> = 0;

template <std::size_t I, class Shape>
using dim_at = std::remove_cvref_t<decltype(hana::at_c<I>(std::declval<Shape>()))>;

// The first error among shapes, or void.
template <class... S> struct first_shape_error { using type = void; };
template <class S, class... Rest>
struct first_shape_error<S, Rest...>
    : std::conditional_t<is_shape_error_v<S>, std::type_identity<S>, first_shape_error<Rest...>> {};
template <class... S>
using first_shape_error_t = typename first_shape_error<S...>::type;

template <fixed_string What, class A, class B>
using dims_differ = shape_error<What + ": " + A::label + " vs " + B::label>;

template <fixed_string What, std::size_t Got, std::size_t Least>
using rank_below = shape_error<What + ": expected rank >= " + to_fixed_string<Least>() + ", got rank " + to_fixed_string<Got>()>;

// A shape as error text: "(T (run time), Dk (64))".
template <class S, std::size_t I = 0>
constexpr auto dims_label() {
  if constexpr (I + 1 == rank_v<S>) return dim_at<I, S>::label;
  else return dim_at<I, S>::label + ", " + dims_label<S, I + 1>();
}
template <class S>
constexpr auto shape_label() {
  if constexpr (rank_v<S> == 0) return fixed_string("()");
  else return "(" + dims_label<S>() + ")";
}

// What the report names: the error itself, and for Clang its text as a pack of chars
// (shape_error_text<'m', 'a', ...>): Clang 14 prints a string template argument as character codes,
// later ones cut it short, and a pack of chars is printed in full.
template <char... Text> struct shape_error_text {};
namespace detail {
template <fixed_string M, std::size_t... I>
shape_error_text<M.data[I]...> spell(std::index_sequence<I...>);
template <class S> struct reported { using type = S; };
#if defined(__clang__)
template <fixed_string M>
struct reported<shape_error<M>> { using type = decltype(spell<M>(std::make_index_sequence<M.length>{})); };
#endif
}  // namespace detail

// False for a shape error. Consumers report with
//   static_assert(well_shaped<reported_t<shape_error<M>>>, "attn shape error ...");
// GCC names the failing well_shaped<shape_error<"...">> in a note, Clang in the error line.
template <class S> inline constexpr bool well_shaped = !is_shape_error_v<S>;
template <char... Text> inline constexpr bool well_shaped<shape_error_text<Text...>> = false;
template <class S> using reported_t = typename detail::reported<S>::type;

namespace detail {
struct no_dim {};

template <std::size_t I, class Shape>
constexpr auto dim_from_right() {
  constexpr std::size_t r = rank_v<Shape>;
  if constexpr (I < r) return dim_at<r - 1 - I, Shape>{};
  else return no_dim{};
}

// One axis of a broadcast: equal dims stay, a missing or unit dim takes the other.
template <class D>
constexpr bool absent_or_unit() {
  if constexpr (std::is_same_v<D, no_dim>) return true;
  else return D::role == dim_role::unit;
}

template <fixed_string What, class A, class B>
constexpr auto broadcast_dim() {
  if constexpr (std::is_same_v<B, no_dim>) return A{};
  else if constexpr (absent_or_unit<A>()) return B{};
  else if constexpr (absent_or_unit<B>()) return A{};
  else if constexpr (!std::is_same_v<A, B>) return dims_differ<What, A, B>{};
  else return A{};
}

// The dims as a shape, or the first of them that is an error.
template <class... D>
constexpr auto shape_or_error(D... d) {
  if constexpr (!std::is_void_v<first_shape_error_t<D...>>) return first_shape_error_t<D...>{};
  else return hana::make_tuple(d...);
}
}  // namespace detail

// NumPy-style broadcasting aligned from the right, by dim identity: (T, A) with (A) gives (T, A).
// An error in, or two different dims on one axis, gives a shape_error.
template <fixed_string What, class SA, class SB>
constexpr auto broadcast_shapes(SA, SB) {
  if constexpr (!std::is_void_v<first_shape_error_t<SA, SB>>) {
    return first_shape_error_t<SA, SB>{};
  } else {
    constexpr std::size_t ra = rank_v<SA>, rb = rank_v<SB>, r = ra > rb ? ra : rb;
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return detail::shape_or_error(detail::broadcast_dim<What, decltype(detail::dim_from_right<r - 1 - I, SA>()),
                                                          decltype(detail::dim_from_right<r - 1 - I, SB>())>()...);
    }(std::make_index_sequence<r>{});
  }
}

// The shape without its last N dims, and the shape with dims appended (an error stays an error).
template <std::size_t N, class S>
constexpr auto drop_back(S) {
  if constexpr (is_shape_error_v<S>) return S{};
  else
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return hana::make_tuple(dim_at<I, S>{}...);
    }(std::make_index_sequence<rank_v<S> - N>{});
}

template <class S, class... Extra>
constexpr auto append(S, Extra...) {
  if constexpr (is_shape_error_v<S>) return S{};
  else return hana::unpack(S{}, [](auto... d) { return hana::make_tuple(d..., Extra{}...); });
}

}  // namespace attn::dsl

// A shape error compares equal to any shape (hana's Comparable), so static_assert(shape_of(y) ==
// shape(T, D)) adds no second error to the one shape_of reports.
namespace boost::hana {
template <attn::dsl::fixed_string M, class T>
struct equal_impl<attn::dsl::shape_error<M>, T> {
  static constexpr auto apply(const auto&, const auto&) { return hana::true_c; }
};
}  // namespace boost::hana
