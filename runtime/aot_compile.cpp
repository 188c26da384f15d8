#include "aot_compile.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <map>
#include <tuple>
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
#include "kernel_generator.hpp"
#include "private_temp_dir.hpp"

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
std::string header_text(const ir::graph& g, const options& o, const Halide::Target& base, const std::vector<Halide::Argument>& args,
                        const fs::path& scratch, const std::vector<std::string>& schedules) {
  const Halide::Target target = base.without_feature(Feature::UserContext).without_feature(Feature::NoRuntime);
  Halide::Module m(o.name, target);
  m.append(Halide::Internal::LoweredFunc(o.name, std::vector<Halide::Internal::LoweredArgument>(args.begin(), args.end()), {},
                                         Halide::LinkageType::External));
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
    s << " *   " << ++i << ". " << t.name << "  " << dtype_name(t.type) << " " << shape_text(t)
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
       " * Halide code's to the handler installed before it, and an allocator (halide_set_custom_malloc,\n"
       " * _free) that keeps attnforge calls' blocks of 1 MiB and more for later calls (up to\n"
       " * ATTN_SCRATCH_CACHE bytes, default 512 MiB) and passes the rest to the one installed before;\n"
       " * install yours before that call.\n"
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
  // One generator per target (kernel_generator.hpp): vector widths and default tiles depend on it.
  // Each target's schedule and its source go to `schedules`, for the header.
  std::vector<std::string> schedules;
  std::vector<Halide::Argument> arguments;  // the last (fallback) target's pipeline's
  const auto note = [&](const kernel_generator& gen) {
    if (std::find(schedules.begin(), schedules.end(), gen.schedule_line()) == schedules.end()) schedules.push_back(gen.schedule_line());
    arguments = gen.arguments();
  };
  const auto module_for = [&](const std::string& fn, const Halide::Target& target) {
    kernel_generator gen(o.name, expression, Halide::GeneratorContext(target), o);
    Halide::Module m = gen.build_module(fn);
    note(gen);
    return m;
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
  files out{o.out_dir / (o.name + (o.entry_point_only ? "_entry.a" : ".a")), o.out_dir / (o.name + ".h"), {}};
  try {
    if (o.entry_point_only) {
      for (const Halide::Target& t : with_context) {  // the schedules and the arguments, no code
        kernel_generator gen(o.name, expression, Halide::GeneratorContext(t), o);
        gen.build_pipeline();
        note(gen);
      }
    } else {
      Halide::compile_multitarget(pipeline, {{Halide::OutputFileType::object, (objects / (pipeline + ".o")).string()}}, with_context, {},
                                  module_for);
    }
    const fs::path entry_c = staging.path() / (o.name + "_entry.c");
    write_text(entry_c, entry_source);
    detail::compile_c(compile_entry, entry_c, objects / (o.name + "_entry.o"), staging.path());
    std::vector<std::string> members;
    for (const fs::directory_entry& e : fs::directory_iterator(objects)) members.push_back(e.path().string());
    std::sort(members.begin(), members.end());  // a reproducible archive
    const fs::path library = staging.path() / out.library.filename();
    Halide::create_static_library(members, targets.back(), library.string());
    results.emplace_back(library, out.library);

    // The listings, of the first target's pipeline.
    std::map<Halide::OutputFileType, std::string> listings;
    for (const auto& [wanted, type, ext] : {std::tuple{o.stmt, Halide::OutputFileType::stmt, ".stmt"},
                                            std::tuple{o.stmt_html, Halide::OutputFileType::stmt_html, ".stmt.html"},
                                            std::tuple{o.assembly, Halide::OutputFileType::assembly, ".s"}}) {
      if (!wanted) continue;
      const fs::path staged = staging.path() / (o.name + ext);
      listings[type] = staged.string();
      results.emplace_back(staged, o.out_dir / (o.name + ext));
      out.listings.push_back(results.back().second);
    }
    if (!listings.empty()) {
      const std::vector<Halide::Argument> fallback = arguments;
      module_for(pipeline, with_context.front()).compile(listings);
      arguments = fallback;
    }

    const fs::path header = staging.path() / out.header.filename();
    write_text(header, header_text(g, o, targets.back(), arguments, staging.path(), schedules));
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
