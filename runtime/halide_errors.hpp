#pragma once
// A Halide run-time error (its code and message) as a typed attn error whose message names the
// user's tensors, not Halide's buffers ("p_keys" -> "'keys'", the output Func -> "'output'").
#include <string>
#include <utility>
#include <vector>

namespace attn::detail {

// Halide's name for a buffer, and the user's.
using buffer_names = std::vector<std::pair<std::string, std::string>>;

// Replaces each Halide name, as a whole word, by the user's name in quotes.
std::string with_user_names(std::string message, const buffer_names& names);

// Throws the attn error for Halide error `code`: memory_error, shape_error, dtype_error,
// argument_error, or attn::error for anything else.
[[noreturn]] void throw_halide_error(int code, const std::string& message, const buffer_names& names);

}  // namespace attn::detail
