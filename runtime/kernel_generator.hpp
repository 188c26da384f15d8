#pragma once
// An attnforge kernel as a Halide generator (Halide::Internal::AbstractGenerator): attn-gen is a
// standard generator program through it (`attn-gen -g KERNEL -o DIR target=host -e static_library,h`,
// Halide's flags, CMake's add_halide_library), and attn-gen's own command line builds through it.
//
// Inputs: a buffer per tensor, in the expression's parameter order and under the tensors' names
// (float32; lengths int32), a batch dim last where the tensor has one, every dim starting at 0 and
// estimated (its size where fixed or bound, else 1024; batch 1). Outputs: `output` [, `weights`]
// [, `lse`]; with gradients=true the inputs go on with `d_output`, then `output` and `lse` as the
// forward saved them (one softmax), and the outputs are `d_<tensor>` per float tensor. That is the
// C ABI's order (aot_compile.hpp), without its checks: the pipeline alone.
// GeneratorParams, all optional:
//   <dim>=<size>                 a run-time dim fixed at build time (attn-gen --bind), e.g. T=1024
//   <parameter>=<value>          a parameter of the fused schedule (schedules.md), e.g. q_tile=32;
//                                the others are the default's (chosen per shape and target)
//   path=automatic|fused|generic, with_weights=false|true, with_lse=false|true, gradients=false|true
//   tuning_db=<file>|default     each target's schedule from this tuning database's record
//   autoscheduler=<name>         one of Halide's autoschedulers instead (as the schedule auto=<name>),
//   autoscheduler.<key>=<value>  with its parameters
#include <deque>
#include <map>
#include <string>
#include <Halide.h>
#include "aot_compile.hpp"
#include "lowering_choice.hpp"

namespace attn::aot {

class kernel_generator final : public Halide::Internal::AbstractGenerator {
 public:
  // `o` gives the parameters as attn-gen's options do (bind, schedule, path, with_weights, with_lse,
  // gradients, tuning_db; the others are not the pipeline's); GeneratorParams set later override.
  kernel_generator(std::string name, ir::graph expression, const Halide::GeneratorContext& context, options o = {});

  // After build_pipeline(): the target's schedule and where it came from, e.g.
  // "x86-64-linux-avx2: [q_tile=64 kv_tile=128 ...], tuned: record ... in tuning.json".
  const std::string& schedule_line() const { return schedule_line_; }
  // After build_pipeline(): its arguments, inputs then outputs, as a Halide header declares them.
  std::vector<Halide::Argument> arguments() const;

  std::string name() override { return name_; }
  Halide::GeneratorContext context() const override;
  std::vector<ArgInfo> arginfos() override;
  bool allow_out_of_order_inputs_and_outputs() const override { return false; }
  void set_generatorparam_value(const std::string& name, const std::string& value) override;
  void set_generatorparam_value(const std::string& name, const Halide::LoopLevel&) override;
  Halide::Pipeline build_pipeline() override;
  std::vector<Halide::Parameter> input_parameter(const std::string& name) override;
  std::vector<Halide::Func> output_func(const std::string& name) override;
  void bind_input(const std::string& name, const std::vector<Halide::Parameter>&) override { no_stub(name); }
  void bind_input(const std::string& name, const std::vector<Halide::Func>&) override { no_stub(name); }
  void bind_input(const std::string& name, const std::vector<Halide::Expr>&) override { no_stub(name); }
  bool emit_cpp_stub(const std::string&) override { return false; }
  bool emit_hlpipe(const std::string&) override { return false; }

 private:
  [[noreturn]] void no_stub(const std::string& input) const;
  ir::graph graph() const;  // the kernel's: the expression's, or its gradients'

  std::string name_;
  ir::graph expression_;
  Halide::Target target_;
  options options_;
  std::deque<std::string> bound_names_;  // what options_.bind's names view
  std::string schedule_parameters_;      // <parameter>=<value>, added to the schedule when built
  std::map<std::string, std::string> autoscheduler_given_;  // autoscheduler.<key>
  Halide::AutoschedulerParams autoscheduler_;  // set by build_pipeline where the schedule names one
  ir::graph built_graph_;  // graph() as build_pipeline() built it
  detail::kernel_pipeline built_;
  std::vector<std::string> output_names_;
  std::string schedule_line_;
};

// The kernels of registry.hpp as generators, for Halide::Internal::generate_filter_main.
class registered_generators final : public Halide::Internal::GeneratorFactoryProvider {
 public:
  std::vector<std::string> enumerate() const override;
  Halide::Internal::AbstractGeneratorPtr create(const std::string& name, const Halide::GeneratorContext& context) const override;
};

}  // namespace attn::aot
