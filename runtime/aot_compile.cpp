#include "aot_compile.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <Halide.h>
#include "dim_bindings.hpp"
#include "errors.hpp"
#include "generators/pipeline.hpp"
#include "lowering_choice.hpp"
#include "tuned_schedule.hpp"

namespace attn::aot {

namespace {

Halide::Target parse_target(const std::string& t) {
  const std::string s = t == "host" ? Halide::get_host_target().to_string() : t;
  if (!Halide::Target::validate_target_string(s)) throw compile_error("unknown target '" + t + "'");
  return Halide::Target(s);
}

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

// The JIT checks every tensor before a call; a library cannot, so Halide checks at entry what
// is known at build time: each dim starts at 0, and static or bound dims have their size.
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

std::string shape_text(const ir::node& n, const detail::dim_sizes& bound) {
  std::string s = n.batched ? "[batch, " : "[";
  for (std::size_t k = 0; k < n.shape.size(); ++k) {
    const ir::dim& d = n.shape[k];
    std::int64_t size = d.size;
    if (auto it = bound.find(d.name); size == 0 && it != bound.end()) size = it->second;
    s += (k ? ", " : "") + std::string(d.name) + (size > 0 ? " = " + std::to_string(size) : " (any)");
  }
  return s + "]";
}

}  // namespace

std::string abi_comment(const ir::graph& g, const options& o) {
  const detail::dim_sizes bound = detail::checked_bindings(g, o.bind);
  std::ostringstream s;
  s << "/* attnforge kernel '" << o.name << "', generated ahead of time for ";
  for (std::size_t i = 0; i < o.targets.size(); ++i) s << (i ? ", " : "") << o.targets[i];
  s << (o.targets.size() > 1 ? " (chosen at run time from the CPU's features, in that order)" : "") << ".\n *\n";
  s << " *   int " << o.name << "(halide_buffer_t *tensor, ..., halide_buffer_t *output"
    << (o.with_weights ? ", halide_buffer_t *weights" : "") << (o.with_lse ? ", halide_buffer_t *lse" : "") << ");\n *\n";
  s << " * One halide_buffer_t per tensor, in this order. Shapes are row-major (outermost first) as\n"
       " * written in the expression; a halide_buffer_t lists its dims the other way round, innermost\n"
       " * first, with the batch (if any) last. Every dim starts at 0; inner dims must be dense\n"
       " * (stride 1 innermost). (any): chosen by the caller, the same size wherever the name recurs.\n"
       " * batch: one more (outermost) dim, 1 for a single sequence, the same in every tensor that has it.\n";
  int i = 0;
  for (int t : g.terminals) {
    const ir::node& n = g.at(t);
    s << " *   " << ++i << ". " << n.name << "  " << (n.kind == ir::op::int_input ? "int32 " : "float32 ") << shape_text(n, bound) << "\n";
  }
  s << " *   " << ++i << ". output  float32 " << shape_text(g.output(), bound) << "\n";
  if (o.with_weights)
    for (auto it = g.nodes.rbegin(); it != g.nodes.rend(); ++it)
      if (it->kind == ir::op::softmax) {
        s << " *   " << ++i << ". weights  float32 " << shape_text(*it, bound) << "  (the attention weights)\n";
        break;
      }
  if (o.with_lse) {
    ir::node rows = g.at(detail::lse_softmax(g));
    rows.shape.pop_back();
    s << " *   " << ++i << ". lse  float32 " << shape_text(rows, bound)
      << "  (each row's log-sum-exp of its kept scores; -inf for a row without one)\n";
  }
  s << " *\n * Returns 0 on success, else a negative halide_error_code_t (HalideRuntime.h), e.g. -2 for a\n"
       " * buffer whose sizes do not fit. Halide's default error handler prints the message and aborts\n"
       " * the process: to get the code back instead, install a handler once per program with\n"
       " * halide_set_error_handler (declared below; one handler serves every attnforge kernel).\n"
       " * Thread-safe; threads: Halide's pool (HL_NUM_THREADS). No Halide or attnforge library is needed\n"
       " * at run time: this library carries Halide's runtime. */\n";
  return s.str();
}

files generate(const ir::graph& g, const options& o) {
  if (!valid_c_name(o.name)) throw argument_error("kernel name '" + o.name + "': must be a C identifier");
  if (o.targets.empty()) throw argument_error("no target given");
  const detail::dim_sizes bound = detail::checked_bindings(g, o.bind);
  std::vector<Halide::Target> targets;
  for (const std::string& t : o.targets) targets.push_back(parse_target(t));
  if (o.with_lse) detail::lse_softmax(g);  // exactly one softmax: argument_error otherwise
  jit_options jo{.target = "", .bind = {}, .with_weights = o.with_weights, .with_lse = o.with_lse, .path = o.path, .schedule = o.schedule};

  // One pipeline per target: vector widths and default tiles depend on it.
  auto pipeline_for = [&](const Halide::Target& target, std::vector<Halide::Argument>& args) {
    // A tuning record for this kernel, its bound sizes and this target replaces the default
    // schedule, as in the JIT (tuned_schedule.hpp); records naming an autoscheduler are not used here.
    jit_options jt = jo;
    jt.target = target.to_string();
    jt.bind = o.bind;
    if (detail::apply_tuning_record(g, jt, bound) && !jt.schedule.starts_with("auto="))
      std::fprintf(stderr, "attn-gen: %s for %s uses the tuning record [%s]\n", o.name.c_str(), jt.target.c_str(),
                   jt.schedule.c_str());
    else
      jt.schedule = jo.schedule;
    gen::lowered l = gen::lower_and_schedule(g, bound, detail::choose_lowering(g, jt, bound, target), target);
    if (o.with_weights && !l.weights.defined()) throw argument_error("with_weights: the expression has no softmax");
    constrain(g, l, bound);
    args.assign(l.params.begin(), l.params.end());
    std::vector<Halide::Func> results{l.output};
    if (o.with_weights) results.push_back(l.weights);
    if (o.with_lse) results.push_back(l.lse);
    return Halide::Pipeline(results);
  };

  std::filesystem::create_directories(o.out_dir);
  const std::filesystem::path base = o.out_dir / o.name;
  files out{base.string() + ".a", base.string() + ".h", {}};
  try {
    Halide::compile_multitarget(
        o.name, {{Halide::OutputFileType::static_library, out.library.string()}, {Halide::OutputFileType::c_header, out.header.string()}},
        targets, {}, [&](const std::string& fn, const Halide::Target& target) {
          std::vector<Halide::Argument> args;
          return pipeline_for(target, args).compile_to_module(args, fn, target);
        });
    std::vector<Halide::Argument> args;
    Halide::Pipeline first = pipeline_for(targets.front(), args);
    auto listing = [&](bool wanted, const std::string& ext, auto&& write) {
      if (!wanted) return;
      out.listings.push_back(base.string() + ext);
      write(out.listings.back().string());
    };
    listing(o.stmt, ".stmt", [&](const std::string& f) { first.compile_to_lowered_stmt(f, args, Halide::StmtOutputFormat::Text, targets.front()); });
    listing(o.stmt_html, ".stmt.html", [&](const std::string& f) { first.compile_to_lowered_stmt(f, args, Halide::StmtOutputFormat::HTML, targets.front()); });
    listing(o.assembly, ".s", [&](const std::string& f) { first.compile_to_assembly(f, args, o.name, targets.front()); });
  } catch (const Halide::Error& e) {
    throw compile_error(std::string("Halide: ") + e.what());
  }

  // The ABI, spelled out above Halide's declarations.
  std::ifstream in(out.header);
  std::ostringstream halide_header;
  halide_header << in.rdbuf();
  in.close();
  std::ofstream(out.header, std::ios::trunc) << abi_comment(g, o) << halide_header.str();
  return out;
}

}  // namespace attn::aot
