#pragma once
// Ahead-of-time compilation: an expression's IR -> a static library and a C header, through the
// same lowering and schedule choice as attn::jit (lowering_choice.hpp), for one or several
// targets. The library carries Halide's runtime; using it needs neither Halide nor attnforge.
//
// The C ABI (also written at the top of the generated header, with this kernel's shapes):
//   int NAME(halide_buffer_t *t1, ..., halide_buffer_t *tn, halide_buffer_t *output
//            [, halide_buffer_t *weights] [, halide_buffer_t *lse]);
// or, built with options::gradients,
//   int NAME(halide_buffer_t *t1, ..., halide_buffer_t *tn, halide_buffer_t *d_output,
//            halide_buffer_t *d_t1, ...);   // one gradient per float tensor
//   const char *NAME_error(void);
// tensors in the kernel's parameter order (inputs, then weights, then lengths, as
// kernel::parameters() lists them), each a float32 (lengths: int32) halide_buffer_t with dims
// innermost first, min 0 and the innermost dim dense. NAME checks every tensor as the JIT does
// (aot_entry.hpp), then runs the Halide pipeline; it returns 0 or a negative halide_error_code_t,
// and NAME_error() then says why. Nothing is printed and nothing aborts.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>
#include "dsl/ir.hpp"
#include "kernel.hpp"

namespace attn::aot {

struct options {
  std::string name;                            // the C function (and file) name
  std::vector<std::string> targets{"host"};    // several: dispatch on the CPU's features, first match wins;
                                               // the last is the fallback (Halide's multitarget rule)
  std::vector<dsl::dim_binding> bind{};        // run-time dims fixed at build time
  std::string schedule = "default";
  lowering path = lowering::automatic;
  bool with_weights = false;
  bool with_lse = false;  // also output each softmax row's log-sum-exp (jit_options::with_lse)
  // The expression's gradients instead of its output (jit_gradients): the tensors, then dY
  // (d_output), then what the forward saved (output, lse) where it has one softmax, then
  // d_<name> for each float tensor, in the same order.
  bool gradients = false;
  // The tuning database whose record for this kernel, its sizes and a target sets that target's
  // schedule (tuned_schedule.hpp); none: the default schedule, whatever databases exist (a build
  // that depends on its inputs only). The header names each target's schedule and its source.
  std::optional<std::filesystem::path> tuning_db{};
  std::filesystem::path out_dir = ".";
  bool stmt = false, stmt_html = false, assembly = false;  // listings, for the first target
  // Only the entry point (the checks) as NAME_entry.a, and the header: for a pipeline built by the
  // Halide generator (kernel_generator.hpp) as NAME_unchecked for the same targets with the
  // user_context feature (attn_add_kernel builds it so, with add_halide_library).
  bool entry_point_only = false;
  // The C compiler for the entry point, words separated by spaces (c_compiler.hpp); empty: $CC,
  // else the compiler attnforge was built with. A clang is given --target for other machines.
  std::string c_compiler{};
};

// What generate() wrote.
struct files {
  std::filesystem::path library, header;
  std::vector<std::filesystem::path> listings;
};

// The graph a kernel is built from: g, or with options::gradients its gradient graph
// (argument_error with with_weights or with_lse, or where g cannot be differentiated).
ir::graph kernel_graph(const ir::graph& g, const options& o);

// Throws compile_error (Halide, targets, the C compiler, schedule), argument_error / shape_error
// (bindings, name). Writes into a private folder in out_dir first and moves the files into
// place only when everything succeeded: a failure leaves out_dir as it was.
files generate(const ir::graph& g, const options& o);

// Halide's generator program (Halide::Internal::generate_filter_main) over the kernels registered
// in this program (registry.hpp), each a Halide generator (kernel_generator.hpp):
// `-g KERNEL -o DIR target=... -e static_library,h [GeneratorParams]`. Returns its exit status.
int halide_generator_main(int argc, char** argv);

// The header's opening comment of the kernel built from g (kernel_graph's): the functions, the
// tensors with their shapes, the checks and the return codes; `schedules`, a line per target.
std::string abi_comment(const ir::graph& g, const options& o, const std::vector<std::string>& schedules = {});

}  // namespace attn::aot
