#include "tuned_schedule.hpp"

#include <iostream>
#include <mutex>
#include <set>
#include <Halide.h>
#include "errors.hpp"
#include "lowering_choice.hpp"
#include "tuning_db.hpp"
#include "tuning_key.hpp"

namespace attn::detail {

namespace {

// Why the kernel cannot take the record's schedule on `target`, or empty when it can: the lowering
// choice both the JIT and ahead-of-time compilation make, with the record's schedule.
std::string why_not_applicable(const ir::graph& g, const jit_options& o, const dim_sizes& bound, const Halide::Target& target,
                               const std::string& schedule) {
  jit_options tuned = o;
  tuned.schedule = schedule;
  try {
    choose_lowering(g, tuned, bound, target);
    return {};
  } catch (const std::exception& e) {  // compile_error, argument_error
    return e.what();
  }
}

// Once per process for each record and reason: jit() looks records up on every call. (Bounded:
// a database rewritten without end must not grow this process.)
void report_once(const std::string& line) {
  static std::mutex m;
  static std::set<std::string> reported;
  const std::lock_guard lock(m);
  if (reported.size() >= 1000) reported.clear();
  if (reported.insert(line).second) std::cerr << line << "\n";
}

}  // namespace

bool apply_tuning_record(const ir::graph& g, jit_options& o, const dim_sizes& bound) {
  if (o.schedule != "default" || !o.use_tuning_db) return false;
  const std::optional<std::filesystem::path> file = tuning_db_path();
  return file && apply_tuning_record(g, o, bound, *file).has_value();
}

std::optional<tuning_record> apply_tuning_record(const ir::graph& g, jit_options& o, const dim_sizes& bound,
                                                 const std::filesystem::path& file) {
  if (o.schedule != "default" || !o.use_tuning_db) return std::nullopt;
  const std::optional<std::string> bucket = shape_bucket(g, bound);
  if (!bucket) return std::nullopt;  // unbound run-time dims: no sizes to match
  const std::optional<tuning_record> r = find_tuning_record(file, tuning_signature(g, o), *bucket, tuning_target(o.target));
  if (!r) return std::nullopt;
  const std::string spelled = o.target == "host" ? Halide::get_host_target().to_string() : o.target;
  if (!Halide::Target::validate_target_string(spelled)) return std::nullopt;  // compiling reports the target
  const Halide::Target target(spelled);
  // Only where the default applies: otherwise compiling reports what is wrong with the options.
  if (!why_not_applicable(g, o, bound, target, "default").empty()) return std::nullopt;
  if (const std::string why = why_not_applicable(g, o, bound, target, r->schedule); !why.empty()) {
    report_once("attnforge: tuning database " + file.string() + ": record " + r->signature + " " + *bucket + " " + r->target +
                " [" + r->schedule.substr(0, 200) + "] does not apply (" + why + "); the default schedule is used");
    return std::nullopt;
  }
  o.schedule = r->schedule;
  return r;
}

}  // namespace attn::detail
