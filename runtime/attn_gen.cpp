// The generator program: `attn-gen` (attnforge's named variants) and every generator built by
// attn_add_kernel (the same, plus the user's ATTN_REGISTER_KERNEL expressions). Builds one
// registered kernel ahead of time into a static library and a C header with its checks
// (runtime/aot_compile.hpp); with -g, it is Halide's generator program instead (the pipeline
// alone, Halide's flags: kernel_generator.hpp).
#include <algorithm>
#include <cstdio>
#include <deque>
#include <exception>
#include <string_view>
#include <CLI/CLI.hpp>
#include "generators/aot/registry.hpp"
#include "runtime/aot_compile.hpp"
#include "runtime/dim_bindings.hpp"
#include "runtime/errors.hpp"
#include "runtime/tuning_db.hpp"

namespace attn::aot {

void register_named_variants();  // named_variants.cpp

int generator_main(int argc, char** argv) {
  register_named_variants();
  if (!registry::get().duplicates().empty()) {
    std::fprintf(stderr, "attn-gen: kernel '%s' is registered twice\n", registry::get().duplicates().front().c_str());
    return 2;
  }
  if (std::find_if(argv + 1, argv + argc, [](const char* a) { return std::string_view(a) == "-g"; }) != argv + argc) {
    try {
      return halide_generator_main(argc, argv);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "attn-gen: %s\n", e.what());
      return 1;
    }
  }
  CLI::App app{"Builds an attnforge kernel ahead of time: a static library and a C header (no Halide needed to use them).",
               "attn-gen"};
  app.footer(registry::get().listing() +
             "\nAs Halide's generator program (the pipeline alone, without the checks; Halide's flags and GeneratorParams):\n"
             "  attn-gen -g KERNEL -o DIR target=host[,...] [-e static_library,h,stmt_html,schedule] [-f FUNCTION]\n"
             "           [DIM=SIZE...] [schedule=...] [path=...] [with_weights=true] [with_lse=true] [gradients=true]\n"
             "           [tuning_db=FILE|default] [autoscheduler=NAME autoscheduler.KEY=VALUE...]\n");
  std::string kernel, name, schedule = "default", path = "automatic", out_dir = ".", c_compiler, tuning_db;
  std::vector<std::string> targets{"host"}, binds;
  bool with_weights = false, with_lse = false, gradients = false, stmt = false, html = false, assembly = false, list = false,
       entry_point_only = false;
  app.add_option("kernel", kernel, "the kernel to build: a name listed below");
  app.add_flag("--list", list, "print the kernels' names, one a line, and exit");
  app.add_option("-n,--name", name, "the C function and file name (default: the kernel's, :: as _)");
  app.add_option("-t,--target", targets,
                 "Halide target(s), e.g. host or x86-64-linux-avx2; several: dispatch at run time, most specific first, the last is the fallback")
      ->delimiter(',');
  app.add_option("-b,--bind", binds, "fix a run-time dim at build time, e.g. T=128 (repeat for several)");
  app.add_option("-s,--schedule", schedule, "fused schedule parameters, e.g. \"q_tile=32 kv_tile=64\" (default: chosen per shape and target)");
  app.add_option("-p,--path", path, "lowering: automatic, fused or generic")->check(CLI::IsMember({"automatic", "fused", "generic"}));
  app.add_flag("-w,--with-weights", with_weights, "also output the attention weights (generic lowering)");
  app.add_flag("--with-lse", with_lse, "also output each softmax row's log-sum-exp (an expression with one softmax)");
  app.add_flag("--gradients", gradients,
               "build the kernel's gradients instead (attn::jit_gradients): the tensors, then d_output, then output and lse as the "
               "forward saved them (one softmax), then one d_<tensor> per float tensor");
  app.add_option("--tuning-db", tuning_db,
                 "take the schedule from this tuning database's record for the kernel, its sizes and each target, if it has one "
                 "('default': attn::jit's database, $ATTN_TUNING_DB, else ~/.cache/attnforge/tuning.json); without: the default "
                 "schedule. The header names each target's schedule and where it came from");
  app.add_option("-o,--output-dir", out_dir, "where to write NAME.a and NAME.h (default: .)");
  app.add_option("--cc", c_compiler,
                 "the C compiler for the kernel's entry point (its checks), e.g. clang or aarch64-linux-gnu-gcc; "
                 "default: $CC, else the compiler attnforge was built with; a clang is given --target for another machine");
  app.add_flag("--entry-point-only", entry_point_only,
               "write only the entry point (the checks) as NAME_entry.a, and NAME.h, for the pipeline that "
               "`-g KERNEL -f NAME_unchecked target=TARGET-user_context,...` builds (attn_add_kernel does both)");
  app.add_flag("--stmt", stmt, "also write Halide's lowered statement, NAME.stmt");
  app.add_flag("--html", html, "also write it as a web page, NAME.stmt.html");
  app.add_flag("--assembly", assembly, "also write the assembly, NAME.s");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (list) {
    for (const auto& [n, e] : registry::get().entries()) std::printf("%s\n", n.c_str());
    return 0;
  }
  const kernel_entry* entry = kernel.empty() ? nullptr : registry::get().find(kernel);
  if (entry == nullptr) {
    std::fprintf(stderr, "attn-gen: %s\n%s", kernel.empty() ? "which kernel? Give one of:" : ("unknown kernel '" + kernel + "'; known:").c_str(),
                 registry::get().listing().c_str());
    return 2;
  }
  try {
    options o;
    o.name = name.empty() ? c_identifier(entry->name) : name;
    o.targets = targets;
    std::deque<std::string> names;
    for (const std::string& b : binds) o.bind.push_back(detail::parse_dim_binding("--bind", b, names));
    o.schedule = schedule;
    o.path = path == "fused" ? lowering::fused : path == "generic" ? lowering::generic : lowering::automatic;
    o.with_weights = with_weights;
    o.with_lse = with_lse;
    o.gradients = gradients;
    o.out_dir = out_dir;
    o.stmt = stmt;
    o.stmt_html = html;
    o.assembly = assembly;
    o.entry_point_only = entry_point_only;
    o.c_compiler = c_compiler;
    if (tuning_db == "default") o.tuning_db = tuning_db_path();
    else if (!tuning_db.empty()) o.tuning_db = std::filesystem::path(tuning_db);
    const files f = generate(entry->graph, o);
    std::printf("attn-gen: %s -> %s, %s\n", entry->name.c_str(), f.library.c_str(), f.header.c_str());
    for (const auto& l : f.listings) std::printf("attn-gen: listing %s\n", l.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attn-gen: %s: %s\n", kernel.c_str(), e.what());
    return 1;
  }
}

}  // namespace attn::aot

int main(int argc, char** argv) { return attn::aot::generator_main(argc, argv); }
