#pragma once
// Counts and sizes read from environment variables, parsed one way everywhere: a whole number
// >= 0, for sizes in bytes optionally followed by K, M or G (powers of 1024). Anything else
// ("-1", "1.5", "lots", a number past 2^63) is reported once on stderr and nullopt is returned,
// so the caller uses its default: a typo never silently means "unlimited".
#include <cstdint>
#include <optional>
#include <string_view>

namespace attn::detail {

enum class quantity { count, bytes };

// nullopt when `name` is unset, empty or not a valid value (then reported once).
std::optional<std::uint64_t> number_from_environment(const char* name, quantity what);

// The same rule for any text (a command-line option): nullopt when it is not a valid value.
std::optional<std::uint64_t> parse_quantity(std::string_view text, quantity what);

}  // namespace attn::detail
