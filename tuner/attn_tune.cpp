// attn-tune: tunes the fused kernel of registered expressions (attnforge's named variants and,
// in a tuner built by attn_add_tuner, the program's own ATTN_REGISTER_KERNEL expressions) at the
// sizes given, prints the default against the best schedule found (and each Halide autoscheduler
// asked for), and writes the best into the tuning database, where attn::jit, attn-gen and
// attn_add_kernel find it (runtime/tuning_db.hpp).
//   attn-tune causal_attention --bind T=1024 --bind Dh=64 --budget 120
//   attn-tune causal_attention --bind T=1024 --bind Dh=64 --batch 4   (timed on 4 sequences per call)
//   attn-tune causal_attention --bind T=1024 --bind Dh=128 --no-search --autoschedulers none --schedule 'pv_rows=0'
//   attn-tune causal_attention --bind T=1024 --bind Dh=64 --target host-cuda   (on the machine with the GPU)
//   attn-tune --list
// Every run-time dim of a kernel must be bound: the record is for those sizes (their bucket).
// Exit status: 0 done, 1 a kernel failed (its message on stderr; the others still run), 2 an
// option is wrong (checked before any tuning: a kernel, binding, budget, autoscheduler, schedule or
// target that cannot be used, a database file that may not be written, a summary file that cannot be).
#include <charconv>
#include <cmath>
#include <cstdio>
#include <deque>
#include <fstream>
#include <iostream>
#include <CLI/CLI.hpp>
#include <Halide.h>
#include <nlohmann/json.hpp>
#include "dsl/gradient.hpp"
#include "generators/aot/registry.hpp"
#include "generators/autoschedule.hpp"
#include "generators/cpu/flash_schedule.hpp"
#include "generators/gpu/flash_gpu_schedule.hpp"
#include "runtime/dim_bindings.hpp"
#include "runtime/errors.hpp"
#include "runtime/tuning_key.hpp"
#include "runtime/target_check.hpp"
#include "tuner.hpp"

namespace attn::aot {
void register_named_variants();  // named_variants.cpp
}

namespace {

using namespace attn::tune;

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// One table row: a candidate's time, relative to the default.
void print_row(const char* label, const candidate* c, double default_s) {
  if (c == nullptr) {
    std::printf("  %-16s %s\n", label, "not tried (time budget)");
    return;
  }
  if (c->status != outcome::ok) {
    std::printf("  %-16s %-14s %s\n", label, to_string(c->status), c->message.substr(0, 160).c_str());
    return;
  }
  const double s = c->seconds();
  std::printf("  %-16s %9.3f ms %6.2fx  [%s]\n", label, s * 1e3, default_s / s, c->schedule.c_str());
}

const candidate* find_origin(const tune_result& r, const std::string& origin) {
  for (const candidate& c : r.candidates)
    if (c.origin == origin) return &c;
  return nullptr;
}

nlohmann::json summary(const std::string& kernel, const attn::detail::dim_sizes& sizes, std::int64_t batch, const tune_result& r) {
  auto entry = [&](const candidate* c) {
    if (c == nullptr) return nlohmann::json{{"status", "not tried"}};
    nlohmann::json j{{"status", to_string(c->status)}, {"schedule", c->schedule}};
    if (c->status == outcome::ok) j["ms"] = c->seconds() * 1e3;
    else j["message"] = c->message;
    return j;
  };
  nlohmann::json j{{"kernel", kernel}, {"sizes", sizes}, {"batch", batch}, {"default", entry(&r.default_candidate())}, {"tuned", entry(&r.best())},
                   {"tried", r.candidates.size()}, {"planned", r.planned}, {"seconds", r.elapsed_s}};
  for (const std::string& a : attn::gen::autoscheduler_names()) j["autoschedulers"][a] = entry(find_origin(r, a));
  return j;
}

// The kernels asked for, each with the sizes of its dims among `binds` (every run-time dim bound),
// or the reason they cannot be tuned.
struct planned_kernel {
  const attn::aot::kernel_entry* entry;
  attn::detail::dim_sizes sizes;
};

std::vector<planned_kernel> plan(const std::vector<std::string>& kernels, const std::vector<std::string>& binds) {
  const attn::aot::registry& reg = attn::aot::registry::get();
  std::deque<std::string> names;
  std::vector<attn::dsl::dim_binding> all;
  for (const std::string& b : binds) all.push_back(attn::detail::parse_dim_binding("--bind", b, names));
  std::vector<planned_kernel> planned;
  std::vector<bool> used(all.size(), false);
  for (const std::string& k : kernels) {
    const attn::aot::kernel_entry* e = reg.find(k);
    if (e == nullptr) throw attn::argument_error("unknown kernel '" + k + "'; known:\n" + reg.listing());
    std::vector<attn::dsl::dim_binding> own;  // the bindings of this kernel's dims
    for (std::size_t i = 0; i < all.size(); ++i)
      if (attn::ir::has_dim(e->graph, all[i].name)) own.push_back(all[i]), used[i] = true;
    attn::detail::dim_sizes sizes = attn::detail::checked_bindings(e->graph, own);
    for (const attn::dsl::dim_binding& b : own) sizes.emplace(std::string(b.name), b.size);  // fixed ones too: the record's sizes
    if (!attn::shape_bucket(e->graph, sizes)) {
      std::string missing;
      for (const std::string& d : attn::ir::run_time_dims(e->graph))
        if (!sizes.contains(d)) missing += (missing.empty() ? "" : ", ") + d;
      throw attn::argument_error("kernel '" + k + "': bind every run-time dim (--bind NAME=SIZE): " + missing);
    }
    planned.push_back({e, std::move(sizes)});
  }
  for (std::size_t i = 0; i < all.size(); ++i)
    if (!used[i]) throw attn::argument_error("--bind " + std::string(all[i].name) + ": no kernel asked for has that dim");
  return planned;
}

// Option checks (CLI11 validators): what is wrong with the value, or nothing.
constexpr double max_budget_s = 7 * 24 * 3600;

std::string check_budget(const std::string& text) {
  double s = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), s);
  if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(s) || s <= 0 || s > max_budget_s)
    return "seconds per case: a number more than 0 and at most " + std::to_string(int(max_budget_s)) + " (a week), not '" + text + "'";
  return {};
}

// Parameters of the fused CPU or GPU schedule and values each allows (whether the values fit
// together and the target depends on the kernel's default, and is reported per candidate), or
// "auto=" and an autoscheduler's name.
std::string check_schedule(const std::string& text) {
  try {
    if (text.starts_with("auto=")) {
      attn::gen::autoscheduler_of(text);
    } else {
      try {
        attn::gen::flash_schedule s;
        attn::gen::flash_schedule::parameters().read(text, s);
      } catch (const std::invalid_argument&) {
        attn::gen::flash_gpu_schedule g;
        attn::gen::flash_gpu_schedule::parameters().read(text, g);
      }
    }
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return {};
}

// A target this machine runs (the tuner compiles and times on it): its CPU, or a GPU target whose
// device Halide finds here (CUDA on an NVIDIA GPU, OpenCL on any OpenCL device).
std::string check_target(const std::string& text) {
  const std::string spelled = text == "host" ? Halide::get_host_target().to_string() : text;
  if (!Halide::Target::validate_target_string(spelled)) return "'" + text + "' is not a Halide target";
  const Halide::Target target(spelled);
  try {
    attn::detail::check_jit_can_run(target, text);
  } catch (const attn::compile_error& e) {
    return e.what();
  }
  if (target.has_gpu_feature() && !Halide::host_supports_target_device(target))
    return "'" + text + "': no device on this machine runs this GPU target (Halide finds none); tune on the machine that has it";
  return {};
}

int run(int argc, char** argv) {
  attn::aot::register_named_variants();
  const attn::aot::registry& reg = attn::aot::registry::get();
  if (!reg.duplicates().empty()) {
    std::fprintf(stderr, "attn-tune: kernel '%s' is registered twice\n", reg.duplicates().front().c_str());
    return 2;
  }
  CLI::App app{"attn-tune: search schedules for the fused kernel of registered expressions at given sizes, record the best", "attn-tune"};
  std::vector<std::string> kernels, binds;
  double budget = 60;
  std::int64_t batch = 1;
  std::string db, target = "host", summary_file;
  std::vector<std::string> autos = attn::gen::autoscheduler_names(), given;
  bool no_search = false, dry_run = false, list = false, gradients = false;
  std::vector<std::string> autoscheduler_choices = attn::gen::autoscheduler_names();
  autoscheduler_choices.push_back("none");
  app.add_option("kernels", kernels, "kernels to tune: names listed below");
  app.add_option("-b,--bind", binds, "the size of a dim, e.g. T=1024 (repeat; every run-time dim of every kernel)")->allow_extra_args(false);
  app.add_option("--budget", budget, "seconds per kernel")->check(CLI::Validator(check_budget, "SECONDS"));
  app.add_option("--batch", batch, "sequences per call the kernels are timed with (default 1; every batch runs the same kernel)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
  app.add_option("--db", db, "tuning database file (default: $ATTN_TUNING_DB, else ~/.cache/attnforge/tuning.json; off: none)");
  app.add_option("--target", target, "Halide target string: this machine's CPU, or a GPU target its device runs (host-cuda, host-opencl)")
      ->check(CLI::Validator(check_target, "TARGET"));
  app.add_option("--autoschedulers", autos, "Halide autoschedulers tried as candidates ('none': no autoscheduler)")
      ->delimiter(',')
      ->allow_extra_args(false)  // one list per occurrence: a kernel after it stays a kernel
      ->default_str(join(attn::gen::autoscheduler_names()))
      ->check(CLI::IsMember(autoscheduler_choices));
  app.add_option("--schedule", given, "a schedule to try too (repeatable), e.g. 'q_tile=24 kv_tile=192' (parameters not given: the default's)")
      ->allow_extra_args(false)
      ->check(CLI::Validator(check_schedule, "SCHEDULE"));
  app.add_flag("--gradients", gradients,
               "tune the kernels' gradients (attn::jit_gradients, attn-gen --gradients): the fused backward's tiles");
  app.add_flag("--no-search", no_search, "only the default, the autoschedulers and the schedules given");
  app.add_flag("--dry-run", dry_run, "do not write the database");
  app.add_option("--summary", summary_file, "append one JSON line per kernel to this file (scripts/tune_bench.sh)");
  app.add_flag("--list", list, "list the kernels' names and exit");
  app.footer(reg.listing() + "autoschedulers: " + join(attn::gen::autoscheduler_names()) +
             "\nexit status: 0 done, 1 a kernel failed, 2 an option is wrong");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help: 0
  }

  std::vector<planned_kernel> planned;
  try {
    planned = plan(kernels, binds);
  } catch (const attn::error& e) {
    std::fprintf(stderr, "attn-tune: %s\n", e.what());
    return 2;
  }
  if (list) {
    for (const auto& [n, e] : reg.entries()) std::printf("%s\n", n.c_str());
    return 0;
  }
  if (planned.empty()) {
    std::fprintf(stderr, "attn-tune: which kernel? Give one or more of:\n%s", reg.listing().c_str());
    return 2;
  }
  if (std::find(autos.begin(), autos.end(), "none") != autos.end()) {
    if (autos.size() > 1) {
      std::fprintf(stderr, "attn-tune: --autoschedulers: 'none' cannot be given with autoschedulers\n");
      return 2;
    }
    autos.clear();
  }
  // A GPU target: Halide's autoschedulers have CPU schedules only.
  if (Halide::Target(target == "host" ? Halide::get_host_target().to_string() : target).has_gpu_feature()) {
    if (app.count("--autoschedulers") && !autos.empty()) {
      std::fprintf(stderr, "attn-tune: --autoschedulers: Halide's autoschedulers are offered for CPU targets only; give none with a GPU target\n");
      return 2;
    }
    if (!autos.empty()) std::printf("autoschedulers: none on a GPU target (CPU targets only)\n");
    autos.clear();
  }
  std::optional<std::filesystem::path> db_path = db.empty() ? attn::tuning_db_path() : std::optional(std::filesystem::path(db));
  if (db == "off") db_path.reset();
  if (db_path && !dry_run) {
    try {  // before minutes of tuning: a database that cannot be written
      attn::check_tuning_db_writable(*db_path);
    } catch (const attn::error& e) {
      std::fprintf(stderr, "attn-tune: --db: %s\n", e.what());
      return 2;
    }
  }
  std::ofstream summary_out;
  if (!summary_file.empty()) {
    summary_out.open(summary_file, std::ios::app);
    if (!summary_out) {
      std::fprintf(stderr, "attn-tune: --summary: cannot append to %s\n", summary_file.c_str());
      return 2;
    }
  }

  int failures = 0;
  for (const planned_kernel& k : planned) {
    const std::string& name = k.entry->name;
    try {
      tune_options o;
      o.sizes = k.sizes;
      o.target = target;
      o.budget_seconds = budget;
      o.batch = batch;
      o.autoschedulers = autos;
      o.schedules = given;
      o.search = !no_search;
      std::string sizes;
      for (const auto& [d, n] : k.sizes) sizes += " " + d + "=" + std::to_string(n);
      if (batch > 1) sizes += " batch=" + std::to_string(batch);
      std::printf("%s%s%s (budget %.0f s)\n", name.c_str(), gradients ? ", gradients" : "", sizes.c_str(), budget);
      std::fflush(stdout);
      const tune_result r = tune(gradients ? attn::ir::gradient(k.entry->graph) : k.entry->graph, o);
      const double def = r.default_candidate().seconds();
      print_row("default", &r.default_candidate(), def);
      print_row("tuned", &r.best(), def);
      for (const std::string& a : autos) print_row(a.c_str(), find_origin(r, a), def);
      for (const candidate& c : r.candidates)
        if (c.origin == "given") print_row("given", &c, def);
      std::size_t wrong = 0, failed = 0;
      for (const candidate& c : r.candidates) {
        wrong += c.status == outcome::wrong;
        failed += c.status == outcome::compile_failed || c.status == outcome::run_failed || c.status == outcome::timed_out;
      }
      std::printf("  %zu of %zu planned candidates tried in %.0f s (%zu wrong, %zu failed)\n", r.candidates.size(), r.planned,
                  r.elapsed_s, wrong, failed);
      for (const candidate& c : r.candidates)  // each failed candidate, and why
        if (c.status != outcome::ok && c.status != outcome::skipped)
          std::printf("    %s %s [%s]: %s\n", to_string(c.status), c.origin.c_str(), c.schedule.c_str(), c.message.c_str());
      if (db_path && !dry_run) {
        const attn::tuning_record rec = make_record(r, o);
        attn::write_tuning_records(*db_path, {rec});
        std::printf("  recorded in %s: %s %s\n", db_path->c_str(), rec.signature.c_str(), rec.bucket.c_str());
      }
      if (summary_out.is_open()) summary_out << summary(name, k.sizes, batch, r).dump() << std::endl;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "attn-tune: %s: %s\n", name.c_str(), e.what());
      ++failures;
    }
    std::fflush(stdout);
  }
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {  // never an uncaught exception
    std::fprintf(stderr, "attn-tune: %s\n", e.what());
    return 1;
  }
}
