#pragma once
// Timing on a noisy, shared machine: several runs and their median (robust to a run slowed by
// another process), and interleaved rounds for the final comparison (each round runs every
// leader once, so a slow minute hurts them all alike instead of one).
#include <functional>
#include <vector>

namespace attn::tune {

struct timing_options {
  int min_repeats = 3, max_repeats = 15;
  double min_seconds = 0.3;  // keep repeating (up to max_repeats) until this much time is spent
  double give_up = 3;        // a first run slower than give_up × the best median so far ends the timing
};

double median(std::vector<double> seconds);

// Seconds per call of fn (already warmed up by the caller), one entry per run.
std::vector<double> time_runs(const std::function<void()>& fn, const timing_options& o, double best_seconds);

// times[i]: the `rounds` times of fns[i], from rounds in which every fn ran once, order rotated.
std::vector<std::vector<double>> time_interleaved(const std::vector<std::function<void()>>& fns, int rounds);

}  // namespace attn::tune
