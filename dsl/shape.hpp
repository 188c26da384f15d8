#pragma once
// Shapes are hana tuples of named dims, row-major (the last dim is the innermost).
// The batch dimension is implicit: every expression is computed per batch element.
#include <cstddef>
#include <type_traits>
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

template <class Shape>
inline constexpr std::size_t rank_v = decltype(hana::length(std::declval<Shape>()))::value;

template <std::size_t I, class Shape>
using dim_at = std::remove_cvref_t<decltype(hana::at_c<I>(std::declval<Shape>()))>;

// Instantiating this class is a compile error whose text is Message, e.g.
//   shape_error<"matmul: inner dims differ: Dk (64) vs D (512)">
template <fixed_string Message>
struct shape_error {
  static_assert(Message.length == 0, "attn shape error: the message is in 'shape_error<...>' above");
};

// Fails to compile, naming both dims, unless A and B are the same dim.
template <fixed_string What, class A, class B>
constexpr void require_same_dim() {
  if constexpr (!std::is_same_v<A, B>) shape_error<What + ": " + A::label + " vs " + B::label>{};
}

template <fixed_string What, std::size_t Got, std::size_t Want>
constexpr void require_rank() {
  if constexpr (Got != Want)
    shape_error<What + ": expected rank " + to_fixed_string<Want>() + ", got rank " + to_fixed_string<Got>()>{};
}

template <fixed_string What, std::size_t Got, std::size_t Least>
constexpr void require_rank_at_least() {
  if constexpr (Got < Least)
    shape_error<What + ": expected rank >= " + to_fixed_string<Least>() + ", got rank " + to_fixed_string<Got>()>{};
}

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
  else {
    require_same_dim<What, A, B>();
    return A{};
  }
}
}  // namespace detail

// NumPy-style broadcasting aligned from the right, by dim identity: (T, A) with (A) gives (T, A).
template <fixed_string What, class SA, class SB>
constexpr auto broadcast_shapes(SA, SB) {
  constexpr std::size_t ra = rank_v<SA>, rb = rank_v<SB>, r = ra > rb ? ra : rb;
  return hana::unpack(hana::make_range(hana::size_c<0>, hana::size_c<r>), [](auto... i) {
    return hana::make_tuple(detail::broadcast_dim<What, decltype(detail::dim_from_right<r - 1 - decltype(i)::value, SA>()),
                                                  decltype(detail::dim_from_right<r - 1 - decltype(i)::value, SB>())>()...);
  });
}

// The shape without its last N dims, and the last N dims.
template <std::size_t N, class S>
constexpr auto drop_back(S) {
  constexpr std::size_t r = rank_v<S>;
  return hana::unpack(hana::make_range(hana::size_c<0>, hana::size_c<r - N>),
                      [](auto... i) { return hana::make_tuple(dim_at<decltype(i)::value, S>{}...); });
}

template <class S, class... Extra>
constexpr auto append(S, Extra...) {
  return hana::unpack(S{}, [](auto... d) { return hana::make_tuple(d..., Extra{}...); });
}

}  // namespace attn::dsl
