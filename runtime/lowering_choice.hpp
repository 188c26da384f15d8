#pragma once
// Which lowering a kernel runs and with which fused schedule, from jit_options::path and
// ::schedule: shared by the JIT and by ahead-of-time generation, so both compile the same code.
#include <string>
#include <vector>
#include <Halide.h>
#include "generators/fused/attention_pattern.hpp"
#include "generators/lowering/lower.hpp"
#include "kernel.hpp"
#include "tensor_checks.hpp"

namespace attn::detail {

// The softmax whose log-sum-exp jit_options::with_lse returns: the expression's only one.
// argument_error if it has none or several.
int lse_softmax(const ir::graph& g);

// The attentions the fused lowering covers: find_attention's, or in a gradient graph (on a CPU) the
// attention whose backward it fuses (backward_pattern.hpp).
std::vector<gen::attention_match> fused_attentions(const ir::graph& g, const Halide::Target& target);

// Throws compile_error for a path or schedule the expression cannot have.
gen::lowering_options choose_lowering(const ir::graph& g, const jit_options& o, const dim_sizes& bound,
                                      const Halide::Target& target);

// Which lowering, which schedule (the tiles the lowering settled on, or "auto=<autoscheduler>")
// and where it came from (default, tuned: a tuning record, given: jit_options::schedule), in one
// line (compiled_kernel::describe()).
std::string describe(const ir::graph& g, bool fused, const std::string& schedule, const char* source);

}  // namespace attn::detail
