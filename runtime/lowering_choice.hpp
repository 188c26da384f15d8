#pragma once
// Which lowering a kernel runs and with which fused schedule, from jit_options::path and
// ::schedule, and the pipeline that makes: said once for attn::jit, attn-gen and the Halide
// generator (kernel_generator.hpp), so that all three compile the same code.
#include <optional>
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

// The attentions the fused lowering covers: find_attention's, or in a gradient graph the attention
// whose backward it fuses (backward_pattern.hpp; on a GPU target where gpu_covers, given the dims
// bound when compiling).
std::vector<gen::attention_match> fused_attentions(const ir::graph& g, const Halide::Target& target, const dim_sizes& bound);

// Throws compile_error for a path or schedule the expression cannot have.
gen::lowering_options choose_lowering(const ir::graph& g, const jit_options& o, const dim_sizes& bound,
                                      const Halide::Target& target);

// A kernel's pipeline on one target: the lowering choose_lowering picks, scheduled for the target,
// or unscheduled where the schedule names one of Halide's autoschedulers (the caller applies it
// before compiling: autoschedule.hpp). Its outputs in the order of every call: output
// [, weights] [, lse], then a gradient graph's more outputs.
struct kernel_pipeline {
  gen::lowered lowered;
  Halide::Pipeline pipeline;
  bool fused = false;
  std::optional<std::string> autoscheduler;  // its name, where the schedule is "auto=<name>"
  std::string schedule;                      // the fused schedule's parameters, "auto=<name>", or "" (generic)
};

// Throws as choose_lowering, argument_error for with_weights without a softmax, and lets the
// lowering's errors through (Halide::Error, std::invalid_argument, std::logic_error).
kernel_pipeline build_pipeline(const ir::graph& g, const jit_options& o, const dim_sizes& bound, const Halide::Target& target);

// Which lowering, which schedule (the tiles the lowering settled on, or "auto=<autoscheduler>")
// and where it came from (default, tuned: a tuning record, given: jit_options::schedule), and the
// tensors of 16-bit elements with how they are read (bfloat16 dot products where lowered::
// bf16_dot_products), in one line (compiled_kernel::describe()).
std::string describe(const ir::graph& g, bool fused, const std::string& schedule, const char* source,
                     const gen::bf16_products& bf16_dot_products);

}  // namespace attn::detail
