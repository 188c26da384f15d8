#pragma once
// Named dimensions: a size fixed at compile time (dim<"D", 512>) or bound at run time (dim<"T">).
#include <cstdint>
#include <string_view>
#include <boost/hana/bool.hpp>
#include "fixed_string.hpp"

namespace attn::dsl {

namespace hana = boost::hana;

enum class dim_role { plain, heads, unit, quotient };

// `T = 2048` binds a run-time dim to a size, for the cost model and for jit options.
struct dim_binding {
  std::string_view name;
  std::int64_t size;
};

template <fixed_string Name, std::int64_t Size = 0, dim_role Role = dim_role::plain>
struct dim_t {
  static_assert(Size >= 0, "a dim's size must be positive (or 0 for a size bound at run time)");
  static constexpr auto name_text = Name;
  static constexpr std::string_view name = name_text.view();
  static constexpr std::int64_t size = Size;  // 0: bound at run time
  static constexpr bool is_static = Size > 0;
  static constexpr dim_role role = Role;

  static constexpr auto label_text() {
    if constexpr (Size > 0) return Name + " (" + to_fixed_string<Size>() + ")";
    else return Name + " (run time)";
  }
  // "Dk (64)": how error messages name a dim.
  static constexpr auto label = label_text();

  constexpr dim_binding operator=(std::int64_t v) const { return {name, v}; }
};

template <class A, class B>
constexpr auto operator==(const A&, const B&)
  requires requires { A::name; B::role; }
{
  return hana::bool_c<std::is_same_v<A, B>>;
}
template <class A, class B>
constexpr auto operator!=(const A&, const B&)
  requires requires { A::name; B::role; }
{
  return hana::bool_c<!std::is_same_v<A, B>>;
}

template <fixed_string Name, std::int64_t Size = 0>
inline constexpr dim_t<Name, Size> dim{};

// The number of heads: `head_dim<"H", 8>`; split_heads uses it, and the placeholder `head` indexes it.
template <fixed_string Name, std::int64_t Size>
inline constexpr dim_t<Name, Size, dim_role::heads> head_dim{};

// A size-1 axis, as inserted by unsqueeze; it broadcasts against anything.
using unit_dim = dim_t<"1", 1, dim_role::unit>;

// D / H: the per-head width made by split_heads. The cost model sees it as D·H⁻¹.
template <class Num, class Den>
struct quotient_dim : dim_t<Num::name_text + "/" + Den::name_text, Num::size / Den::size, dim_role::quotient> {
  using numerator = Num;
  using denominator = Den;
};

template <class D> inline constexpr bool is_dim_v = requires { D::name; D::role; D::size; };

}  // namespace attn::dsl
