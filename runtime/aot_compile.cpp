#include "aot_compile.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <Halide.h>
#include "aot_entry.hpp"
#include "aot_signature.hpp"
#include "aot_targets.hpp"
#include "c_compiler.hpp"
#include "dim_bindings.hpp"
#include "dsl/gradient.hpp"
#include "errors.hpp"
#include "generators/gpu/flash_gpu_schedule.hpp"
#include "generators/pipeline.hpp"
#include "lowering_choice.hpp"
#include "private_temp_dir.hpp"
#include "tuned_schedule.hpp"

namespace attn::aot {

namespace {

namespace fs = std::filesystem;
using Feature = Halide::Target::Feature;

bool valid_c_name(const std::string& n) {
  if (n.empty() || std::isdigit(static_cast<unsigned char>(n[0]))) return false;
  for (char c : n)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

// Sizes for Halide's estimates (its convention for generators: every input estimated, so
// autoschedulers and tools can reason about the pipeline): the size when known at build time,
// otherwise a typical one.
constexpr int estimated_length = 1024, estimated_batch = 1;

// The entry point checks every tensor before the pipeline runs (aot_entry.hpp); the pipeline
// also knows what is fixed at build time, for its code: each dim starts at 0, and static or
// bound dims have their size.
void constrain(const ir::graph& g, gen::lowered& l, const detail::dim_sizes& bound) {
  for (std::size_t i = 0; i < g.terminals.size(); ++i) {
    const ir::node& n = g.at(g.terminals[i]);
    Halide::ImageParam& p = l.params[i];
    const int rank = static_cast<int>(n.shape.size());
    for (int k = 0; k < rank; ++k) {
      const ir::dim& d = n.shape[static_cast<std::size_t>(rank - 1 - k)];  // Halide dims are innermost first
      p.dim(k).set_min(0);
      std::int64_t size = d.size;
      if (auto it = bound.find(d.name); size == 0 && it != bound.end()) size = it->second;
      if (size > 0) p.dim(k).set_extent(static_cast<int>(size));
      p.dim(k).set_estimate(0, size > 0 ? static_cast<int>(size) : estimated_length);
    }
    if (n.batched) p.dim(rank).set_min(0).set_estimate(0, estimated_batch);
  }
}

std::string shape_text(const detail::aot_tensor& t) {
  std::string s = t.batched ? "[batch, " : "[";
  for (std::size_t k = 0; k < t.dims.size(); ++k) {
    const detail::aot_dim& d = t.dims[k];
    s += (k ? ", " : "") + d.name + (d.size > 0 ? " = " + std::to_string(d.size) : " (any)");
  }
  return s + "]";
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::trunc);
  out << text;
  if (!out.flush()) throw error("cannot write '" + p.string() + "'");
}

// Halide's header for the entry point NAME (the pipeline's arguments without its user_context),
// with a guard named after the kernel, and the ABI above it.
std::string header_text(const ir::graph& g, const options& o, const Halide::Target& base, std::vector<Halide::Internal::LoweredArgument> args,
                        const fs::path& scratch, const std::vector<std::string>& schedules) {
  std::erase_if(args, [](const Halide::Internal::LoweredArgument& a) { return a.name == "__user_context"; });
  const Halide::Target target = base.without_feature(Feature::UserContext).without_feature(Feature::NoRuntime);
  Halide::Module m(o.name, target);
  m.append(Halide::Internal::LoweredFunc(o.name, args, {}, Halide::LinkageType::External));
  const fs::path raw = scratch / (o.name + ".halide.h");
  m.compile({{Halide::OutputFileType::c_header, raw.string()}});
  std::string text = read_text(raw);
  // Halide names the guard after the file's path, here a temporary one: name it after the kernel.
  const std::string ifndef = "#ifndef ";
  const std::size_t at = text.find(ifndef), eol = text.find('\n', at);
  const std::size_t end = text.rfind("#endif");
  if (at == std::string::npos || eol == std::string::npos || end == std::string::npos || end < eol)
    throw internal_error("Halide's header for '" + o.name + "' has no include guard");
  const std::string guard = text.substr(at + ifndef.size(), eol - at - ifndef.size());
  text.insert(end, detail::aot_entry_declarations(o.name) + "\n");
  for (std::size_t p = text.find(guard); p != std::string::npos; p = text.find(guard, p)) text.replace(p, guard.size(), "ATTNFORGE_KERNEL_" + o.name + "_H");
  return abi_comment(g, o, schedules) + text;
}

}  // namespace

ir::graph kernel_graph(const ir::graph& g, const options& o) {
  if (!o.gradients) return g;
  if (o.with_weights || o.with_lse) throw argument_error("gradients: with_weights and with_lse do not apply");
  try {
    return ir::gradient(g);
  } catch (const std::invalid_argument& e) {
    throw argument_error(e.what());
  }
}

std::string abi_comment(const ir::graph& g, const options& o, const std::vector<std::string>& schedules) {
  std::ostringstream s;
  s << "/* attnforge kernel '" << o.name << "'" << (o.gradients ? " (the gradients)" : "") << ", generated ahead of time for ";
  for (std::size_t i = 0; i < o.targets.size(); ++i) s << (i ? ", " : "") << o.targets[i];
  s << (o.targets.size() > 1 ? " (chosen at run time from the CPU's features, in that order)" : "") << ".\n *\n";
  if (o.gradients)
    s << " *   int " << o.name << "(halide_buffer_t *tensor, ..., halide_buffer_t *d_output, halide_buffer_t *d_tensor, ...);\n";
  else
    s << " *   int " << o.name << "(halide_buffer_t *tensor, ..., halide_buffer_t *output"
      << (o.with_weights ? ", halide_buffer_t *weights" : "") << (o.with_lse ? ", halide_buffer_t *lse" : "") << ");\n";
  s << " *   const char *" << o.name << "_error(void);  // why this thread's last call failed; \"\" if it did not\n *\n";
  if (!schedules.empty()) {
    s << " * Schedules:\n";
    for (const std::string& line : schedules) s << " *   " << line << "\n";
    s << " *\n";
  }
  s << " * One halide_buffer_t per tensor, in this order. Shapes are row-major (outermost first) as\n"
       " * written in the expression; a halide_buffer_t lists its dims the other way round, innermost\n"
       " * first, with the batch (if any) last. Every dim starts at 0; the innermost dim is dense\n"
       " * (stride 1). (any): chosen by the caller, the same size wherever the name recurs.\n"
       " * batch: one more (outermost) dim, 1 for a single sequence, the same in every tensor that has it.\n";
  int i = 0;
  for (const detail::aot_tensor& t : detail::aot_signature(g, o))
    s << " *   " << ++i << ". " << t.name << "  " << (t.int32 ? "int32 " : "float32 ") << shape_text(t)
      << (t.note.empty() ? "" : "  (" + t.note + ")") << "\n";
  s << " *\n"
       " * Every call checks its tensors first: sizes (the same name, the same size; static and bound\n"
       " * sizes as listed), element types, dims, mins, the dense innermost dim, int32 offsets, data\n"
       " * (host, or a device buffer), and outputs that overlap themselves, each other or an input.\n"
       " * Returns 0 on success, else a negative halide_error_code_t (HalideRuntime.h), and then\n"
       " * " << o.name << "_error() says why, naming the tensor and the dim (\"tensor 'k': T is 512 in this\n"
       " * call (as in tensor 'q'), got 256\"). The checks' codes: -3 bad_type, -6 buffer_extents_too_large,\n"
       " * -8 constraint_violated (a size, a min, a stride, an overlap), -12 buffer_argument_is_null,\n"
       " * -28 buffer_extents_negative, -34 host_is_null, -43 bad_dimensions. A failed check runs nothing\n"
       " * and writes no output. Halide's errors while running (e.g. -11 out_of_memory) are returned the\n"
       " * same way: never printed, never aborting. At its first call the kernel installs an error\n"
       " * handler (halide_set_error_handler) that keeps attnforge kernels' errors and passes any other\n"
       " * Halide code's to the handler installed before it; install yours before that call.\n"
       " * Thread-safe; threads: Halide's pool (HL_NUM_THREADS). No Halide or attnforge library is needed\n"
       " * at run time: this library carries Halide's runtime. */\n";
  return s.str();
}

files generate(const ir::graph& expression, const options& o) {
  if (!valid_c_name(o.name)) throw argument_error("kernel name '" + o.name + "': must be a C identifier");
  const ir::graph g = kernel_graph(expression, o);
  const detail::dim_sizes bound = detail::checked_bindings(g, o.bind);
  const std::vector<detail::aot_tensor> tensors = detail::aot_signature(g, o);  // with_weights, with_lse
  // Every target is checked before any code is generated: LLVM aborts on some (aot_targets.hpp).
  const std::vector<Halide::Target> targets = detail::aot_targets(o.targets);
  const detail::c_compiler cc = detail::find_c_compiler(o.c_compiler);
  // The int32 limits apply unless every target addresses buffers with 64-bit offsets.
  const bool large_buffers = std::all_of(targets.begin(), targets.end(), [](const Halide::Target& t) { return t.has_feature(Feature::LargeBuffers); });
  // A CUDA kernel's entry point sets the registers a thread may use before the first call (flash_gpu_schedule.hpp).
  const bool cuda = std::any_of(targets.begin(), targets.end(), [](const Halide::Target& t) { return t.has_feature(Feature::CUDA); });
  const std::string entry_source =
      detail::aot_entry_source(o.name, tensors, large_buffers, cuda ? gen::cuda_registers_per_thread : 0);
  jit_options jo{.target = "", .bind = {}, .with_weights = o.with_weights, .with_lse = o.with_lse,
                 .path = o.path, .schedule = o.schedule};

  // One pipeline per target: vector widths and default tiles depend on it. `target` may carry the
  // user_context the entry point passes (not a property of the schedule). Each target's schedule
  // and its source go to `schedules`, for the header.
  std::vector<std::string> schedules;
  auto pipeline_for = [&](const Halide::Target& target, std::vector<Halide::Argument>& args) {
    const Halide::Target schedule_target = target.without_feature(Feature::UserContext);
    // A tuning record for this kernel, its bound sizes and this target replaces the default
    // schedule, as in the JIT (tuned_schedule.hpp); records naming an autoscheduler are not used here.
    jit_options jt = jo;
    jt.target = schedule_target.to_string();
    jt.bind = o.bind;
    std::optional<tuning_record> record = o.tuning_db ? detail::apply_tuning_record(g, jt, bound, *o.tuning_db) : std::nullopt;
    if (record && record->schedule.starts_with("auto=")) {
      record.reset();
      jt.schedule = jo.schedule;
    }
    gen::lowered l = gen::lower_and_schedule(g, bound, detail::choose_lowering(g, jt, bound, schedule_target), schedule_target);
    const std::string source = record ? "tuned: record " + record->signature + " " + record->bucket + " of " + record->date + " in " +
                                            o.tuning_db->string()
                               : o.schedule == "default" ? "default"
                                                         : "given";
    const std::string line = jt.target + ": " + (l.flash.empty() && l.backward.empty() ? "generic lowering" : "[" + gen::schedule_text(l) + "]") +
                             ", " + source;
    if (std::find(schedules.begin(), schedules.end(), line) == schedules.end()) {
      schedules.push_back(line);
      if (record) std::fprintf(stderr, "attn-gen: %s for %s uses the tuning record [%s]\n", o.name.c_str(), jt.target.c_str(), jt.schedule.c_str());
    }
    if (o.with_weights && !l.weights.defined()) throw argument_error("with_weights: the expression has no softmax");
    constrain(g, l, bound);
    args.assign(l.params.begin(), l.params.end());
    std::vector<Halide::Func> results{l.output};
    if (o.with_weights) results.push_back(l.weights);
    if (o.with_lse) results.push_back(l.lse);
    results.insert(results.end(), l.more_outputs.begin(), l.more_outputs.end());
    return Halide::Pipeline(results);
  };

  // Everything is written into a private folder beside the outputs and moved into place only
  // when all of it succeeded: a failure leaves the output folder as it was.
  fs::create_directories(o.out_dir);
  const std::string staging_prefix = "." + o.name + ".attn-gen-";
  detail::remove_dead_temp_dirs(o.out_dir, staging_prefix);
  const detail::private_temp_dir staging(o.out_dir, staging_prefix);
  const std::vector<std::string> compile_entry = detail::c_compile_command(cc, targets.back(), staging.path());
  const fs::path objects = staging.path() / "objects";
  fs::create_directories(objects);
  std::vector<Halide::Target> with_context;
  for (const Halide::Target& t : targets) with_context.push_back(t.with_feature(Feature::UserContext));
  const std::string pipeline = detail::aot_pipeline_name(o.name);
  std::vector<std::pair<fs::path, fs::path>> results;  // staged file -> final path
  files out{o.out_dir / (o.name + ".a"), o.out_dir / (o.name + ".h"), {}};
  try {
    std::vector<Halide::Internal::LoweredArgument> lowered_args;  // the last (fallback) target's
    Halide::compile_multitarget(
        pipeline, {{Halide::OutputFileType::object, (objects / (pipeline + ".o")).string()}}, with_context, {},
        [&](const std::string& fn, const Halide::Target& target) {
          std::vector<Halide::Argument> args;
          Halide::Module m = pipeline_for(target, args).compile_to_module(args, fn, target);
          lowered_args = m.get_function_by_name(fn).args;
          return m;
        });
    const fs::path entry_c = staging.path() / (o.name + "_entry.c");
    write_text(entry_c, entry_source);
    detail::compile_c(compile_entry, entry_c, objects / (o.name + "_entry.o"), staging.path());
    std::vector<std::string> members;
    for (const fs::directory_entry& e : fs::directory_iterator(objects)) members.push_back(e.path().string());
    std::sort(members.begin(), members.end());  // a reproducible archive
    const fs::path library = staging.path() / out.library.filename();
    Halide::create_static_library(members, targets.back(), library.string());
    results.emplace_back(library, out.library);

    std::vector<Halide::Argument> args;
    Halide::Pipeline first = pipeline_for(with_context.front(), args);
    auto listing = [&](bool wanted, const std::string& ext, auto&& write) {
      if (!wanted) return;
      const fs::path staged = staging.path() / (o.name + ext);
      write(staged.string());
      results.emplace_back(staged, o.out_dir / (o.name + ext));
      out.listings.push_back(results.back().second);
    };
    listing(o.stmt, ".stmt", [&](const std::string& f) { first.compile_to_lowered_stmt(f, args, Halide::StmtOutputFormat::Text, with_context.front()); });
    listing(o.stmt_html, ".stmt.html", [&](const std::string& f) { first.compile_to_lowered_stmt(f, args, Halide::StmtOutputFormat::HTML, with_context.front()); });
    listing(o.assembly, ".s", [&](const std::string& f) { first.compile_to_assembly(f, args, o.name, with_context.front()); });

    const fs::path header = staging.path() / out.header.filename();
    write_text(header, header_text(g, o, targets.back(), lowered_args, staging.path(), schedules));
    results.emplace_back(header, out.header);  // last: the header is the sign that the library is complete
  } catch (const Halide::Error& e) {
    throw compile_error(std::string("Halide: ") + e.what());
  } catch (const std::invalid_argument&) {  // a schedule that does not fit this kernel: the caller's
    throw;
  } catch (const std::logic_error& e) {  // a broken invariant of the lowering
    throw internal_error(e.what());
  }
  for (const auto& [staged, final_path] : results) fs::rename(staged, final_path);
  return out;
}

}  // namespace attn::aot
