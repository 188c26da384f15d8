#include "halide_errors.hpp"

#include <HalideRuntime.h>
#include "errors.hpp"

namespace attn::detail {

namespace {

bool word_char(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; }

}  // namespace

std::string with_user_names(std::string message, const buffer_names& names) {
  std::string out;
  std::size_t i = 0;
  while (i < message.size()) {
    const bool at_word_start = i == 0 || !word_char(message[i - 1]);
    const std::pair<std::string, std::string>* match = nullptr;
    if (at_word_start)
      for (const auto& n : names) {
        const std::size_t end = i + n.first.size();
        if (message.compare(i, n.first.size(), n.first) == 0 && (end == message.size() || !word_char(message[end])) &&
            (match == nullptr || n.first.size() > match->first.size()))
          match = &n;
      }
    if (match) {
      out += "'" + match->second + "'";
      i += match->first.size();
    } else {
      out += message[i++];
    }
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

void throw_halide_error(int code, const std::string& message, const buffer_names& names) {
  const std::string text = "kernel failed (Halide error " + std::to_string(code) + "): " + with_user_names(message, names);
  switch (code) {
    case halide_error_code_buffer_allocation_too_large:
    case halide_error_code_buffer_extents_too_large:
    case halide_error_code_out_of_memory:
      throw memory_error(text);
    case halide_error_code_explicit_bounds_too_small:
    case halide_error_code_access_out_of_bounds:
    case halide_error_code_constraints_make_required_region_smaller:
    case halide_error_code_constraint_violated:
    case halide_error_code_param_too_small:
    case halide_error_code_param_too_large:
    case halide_error_code_buffer_extents_negative:
    case halide_error_code_bad_dimensions:
    case halide_error_code_storage_bound_too_small:
      throw shape_error(text);
    case halide_error_code_bad_type:
      throw dtype_error(text);
    case halide_error_code_buffer_argument_is_null:
    case halide_error_code_host_is_null:
    case halide_error_code_buffer_is_null:
    case halide_error_code_unaligned_host_ptr:
      throw argument_error(text);
    default:
      throw error(text);
  }
}

}  // namespace attn::detail
