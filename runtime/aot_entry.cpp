#include "aot_entry.hpp"

#include <cstddef>
#include <set>
#include <HalideRuntime.h>
#include "errors.hpp"
#include "generators/aot/halide_buffer_layout.h"
#include "halide_buffers.hpp"

namespace attn::detail {

// aot_entry_sources.cpp, generated from the files (cmake/embed_text.cmake).
extern const char aot_buffer_layout_h[];
extern const char aot_call_context_h[];
extern const char aot_checked_call_c[];

namespace {

// checked_call.c reads halide_buffer_t through its own declarations: they must match Halide's.
#define ATTN_SAME_FIELD(mine, halide, field) static_assert(offsetof(mine, field) == offsetof(halide, field), #field " moved")
static_assert(sizeof(attn_halide_buffer) == sizeof(halide_buffer_t) && sizeof(attn_halide_dimension) == sizeof(halide_dimension_t) &&
              sizeof(attn_halide_type) == sizeof(halide_type_t));
ATTN_SAME_FIELD(attn_halide_buffer, halide_buffer_t, device);
ATTN_SAME_FIELD(attn_halide_buffer, halide_buffer_t, device_interface);
ATTN_SAME_FIELD(attn_halide_buffer, halide_buffer_t, host);
ATTN_SAME_FIELD(attn_halide_buffer, halide_buffer_t, flags);
ATTN_SAME_FIELD(attn_halide_buffer, halide_buffer_t, type);
ATTN_SAME_FIELD(attn_halide_buffer, halide_buffer_t, dimensions);
ATTN_SAME_FIELD(attn_halide_buffer, halide_buffer_t, dim);
ATTN_SAME_FIELD(attn_halide_dimension, halide_dimension_t, min);
ATTN_SAME_FIELD(attn_halide_dimension, halide_dimension_t, extent);
ATTN_SAME_FIELD(attn_halide_dimension, halide_dimension_t, stride);
ATTN_SAME_FIELD(attn_halide_type, halide_type_t, bits);
ATTN_SAME_FIELD(attn_halide_type, halide_type_t, lanes);
#undef ATTN_SAME_FIELD

constexpr std::size_t max_dim_names = 64;  // checked_call.c: attn_max_names

std::string quoted(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    q += c;
  }
  return q + "\"";
}

std::string kind(aot_dim::set_by by) {
  switch (by) {
    case aot_dim::set_by::expression: return "attn_size_fixed";
    case aot_dim::set_by::binding: return "attn_size_bound";
    default: return "attn_size_free";
  }
}

// "struct halide_buffer_t *b0, ..., struct halide_buffer_t *bN" (with types) or "b[0], ..." (not).
std::string buffers(std::size_t n, bool declared) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i)
    s += (i ? ", " : "") + (declared ? "struct halide_buffer_t *b" + std::to_string(i) : "b[" + std::to_string(i) + "]");
  return s;
}

}  // namespace

std::string aot_pipeline_name(const std::string& name) { return name + "_unchecked"; }

std::string aot_entry_source(const std::string& name, const std::vector<aot_tensor>& tensors, bool large_buffers, int cuda_registers) {
  std::set<std::string> names{"batch"};
  for (const aot_tensor& t : tensors)
    for (const aot_dim& d : t.dims) names.insert(d.name);
  if (names.size() > max_dim_names)
    throw argument_error("kernel '" + name + "': " + std::to_string(names.size()) + " distinct dim names; the entry point checks at most " +
                         std::to_string(max_dim_names));
  const std::size_t n = tensors.size();
  std::string s;
  if (cuda_registers > 0)  // checked_call.c sets Halide's CUDA register limit (setenv: POSIX)
    s = "#define _POSIX_C_SOURCE 200809L\n#include <stdlib.h>\n#define ATTN_CUDA_REGISTERS \"" + std::to_string(cuda_registers) + "\"\n";
  s += std::string(aot_buffer_layout_h) + "\n" + aot_call_context_h + "\n" + aot_checked_call_c + "\n/* ---- The kernel " + name + " ---- */\n\n";
  std::string table = "static const struct attn_tensor_spec attn_tensors[] = {\n";
  for (std::size_t i = 0; i < n; ++i) {
    const aot_tensor& t = tensors[i];
    const std::string dims = "attn_dims_" + std::to_string(i);
    if (!t.dims.empty()) {
      s += "static const struct attn_dim_spec " + dims + "[] = {";
      for (std::size_t k = 0; k < t.dims.size(); ++k)
        s += (k ? ", " : "") + std::string("{") + quoted(t.dims[k].name) + ", " + std::to_string(t.dims[k].size) + ", " + kind(t.dims[k].by) + "}";
      s += "};\n";
    }
    const halide_type_t type = halide_type_of(t.type);
    table += "    {" + quoted(t.name) + ", " + (t.output ? "1" : "0") + ", " + std::to_string(type.code) + ", " + std::to_string(type.bits) + ", " +
             quoted(dtype_name(t.type)) + ", " + (t.batched ? "1" : "0") + ", " +
             std::to_string(t.dims.size()) + ", " + (t.dims.empty() ? "0" : dims) + "},\n";
  }
  s += table + "};\n";
  s += "static const struct attn_kernel_spec attn_kernel = {" + std::to_string(n) + ", attn_tensors, " + (large_buffers ? "1" : "0") + "};\n\n";
  const std::string pipeline = aot_pipeline_name(name);
  s += "int " + pipeline + "(void *user_context, " + buffers(n, true) + ");\n\n";
  s += "static int attn_pipeline(void *user_context, struct halide_buffer_t **b) {\n  return " + pipeline + "(user_context, " +
       buffers(n, false) + ");\n}\n\n";
  s += "int " + name + "(" + buffers(n, true) + ") {\n  struct halide_buffer_t *b[" + std::to_string(n) + "] = {";
  for (std::size_t i = 0; i < n; ++i) s += (i ? ", b" : "b") + std::to_string(i);
  s += "};\n  return attn_checked_call(&attn_kernel, b, attn_pipeline);\n}\n\n";
  s += "const char *" + name + "_error(void) { return attn_last_message; }\n";
  return s;
}

std::string aot_entry_declarations(const std::string& name) {
  return "\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
         "/* The message of the calling thread's last call of " + name + " if it failed (the tensor, the dim,\n"
         " * what was expected and what was given); \"\" if it succeeded. Valid until that thread calls\n"
         " * " + name + " again. */\n"
         "const char *" + name + "_error(void);\n\n"
         "#ifdef __cplusplus\n}  // extern \"C\"\n#endif\n";
}

}  // namespace attn::detail
