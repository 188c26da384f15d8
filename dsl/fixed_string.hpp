#pragma once
// A string usable as a template argument, so names and error messages live in types.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace attn::dsl {

template <std::size_t N>
struct fixed_string {
  char data[N]{};
  constexpr fixed_string() = default;
  constexpr fixed_string(const char (&s)[N]) {
    for (std::size_t i = 0; i < N; ++i) data[i] = s[i];
  }
  constexpr std::string_view view() const { return {data, N - 1}; }
  static constexpr std::size_t length = N - 1;
};

template <std::size_t N, std::size_t M>
constexpr fixed_string<N + M - 1> operator+(const fixed_string<N>& a, const fixed_string<M>& b) {
  fixed_string<N + M - 1> r;
  for (std::size_t i = 0; i + 1 < N; ++i) r.data[i] = a.data[i];
  for (std::size_t i = 0; i < M; ++i) r.data[N - 1 + i] = b.data[i];
  return r;
}
template <std::size_t N, std::size_t M>
constexpr auto operator+(const fixed_string<N>& a, const char (&b)[M]) { return a + fixed_string<M>(b); }
template <std::size_t N, std::size_t M>
constexpr auto operator+(const char (&a)[N], const fixed_string<M>& b) { return fixed_string<N>(a) + b; }

constexpr std::size_t decimal_digits(std::int64_t v) {
  std::size_t n = v < 0 ? 2 : 1;
  for (v = v < 0 ? -v : v; v >= 10; v /= 10) ++n;
  return n;
}

// The decimal text of V as a fixed_string: to_fixed_string<512>() == "512".
template <std::int64_t V>
constexpr auto to_fixed_string() {
  fixed_string<decimal_digits(V) + 1> r;
  std::int64_t v = V < 0 ? -V : V;
  for (std::size_t i = decimal_digits(V); i-- > 0; v /= 10) r.data[i] = char('0' + v % 10);
  if (V < 0) r.data[0] = '-';
  return r;
}

}  // namespace attn::dsl
