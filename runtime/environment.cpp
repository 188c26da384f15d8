#include "environment.hpp"

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <set>
#include <string>

namespace attn::detail {

std::optional<std::uint64_t> parse_quantity(std::string_view text, quantity what) {
  constexpr std::uint64_t largest = std::numeric_limits<std::int64_t>::max();
  std::uint64_t n = 0;
  std::size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    const auto digit = static_cast<std::uint64_t>(text[i] - '0');
    if (n > (largest - digit) / 10) return std::nullopt;
    n = n * 10 + digit;
  }
  if (i == 0) return std::nullopt;  // no digits: a sign, a space, a word
  if (i == text.size()) return n;
  if (what != quantity::bytes || i + 1 != text.size()) return std::nullopt;
  const std::string_view units = "KMG";
  const std::size_t unit = units.find(text[i]);
  if (unit == std::string_view::npos) return std::nullopt;
  const int shift = 10 * static_cast<int>(unit + 1);
  if (n > (largest >> shift)) return std::nullopt;
  return n << shift;
}

std::optional<std::uint64_t> number_from_environment(const char* name, quantity what) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  if (auto n = parse_quantity(value, what)) return n;
  static std::mutex m;
  static std::set<std::string> reported;
  const std::lock_guard lock(m);
  if (reported.insert(name).second)
    std::fprintf(stderr, "attnforge: %s='%s' is not %s; the default is used\n", name, value,
                 what == quantity::bytes ? "a size in bytes (a whole number >= 0, optionally with K, M or G)"
                                         : "a count (a whole number >= 0)");
  return std::nullopt;
}

}  // namespace attn::detail
