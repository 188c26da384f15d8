#pragma once
// The tuner: searches the fused kernel's schedule parameters (the CPU schedule's, or the GPU
// schedule's on a GPU target; and, if asked, Halide's autoschedulers) for one expression at
// concrete sizes on one target, within a time budget.
//   1. the default schedule (always a candidate: the result is never slower in these measurements);
//   2. each autoscheduler asked for, within its share of the budget (a search or compile past it
//      is stopped: compile_in_child.hpp), then each schedule given;
//   3. the default's one-step neighbours, then a pruned grid (search_space.hpp) in a seeded random
//      order, for ~60 % of the budget left
//      (its first candidate always, even past the budget: a search compares at least two kernels);
//   4. local refinement: neighbours of the best few, until the budget less the re-timing's share;
//   5. the leaders and the default re-timed in interleaved rounds; the fastest median is chosen.
// Every candidate's output is checked against the default's before it is timed (output_check.hpp);
// one that fails to compile, throws or is wrong is recorded as such and never chosen.
#include <cstdio>
#include <functional>
#include <span>
#include <string>
#include <vector>
#include "dsl/to_ir.hpp"
#include "random_inputs.hpp"
#include "runtime/tuning_db.hpp"
#include "timing.hpp"

namespace attn::tune {

struct tune_options {
  dim_sizes sizes;                           // every run-time dim, e.g. {{"T", 1024}}
  std::int64_t batch = 1;                    // sequences per call (the batch dim of batched tensors)
  std::string target = "host";
  double budget_seconds = 60;
  std::vector<std::string> autoschedulers;   // of gen::autoscheduler_names(); empty: none
  // The autoschedulers, in turn, use at most this share of the budget together, each an equal
  // part of what the earlier ones left. Each runs in a child process that is stopped at its limit
  // (reported as timed_out); with the disk kernel cache off (ATTN_CACHE_DIR=off) they run in this
  // process, unbounded.
  double autoscheduler_share = 0.5;
  std::vector<std::string> schedules;        // schedule texts tried after the autoschedulers (before the grid)
  bool search = true;                        // the grid and its refinement (false: only the candidates above)
  int leaders = 3, rounds = 5;               // re-timed at the end: `leaders` best and the default
  timing_options timing{};
  unsigned seed = 1;                         // inputs and the grid's order
  std::FILE* log = stderr;                   // progress (nullptr: quiet)
  // Called on each candidate's output before it is checked (tests inject wrong results with it).
  std::function<void(const std::string& schedule, std::span<float> output)> output_hook;
};

enum class outcome { ok, compile_failed, run_failed, wrong, skipped, timed_out };
const char* to_string(outcome o);

struct candidate {
  std::string schedule;   // fused schedule text (flash_schedule or flash_gpu_schedule) or "auto=<name>"
  std::string origin;     // "default", "grid", "refine", or the autoscheduler's name
  outcome status = outcome::skipped;
  std::string message;    // why it failed
  std::vector<double> times;        // seconds per call, first measurement
  double median_s = 0;              // of `times`
  std::vector<double> final_times;  // the interleaved re-timing (leaders only)
  double compile_s = 0;
  double seconds() const;           // the final median if re-timed, else median_s
};

struct tune_result {
  std::vector<candidate> candidates;  // candidates[0] is the default
  std::size_t chosen = 0;
  std::size_t planned = 0;            // candidates planned (some may be skipped for the budget)
  double elapsed_s = 0;
  std::string signature, bucket, target, expression;
  const candidate& best() const { return candidates[chosen]; }
  const candidate& default_candidate() const { return candidates.front(); }
};

// Throws attn::compile_error where the default schedule itself fails or the expression has no
// fused attention to tune.
tune_result tune(const ir::graph& g, const tune_options& o);

template <dsl::expression E>
tune_result tune(const E& e, const tune_options& o) {
  return tune(dsl::to_ir(e), o);
}

// The database record of a result (schedule, times, date, versions).
tuning_record make_record(const tune_result& r, const tune_options& o);

}  // namespace attn::tune
