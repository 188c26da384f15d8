#include "kernel.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <mutex>
#include <utility>
#include <Halide.h>
#include "aliasing.hpp"
#include "dim_bindings.hpp"
#include "disk_kernel.hpp"
#include "generators/fused/attention_pattern.hpp"
#include "generators/autoschedule.hpp"
#include "generators/gpu/flash_gpu_schedule.hpp"
#include "generators/pipeline.hpp"
#include "halide_buffers.hpp"
#include "halide_errors.hpp"
#include "kernel_cache.hpp"
#include "lowering_choice.hpp"
#include "memory_budget.hpp"
#include "private_temp_dir.hpp"
#include "target_check.hpp"
#include "tensor_checks.hpp"
#include "scratch_memory.hpp"
#include "tuned_schedule.hpp"

namespace attn {

struct compiled_kernel::impl {
  ir::graph graph;
  jit_options options;
  detail::dim_sizes bound;
  Halide::Target target;
  gen::lowered lowered;
  Halide::Pipeline pipeline;
  std::vector<Halide::Argument> arguments;
  Halide::Callable callable;                            // compiled in this process, or
  std::shared_ptr<const detail::shared_object_kernel> loaded;  // from the disk cache (disk_kernel.hpp)
  std::vector<dtype> result_types;  // each of graph.outputs()'s element type (ir::result_types)
  detail::buffer_names names;  // Halide's buffer names -> the user's, for error messages
  std::mutex listing;          // a Pipeline compiles one listing at a time (TSan: races in Halide's IR)
  std::string description;  // describe()
  std::string schedule;     // schedule()
  std::vector<int> materialised;  // nodes computed into buffers of their own (the memory budget)
  std::vector<std::string> read;  // the terminals the pipeline reads, by name
  // An autoscheduler's schedule not yet applied (the kernel came from the disk cache without it):
  // loop_nest() applies it first. Guarded by `listing`.
  std::function<void()> pending_schedule;
};

namespace {

std::string cache_key(const ir::graph& g, const jit_options& o, const detail::dim_sizes& bound) {
  std::string k = ir::serialize(g) + "|target=" + o.target + "|schedule=" + o.schedule + "|weights=" + (o.with_weights ? "1" : "0") +
                  "|path=" + std::to_string(static_cast<int>(o.path)) + (o.with_lse ? "|lse=1" : "");
  for (const auto& [name, size] : bound) k += "|" + name + "=" + std::to_string(size);
  return k;
}

// Halide reports errors through a handler; collect the text so it can become an exception.
struct error_context : Halide::JITUserContext {
  std::string message;
  error_context() {
    handlers.custom_error = [](Halide::JITUserContext* ctx, const char* msg) {
      static_cast<error_context*>(ctx)->message += msg;
    };
    handlers.custom_malloc = [](Halide::JITUserContext*, std::size_t bytes) { return detail::scratch_malloc(bytes); };
    handlers.custom_free = [](Halide::JITUserContext*, void* p) { detail::scratch_free(p); };
  }
};

// Callable takes its buffers as a parameter pack; dispatch a run-time count onto one.
using call_fn = int (*)(const Halide::Callable&, Halide::JITUserContext*, halide_buffer_t* const*);
template <std::size_t... I>
int call_with(const Halide::Callable& c, Halide::JITUserContext* ctx, halide_buffer_t* const* b) {
  return c(ctx, b[I]...);
}
template <std::size_t... N>
constexpr auto make_call_table(std::index_sequence<N...>) {
  return std::array<call_fn, sizeof...(N)>{[]<std::size_t... I>(std::index_sequence<I...>) -> call_fn {
    return &call_with<I...>;
  }(std::make_index_sequence<N>{})...};
}
constexpr auto call_table = make_call_table(std::make_index_sequence<33>{});

// The log-sum-exp's sizes in this call: the softmax's without the key axis.
std::vector<std::int64_t> lse_sizes(const ir::graph& g, const detail::call_shape& call) {
  std::vector<std::int64_t> s = detail::result_sizes(g.at(detail::lse_softmax(g)), call);
  s.pop_back();
  return s;
}

std::unique_ptr<compiled_kernel::impl> compile(const ir::graph& g, const jit_options& o, const detail::dim_sizes& bound,
                                               bool tuned, const std::string& key) {
  auto p = std::make_unique<compiled_kernel::impl>();
  p->graph = g;
  p->result_types = detail::result_dtypes(g);
  p->options = o;
  p->bound = bound;
  try {
    p->target = Halide::Target(o.target == "host" ? Halide::get_host_target().to_string() : o.target);
  } catch (const Halide::Error& e) {
    throw compile_error("unknown target '" + o.target + "': " + e.what());
  }
  detail::check_jit_can_run(p->target, o.target);
  try {
    detail::kernel_pipeline k = detail::build_pipeline(g, o, p->bound, p->target);
    p->materialised = k.lowered.materialised;
    if (o.with_weights) std::erase(p->materialised, ir::weights_softmax(g));  // an output: the caller's
    const std::optional<std::string> autoscheduler = k.autoscheduler;
    p->lowered = std::move(k.lowered);
    p->pipeline = k.pipeline;
    p->schedule = k.schedule;
    p->description = detail::describe(g, k.fused, p->schedule, tuned ? "tuned" : o.schedule == "default" ? "default" : "given",
                                      p->lowered.bf16_dot_products);
    for (const auto& param : p->lowered.params) p->arguments.emplace_back(param);
    for (const Halide::Argument& a : p->pipeline.infer_arguments())
      for (int t : g.terminals)
        if (a.name == "p_" + std::string(g.at(t).name)) p->read.emplace_back(g.at(t).name);
    // An autoscheduler's search runs only when its kernel is compiled, not when the disk cache has it.
    if (autoscheduler)
      p->pending_schedule = [q = p.get(), name = *autoscheduler] {
        gen::autoschedule(q->pipeline, q->lowered, q->graph, q->bound, name, q->target);
      };
    const auto schedule_pending = [q = p.get()] {
      if (q->pending_schedule) std::exchange(q->pending_schedule, nullptr)();
    };
    p->loaded = detail::disk_kernel(p->pipeline, p->arguments, p->target, key, schedule_pending);
    if (!p->loaded) {
      schedule_pending();
      p->callable = p->pipeline.compile_to_callable(p->arguments, p->target);
    }
    // Halide's CUDA runtime reads its register limit when it first loads a kernel (flash_gpu_schedule.hpp).
    if (p->target.has_feature(Halide::Target::CUDA)) {
      static std::once_flag registers;
      std::call_once(registers, [] { setenv("HL_CUDA_JIT_MAX_REGISTERS", std::to_string(gen::cuda_registers_per_thread).c_str(), 0); });
    }
    for (int t : g.terminals) p->names.emplace_back("p_" + std::string(g.at(t).name), std::string(g.at(t).name));
    p->names.emplace_back(p->lowered.output.name(), "output");
    if (o.with_weights) p->names.emplace_back(p->lowered.weights.name(), "weights");
    if (o.with_lse) p->names.emplace_back(p->lowered.lse.name(), "lse");
    for (std::size_t k = 0; k < p->lowered.more_outputs.size(); ++k)
      p->names.emplace_back(p->lowered.more_outputs[k].name(), "output " + std::to_string(k + 1));
  } catch (const Halide::Error& e) {
    throw compile_error(std::string("Halide: ") + e.what());
  } catch (const std::invalid_argument& e) {  // an autoscheduler without sizes
    throw compile_error(e.what());
  } catch (const std::logic_error& e) {  // a broken invariant of the lowering
    throw internal_error(e.what());
  }
  if (p->arguments.size() + 2 >= call_table.size()) throw compile_error("too many tensors for one kernel");
  return p;
}

}  // namespace

compiled_kernel::compiled_kernel(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
compiled_kernel::~compiled_kernel() = default;

std::shared_ptr<const compiled_kernel> compiled_kernel::get(const ir::graph& g, const jit_options& o) {
  const detail::dim_sizes bound = detail::checked_bindings(g, o.bind);
  if (o.with_lse) detail::lse_softmax(g);  // exactly one softmax, before any compile or cache lookup
  jit_options used = o;
  const bool tuned = detail::apply_tuning_record(g, used, bound);
  const std::string key = cache_key(g, used, bound) + (tuned ? "|tuned" : "");
  return detail::kernel_cache::process().get(key, [&] {
    return std::make_shared<const compiled_kernel>(compile(g, used, bound, tuned, key));
  });
}

std::size_t compiled_kernel::cache_size() { return detail::kernel_cache::process().size(); }

const ir::graph& compiled_kernel::graph() const { return impl_->graph; }
const jit_options& compiled_kernel::options() const { return impl_->options; }

std::vector<std::string> compiled_kernel::parameter_names() const {
  std::vector<std::string> names;
  for (int t : impl_->graph.terminals) names.emplace_back(impl_->graph.at(t).name);
  return names;
}

bool compiled_kernel::reads(std::string_view parameter) const {
  return std::find(impl_->read.begin(), impl_->read.end(), parameter) != impl_->read.end();
}

std::string compiled_kernel::describe() const { return impl_->description; }
std::string compiled_kernel::schedule() const { return impl_->schedule; }

std::string compiled_kernel::loop_nest(listing format) const {
  const bool html = format == listing::html;
  const std::lock_guard lock(impl_->listing);
  if (impl_->pending_schedule) std::exchange(impl_->pending_schedule, nullptr)();
  const detail::private_temp_dir dir;  // Halide writes listings only to files
  const std::string path = dir.path() / (html ? "loop_nest.html" : "loop_nest.stmt");
  impl_->pipeline.compile_to_conceptual_stmt(path, impl_->arguments,
                                             html ? Halide::StmtOutputFormat::HTML : Halide::StmtOutputFormat::Text, impl_->target);
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

dtype compiled_kernel::output_type() const { return impl_->result_types.front(); }

std::vector<any_tensor> compiled_kernel::output_buffers(std::span<const tensor_view> inputs) const {
  const ir::graph& g = impl_->graph;
  const detail::call_shape call = detail::check_inputs(g, inputs, impl_->bound);
  const std::vector<dtype>& types = impl_->result_types;
  const std::vector<int> results = g.outputs();
  // Before allocating: the outputs and the kernel's intermediates (as run() does).
  detail::check_memory(detail::estimate_memory(g, call, results, impl_->materialised), impl_->target.maximum_buffer_size());
  std::vector<any_tensor> b;
  for (std::size_t k = 0; k < results.size(); ++k) b.emplace_back(types[k], detail::result_sizes(g.at(results[k]), call));
  return b;
}

template <class T>
basic_outputs<T> compiled_kernel::run(std::span<const tensor_view> inputs) const {
  const ir::graph& g = impl_->graph;
  if (dtype_of<T>() != output_type())
    throw dtype_error(std::string("kernel output: stored as ") + dtype_name(output_type()) + ", asked for " + dtype_name(dtype_of<T>()));
  const detail::call_shape call = detail::check_inputs(g, inputs, impl_->bound);
  // Before allocating: the outputs this call allocates and the kernel's intermediates.
  std::vector<int> allocated = g.outputs();
  if (impl_->options.with_weights) allocated.push_back(ir::weights_softmax(g));
  detail::check_memory(detail::estimate_memory(g, call, allocated, impl_->materialised),
                       impl_->target.maximum_buffer_size());
  basic_outputs<T> out;
  out.output = tensor<T>(detail::result_sizes(g.output(), call));
  tensor_view weights_view, lse_view;
  if (impl_->options.with_weights) {
    out.weights = tensor<float>(detail::result_sizes(g.at(ir::weights_softmax(g)), call));
    weights_view = out.weights.view();
  }
  if (impl_->options.with_lse) {
    out.lse = tensor<float>(lse_sizes(g, call));
    lse_view = out.lse.view();
  }
  const std::vector<dtype>& types = impl_->result_types;
  std::vector<tensor_view> more_views;
  for (std::size_t k = 0; k < g.more_outputs.size(); ++k)
    more_views.push_back(out.more.emplace_back(types[k + 1], detail::result_sizes(g.at(g.more_outputs[k]), call)).view());
  run_into(inputs, out.output.view(), impl_->options.with_weights ? &weights_view : nullptr,
           impl_->options.with_lse ? &lse_view : nullptr, more_views);
  return out;
}
template basic_outputs<float> compiled_kernel::run(std::span<const tensor_view>) const;
template basic_outputs<bfloat16> compiled_kernel::run(std::span<const tensor_view>) const;
template basic_outputs<float16> compiled_kernel::run(std::span<const tensor_view>) const;

void compiled_kernel::run_into(std::span<const tensor_view> inputs, const tensor_view& output, const tensor_view* weights,
                               const tensor_view* lse, std::span<const tensor_view> more) const {
  const ir::graph& g = impl_->graph;
  const detail::call_shape call = detail::check_inputs(g, inputs, impl_->bound);
  if (weights != nullptr && !impl_->options.with_weights)
    throw argument_error("weights requested, but the kernel was compiled without with_weights");
  if (weights == nullptr && impl_->options.with_weights)
    throw argument_error("this kernel was compiled with_weights: pass a weights tensor too");
  if (lse != nullptr && !impl_->options.with_lse) throw argument_error("lse requested, but the kernel was compiled without with_lse");
  if (lse == nullptr && impl_->options.with_lse)
    throw argument_error("this kernel was compiled with_lse: pass an lse tensor too (into_with_lse) or call run()");
  if (more.size() != g.more_outputs.size())
    throw argument_error("this kernel has " + std::to_string(g.more_outputs.size() + 1) + " outputs: got " +
                         std::to_string(more.size() + 1));
  // Every output the call writes, in the pipeline's order: output, weights, lse, the more outputs.
  struct result {
    std::string name;
    const ir::node* node;
    std::vector<std::int64_t> sizes;
    const tensor_view* view;
    dtype type = dtype::f32;
  };
  const std::vector<dtype>& types = impl_->result_types;
  std::vector<result> results{{"output", &g.output(), detail::result_sizes(g.output(), call), &output, types.front()}};
  const int softmax = ir::weights_softmax(g);
  if (weights != nullptr) results.push_back({"weights", &g.at(softmax), detail::result_sizes(g.at(softmax), call), weights});
  if (lse != nullptr) results.push_back({"lse", &g.at(softmax), lse_sizes(g, call), lse});
  for (std::size_t k = 0; k < more.size(); ++k) {
    const ir::node& n = g.at(g.more_outputs[k]);
    results.push_back({"output " + std::to_string(k + 1), &n, detail::result_sizes(n, call), &more[k], types[k + 1]});
  }
  for (std::size_t k = 0; k < results.size(); ++k) {
    const result& r = results[k];
    detail::check_output(r.name.c_str(), *r.view, r.sizes, r.type);
    detail::check_no_self_overlap("output '" + r.name + "'", *r.view);
    for (std::size_t j = 0; j < k; ++j)
      if (detail::may_overlap(*results[j].view, *r.view))
        throw argument_error("output '" + results[j].name + "' and output '" + r.name + "' overlap in memory");
  }
  detail::check_memory(detail::estimate_memory(g, call, {}, impl_->materialised),
                       impl_->target.maximum_buffer_size());

  // Halide wants unit innermost strides: copy the few views that lack one.
  std::vector<any_tensor> copies;
  copies.reserve(inputs.size() + results.size());
  auto dense_copy = [&](const tensor_view& v) {
    return copies.emplace_back(v.type, std::vector<std::int64_t>(v.sizes.begin(), v.sizes.begin() + v.rank)).view();
  };
  auto usable = [&](const tensor_view& v) -> tensor_view {
    if (detail::halide_compatible(v)) return v;
    const tensor_view dense = dense_copy(v);
    detail::strided_copy(v, dense);
    return dense;
  };

  std::vector<std::unique_ptr<detail::halide_buffer>> buffers;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const ir::node& t = g.at(g.terminals[i]);
    const bool missing_batch = t.batched && inputs[i].rank == static_cast<int>(t.shape.size());
    buffers.push_back(std::make_unique<detail::halide_buffer>(usable(inputs[i]), missing_batch, call.batch));
  }
  // An output that shares memory with an input is computed into a temporary, then copied.
  auto overlaps_an_input = [&](const tensor_view& v) {
    for (const tensor_view& in : inputs)
      if (detail::may_overlap(v, in)) return true;
    return false;
  };
  std::vector<tensor_view> targets;
  for (const result& r : results) {
    tensor_view target = *r.view;
    if (!detail::halide_compatible(target) || overlaps_an_input(target))
      target = dense_copy(target);
    buffers.push_back(std::make_unique<detail::halide_buffer>(target, r.node->batched && !call.explicit_batch, call.batch));
    targets.push_back(target);
  }

  std::vector<halide_buffer_t*> args;
  for (auto& b : buffers) args.push_back(&b->buf);
  error_context ctx;
  const int code = impl_->loaded ? impl_->loaded->call(args.data(), args.size(), ctx.message)
                                 : call_table[args.size()](impl_->callable, &ctx, args.data());
  if (code != 0) detail::throw_halide_error(code, ctx.message, impl_->names);
  // On a GPU target the outputs are still on the device; the device copies go with `buffers`.
  for (auto& b : buffers)
    if (const int rc = b->copy_to_host(); rc != 0) detail::throw_halide_error(rc, ctx.message, impl_->names);
  for (std::size_t k = 0; k < results.size(); ++k)
    if (targets[k].data != results[k].view->data) detail::strided_copy(targets[k], *results[k].view);
}

}  // namespace attn
