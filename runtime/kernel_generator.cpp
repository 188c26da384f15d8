#include "kernel_generator.hpp"

#include <algorithm>
#include <cstdio>
#include "aot_signature.hpp"
#include "halide_buffers.hpp"
#include "dim_bindings.hpp"
#include "halide_buffers.hpp"
#include "errors.hpp"
#include "generators/cpu/flash_schedule.hpp"
#include "generators/gpu/flash_gpu_schedule.hpp"
#include "generators/aot/registry.hpp"
#include "generators/autoschedule.hpp"
#include "tuned_schedule.hpp"

namespace attn::aot {

namespace {

using Feature = Halide::Target::Feature;

// A generator's estimate of a run-time dim nothing fixes (Halide's convention: every input estimated).
constexpr std::int64_t estimated_length = 1024;

bool parse_flag(const std::string& name, const std::string& value) {
  if (value == "true" || value == "1") return true;
  if (value == "false" || value == "0") return false;
  throw argument_error("GeneratorParam " + name + "=" + value + ": true or false");
}

// The pipeline knows what is fixed at build time, for its code: each dim starts at 0, and static
// or bound dims have their size (the C entry point checks the caller's buffers against the same).
void constrain(const ir::graph& g, const gen::lowered& l, const detail::dim_sizes& bound) {
  for (std::size_t i = 0; i < g.terminals.size(); ++i) {
    const ir::node& n = g.at(g.terminals[i]);
    Halide::ImageParam p = l.params[i];
    const int rank = static_cast<int>(n.shape.size());
    for (int k = 0; k < rank; ++k) {
      const ir::dim& d = n.shape[static_cast<std::size_t>(rank - 1 - k)];  // Halide dims are innermost first
      p.dim(k).set_min(0);
      std::int64_t size = d.size;
      if (auto it = bound.find(d.name); size == 0 && it != bound.end()) size = it->second;
      if (size > 0) p.dim(k).set_extent(static_cast<int>(size));
    }
    if (n.batched) p.dim(rank).set_min(0);
  }
  gen::set_estimates(l, g, bound, estimated_length);
}

}  // namespace

kernel_generator::kernel_generator(std::string name, ir::graph expression, const Halide::GeneratorContext& context, options o)
    : name_(std::move(name)), expression_(std::move(expression)), target_(context.target()), options_(std::move(o)) {
  if (!context.autoscheduler_params().name.empty()) {
    options_.schedule = "auto=" + context.autoscheduler_params().name;
    autoscheduler_given_ = context.autoscheduler_params().extra;
  }
}

ir::graph kernel_generator::graph() const { return kernel_graph(expression_, options_); }

Halide::GeneratorContext kernel_generator::context() const { return Halide::GeneratorContext(target_, autoscheduler_); }

std::vector<kernel_generator::ArgInfo> kernel_generator::arginfos() {
  std::vector<ArgInfo> infos;
  for (const detail::aot_tensor& t : detail::aot_signature(graph(), options_))
    infos.push_back({t.name, t.output ? Halide::Internal::ArgInfoDirection::Output : Halide::Internal::ArgInfoDirection::Input,
                     Halide::Internal::ArgInfoKind::Buffer, {Halide::Type(detail::halide_type_of(t.type))},
                     static_cast<int>(t.dims.size()) + (t.batched ? 1 : 0)});
  return infos;
}

void kernel_generator::set_generatorparam_value(const std::string& name, const std::string& value) {
  if (gen::flash_schedule::parameters().find(name) || gen::flash_gpu_schedule::parameters().find(name))
    schedule_parameters_ += (schedule_parameters_.empty() ? "" : " ") + name + "=" + value;
  else if (name == "path") {
    if (value != "automatic" && value != "fused" && value != "generic")
      throw argument_error("GeneratorParam path=" + value + ": automatic, fused or generic");
    options_.path = value == "fused" ? lowering::fused : value == "generic" ? lowering::generic : lowering::automatic;
  } else if (name == "with_weights") options_.with_weights = parse_flag(name, value);
  else if (name == "with_lse") options_.with_lse = parse_flag(name, value);
  else if (name == "gradients") options_.gradients = parse_flag(name, value);
  else if (name == "tuning_db") {
    if (value.empty()) options_.tuning_db.reset();
    else options_.tuning_db = value == "default" ? tuning_db_path() : std::filesystem::path(value);
  } else if (name == "autoscheduler") options_.schedule = value.empty() ? "default" : "auto=" + value;
  else if (name.starts_with("autoscheduler.")) autoscheduler_given_[name.substr(std::string("autoscheduler.").size())] = value;
  else options_.bind.push_back(detail::parse_dim_binding("GeneratorParam", name + "=" + value, bound_names_));  // a dim, checked when built
}

void kernel_generator::set_generatorparam_value(const std::string& name, const Halide::LoopLevel&) {
  throw argument_error("GeneratorParam " + name + ": attnforge kernels take no LoopLevel");
}

void kernel_generator::no_stub(const std::string& input) const {
  throw argument_error("kernel '" + name_ + "', input " + input + ": attnforge generators have no stubs to bind inputs of");
}

Halide::Pipeline kernel_generator::build_pipeline() {
  built_graph_ = graph();
  const ir::graph& g = built_graph_;
  const detail::dim_sizes bound = detail::checked_bindings(g, options_.bind);
  if (!schedule_parameters_.empty())
    options_.schedule = (options_.schedule == "default" ? "" : options_.schedule + " ") + schedule_parameters_;
  schedule_parameters_.clear();
  // The schedule is the target's, not the calling convention's (user_context).
  const Halide::Target target = target_.without_feature(Feature::UserContext);
  jit_options jo{.target = target.to_string(), .bind = options_.bind, .with_weights = options_.with_weights,
                 .with_lse = options_.with_lse, .path = options_.path, .schedule = options_.schedule};
  // A tuning record for this kernel, its bound sizes and this target replaces the default
  // schedule, as in the JIT (tuned_schedule.hpp).
  const std::optional<tuning_record> record =
      options_.tuning_db ? detail::apply_tuning_record(g, jo, bound, *options_.tuning_db) : std::nullopt;
  built_ = detail::build_pipeline(g, jo, bound, target);
  constrain(g, built_.lowered, bound);
  if (built_.autoscheduler) autoscheduler_ = gen::autoscheduler_params(*built_.autoscheduler, autoscheduler_given_);

  const std::string source = record ? "tuned: record " + record->signature + " " + record->bucket + " of " + record->date + " in " +
                                          options_.tuning_db->string()
                             : options_.schedule == "default" ? "default"
                                                              : "given";
  schedule_line_ = jo.target + ": " + (built_.fused ? "[" + built_.schedule + "]" : "generic lowering") + ", " + source;
  if (record) std::fprintf(stderr, "attn-gen: %s for %s uses the tuning record [%s]\n", name_.c_str(), jo.target.c_str(), jo.schedule.c_str());

  output_names_.clear();
  for (const detail::aot_tensor& t : detail::aot_signature(g, options_))
    if (t.output) output_names_.push_back(t.name);
  if (output_names_.size() != built_.pipeline.outputs().size())
    throw internal_error("kernel '" + name_ + "': " + std::to_string(output_names_.size()) + " outputs in its signature, " +
                         std::to_string(built_.pipeline.outputs().size()) + " in its pipeline");
  return built_.pipeline;
}

std::vector<Halide::Parameter> kernel_generator::input_parameter(const std::string& name) {
  const ir::graph& g = built_graph_;
  for (std::size_t i = 0; i < g.terminals.size(); ++i)
    if (g.at(g.terminals[i]).name == name) return {built_.lowered.params.at(i).parameter()};
  throw argument_error("kernel '" + name_ + "' has no input '" + name + "'");
}

std::vector<Halide::Func> kernel_generator::output_func(const std::string& name) {
  const auto it = std::find(output_names_.begin(), output_names_.end(), name);
  if (it == output_names_.end()) throw argument_error("kernel '" + name_ + "' has no output '" + name + "'");
  return {built_.pipeline.outputs()[static_cast<std::size_t>(it - output_names_.begin())]};
}

std::vector<Halide::Argument> kernel_generator::arguments() const {
  std::vector<Halide::Argument> args(built_.lowered.params.begin(), built_.lowered.params.end());
  for (const Halide::Func& f : built_.pipeline.outputs())
    args.emplace_back(f.name(), Halide::Argument::OutputBuffer, f.type(), f.dimensions(), Halide::ArgumentEstimates{});
  return args;
}

std::vector<std::string> registered_generators::enumerate() const {
  std::vector<std::string> names;
  for (const auto& [name, entry] : registry::get().entries()) names.push_back(c_identifier(name));  // Halide's rule for names
  return names;
}

Halide::Internal::AbstractGeneratorPtr registered_generators::create(const std::string& name, const Halide::GeneratorContext& context) const {
  const kernel_entry* e = registry::get().find(name);
  if (e == nullptr) return nullptr;
  return std::make_unique<kernel_generator>(c_identifier(e->name), e->graph, context);
}

int halide_generator_main(int argc, char** argv) {
  const registered_generators kernels;
  return Halide::Internal::generate_filter_main(argc, argv, kernels);
}

}  // namespace attn::aot
