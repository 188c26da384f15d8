// The error handler the kernels install and a program's own (test_aot_handler, label aot): a
// handler the program installed before the kernels' first call keeps receiving the errors of
// other Halide code, never the kernels'; one installed after it receives the kernels' run-time
// errors too (they still return their code, and NAME_error says where the message went).
// A program of its own: which handler is installed depends on the order of the calls.
#include <cstdio>
#include <string>
#include <vector>

#include "aot_causal_attention.h"
#include "runtime/kernel_buffer.hpp"

namespace {

using attn::aot::kernel_buffer;

int failures = 0;
std::string mine, later;

void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

// aot_causal_attention on (1, 8, 300, 16) tensors, with every allocation failing.
int call_out_of_memory() {
  std::vector<float> x(8 * 300 * 16, 0.5f), out(x.size());
  kernel_buffer q(x.data(), {1, 8, 300, 16}), k(x.data(), {1, 8, 300, 16}), v(x.data(), {1, 8, 300, 16}), o(out.data(), {1, 8, 300, 16});
  const halide_malloc_t previous = halide_set_custom_malloc([](void*, size_t) -> void* { return nullptr; });
  const int rc = aot_causal_attention(q, k, v, o);
  halide_set_custom_malloc(previous);
  return rc;
}

}  // namespace

int main() {
  halide_set_error_handler([](void*, const char* message) { mine += message; });
  check(call_out_of_memory() == halide_error_code_out_of_memory, "out of memory: the code");
  check(std::string(aot_causal_attention_error()) == "kernel failed (Halide error -11): Out of memory (halide_malloc returned nullptr)",
        std::string("out of memory: the message: ") + aot_causal_attention_error());
  check(mine.empty(), "the program's handler does not receive the kernel's error: '" + mine + "'");
  halide_error(nullptr, "other Halide code");  // as a pipeline that is not attnforge's reports
  check(mine == "other Halide code", "the program's handler receives other errors: '" + mine + "'");

  halide_set_error_handler([](void*, const char* message) { later += message; });
  check(call_out_of_memory() == halide_error_code_out_of_memory, "a handler installed later: the code");
  check(later.find("Out of memory") != std::string::npos, "a handler installed later receives the message: '" + later + "'");
  check(std::string(aot_causal_attention_error()).find("went to an error handler installed with halide_set_error_handler") != std::string::npos,
        std::string("and the kernel says so: ") + aot_causal_attention_error());
  std::printf("%s: %d failure(s)\n", failures ? "FAILED" : "passed", failures);
  return failures ? 1 : 0;
}
