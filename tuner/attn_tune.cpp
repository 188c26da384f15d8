// attn-tune: tunes the fused kernel of the CPU benchmark's cases at given sizes, prints the
// default against the best schedule found (and each Halide autoscheduler asked for), and writes
// the best into the tuning database, where attn::jit finds it (runtime/tuning_db.hpp).
//   attn-tune causal full --T 1024 --Dh 64 --budget 120
//   attn-tune causal --Dh 128 --no-search --autoschedulers none --schedule 'pv_rows=0 pv_keys=0'
//   attn-tune --list
// Exit status: 0 done, 1 a case failed (its message on stderr; the others still run), 2 an option
// is wrong (checked before any tuning: a case, size, budget, autoscheduler, schedule or target
// that cannot be used, a database file that may not be written, a summary file that cannot be).
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <CLI/CLI.hpp>
#include <Halide.h>
#include <nlohmann/json.hpp>
#include "bench_cases.hpp"
#include "generators/autoschedule.hpp"
#include "generators/cpu/flash_schedule.hpp"
#include "runtime/errors.hpp"
#include "runtime/target_check.hpp"
#include "tuner.hpp"

namespace {

using namespace attn::tune;

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// One table row: a candidate's time and GFLOP/s, relative to the default.
void print_row(const char* label, const candidate* c, double flops, double default_s) {
  if (c == nullptr) {
    std::printf("  %-16s %s\n", label, "not tried (time budget)");
    return;
  }
  if (c->status != outcome::ok) {
    std::printf("  %-16s %-14s %s\n", label, to_string(c->status), c->message.substr(0, 100).c_str());
    return;
  }
  const double s = c->seconds();
  std::printf("  %-16s %9.3f ms %8.1f GFLOP/s %6.2fx  [%s]\n", label, s * 1e3, flops / s / 1e9, default_s / s, c->schedule.c_str());
}

const candidate* find_origin(const tune_result& r, const std::string& origin) {
  for (const candidate& c : r.candidates)
    if (c.origin == origin) return &c;
  return nullptr;
}

nlohmann::json summary(const std::string& name, std::int64_t t, std::int64_t dh, const bench_case& bc, const tune_result& r) {
  auto entry = [&](const candidate* c) {
    if (c == nullptr) return nlohmann::json{{"status", "not tried"}};
    nlohmann::json j{{"status", to_string(c->status)}, {"schedule", c->schedule}};
    if (c->status == outcome::ok) j.update({{"ms", c->seconds() * 1e3}, {"gflops", bc.flops / c->seconds() / 1e9}});
    else j["message"] = c->message;
    return j;
  };
  nlohmann::json j{{"case", name}, {"T", t}, {"Dh", dh}, {"default", entry(&r.default_candidate())}, {"tuned", entry(&r.best())},
                   {"tried", r.candidates.size()}, {"planned", r.planned}, {"seconds", r.elapsed_s}};
  for (const std::string& a : attn::gen::autoscheduler_names()) j["autoschedulers"][a] = entry(find_origin(r, a));
  return j;
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

// Parameters of the fused CPU schedule and values each allows (whether the values fit together
// depends on the kernel's default, and is reported per candidate), or "auto=" and an
// autoscheduler's name.
std::string check_schedule(const std::string& text) {
  try {
    if (text.starts_with("auto=")) {
      attn::gen::autoscheduler_of(text);
    } else {
      attn::gen::flash_schedule s;
      attn::gen::flash_schedule::parameters().read(text, s);
    }
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return {};
}

// A CPU target this machine runs (the tuner compiles and times on it).
std::string check_target(const std::string& text) {
  const std::string spelled = text == "host" ? Halide::get_host_target().to_string() : text;
  if (!Halide::Target::validate_target_string(spelled)) return "'" + text + "' is not a Halide target";
  const Halide::Target target(spelled);
  if (target.has_gpu_feature()) return "'" + text + "' is a GPU target; attn-tune searches the fused CPU schedule";
  try {
    attn::detail::check_jit_can_run(target, text);
  } catch (const attn::compile_error& e) {
    return e.what();
  }
  return {};
}

int run(int argc, char** argv) {
  CLI::App app{"attn-tune: search schedules for the fused attention kernel of the benchmark cases, record the best"};
  std::vector<std::string> cases;
  std::int64_t T = 1024, Dh = 64;
  double budget = 60;
  std::string db, target = "host", summary_file;
  std::vector<std::string> autos = attn::gen::autoscheduler_names(), given;
  bool no_search = false, dry_run = false, list = false;
  std::vector<std::string> autoscheduler_choices = attn::gen::autoscheduler_names();
  autoscheduler_choices.push_back("none");
  app.add_option("cases", cases, "cases to tune (default: all): " + join(bench_case_names()))->check(CLI::IsMember(bench_case_names()));
  app.add_option("--T", T, "sequence length")->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 20));
  app.add_option("--Dh", Dh, "head width (64 or 128)")->check(CLI::IsMember({64, 128}));
  app.add_option("--budget", budget, "seconds per case")->check(CLI::Validator(check_budget, "SECONDS"));
  app.add_option("--db", db, "tuning database file (default: $ATTN_TUNING_DB, else ~/.cache/attnforge/tuning.json; off: none)");
  app.add_option("--target", target, "Halide target string (a CPU this machine runs)")->check(CLI::Validator(check_target, "TARGET"));
  app.add_option("--autoschedulers", autos, "Halide autoschedulers tried as candidates ('none': no autoscheduler)")
      ->delimiter(',')
      ->allow_extra_args(false)  // one list per occurrence: a case after it stays a case
      ->default_str(join(attn::gen::autoscheduler_names()))
      ->check(CLI::IsMember(autoscheduler_choices));
  app.add_option("--schedule", given, "a schedule to try too (repeatable), e.g. 'q_tile=24 kv_tile=192' (parameters not given: the default's)")
      ->allow_extra_args(false)
      ->check(CLI::Validator(check_schedule, "SCHEDULE"));
  app.add_flag("--no-search", no_search, "only the default, the autoschedulers and the schedules given");
  app.add_flag("--dry-run", dry_run, "do not write the database");
  app.add_option("--summary", summary_file, "append one JSON line per case to this file (scripts/tune_bench.sh)");
  app.add_flag("--list", list, "list the cases and exit");
  app.footer("cases: " + join(bench_case_names()) + "\nautoschedulers: " + join(attn::gen::autoscheduler_names()) +
             "\nexit status: 0 done, 1 a case failed, 2 an option is wrong");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help: 0
  }

  if (list) {
    for (const std::string& n : bench_case_names()) std::printf("%s\n", n.c_str());
    return 0;
  }
  if (cases.empty()) cases = bench_case_names();
  if (std::find(autos.begin(), autos.end(), "none") != autos.end()) {
    if (autos.size() > 1) {
      std::fprintf(stderr, "attn-tune: --autoschedulers: 'none' cannot be given with autoschedulers\n");
      return 2;
    }
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
  for (const std::string& name : cases) {
    try {
      const bench_case bc = make_bench_case(name, T, Dh);
      tune_options o;
      o.sizes = {{"T", T}};
      o.target = target;
      o.budget_seconds = budget;
      o.autoschedulers = autos;
      o.schedules = given;
      o.search = !no_search;
      std::printf("%s T=%lld Dh=%lld (budget %.0f s)\n", name.c_str(), (long long)T, (long long)Dh, budget);
      std::fflush(stdout);
      const tune_result r = tune(bc.graph, o);
      const double def = r.default_candidate().seconds();
      print_row("default", &r.default_candidate(), bc.flops, def);
      print_row("tuned", &r.best(), bc.flops, def);
      for (const std::string& a : autos) print_row(a.c_str(), find_origin(r, a), bc.flops, def);
      for (const candidate& c : r.candidates)
        if (c.origin == "given") print_row("given", &c, bc.flops, def);
      std::size_t wrong = 0, failed = 0;
      for (const candidate& c : r.candidates) {
        wrong += c.status == outcome::wrong;
        failed += c.status == outcome::compile_failed || c.status == outcome::run_failed || c.status == outcome::timed_out;
      }
      std::printf("  %zu of %zu planned candidates tried in %.0f s (%zu wrong, %zu failed)\n", r.candidates.size(), r.planned,
                  r.elapsed_s, wrong, failed);
      if (db_path && !dry_run) {
        attn::write_tuning_records(*db_path, {make_record(r, o)});
        std::printf("  recorded in %s\n", db_path->c_str());
      }
      if (summary_out.is_open()) summary_out << summary(name, T, Dh, bc, r).dump() << std::endl;
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
