#pragma once
// A console reporter that adds GFLOP/s and the fraction of the machine's FMA peak (fma_peak.hpp) to
// every row whose benchmark set the counter "flops" (per iteration).
//
// The peak is measured in the same run: at the start and again before each benchmark's rows are
// printed, keeping the best so far. One measurement takes milliseconds, so on a shared machine a
// single one may land in a busy moment; the best of many is the machine's peak, and fractions
// against it are never flattered by a low one.
#include <algorithm>
#include <string>
#include <vector>
#include <benchmark/benchmark.h>
#include "fma_peak.hpp"

namespace bench {

class peak_reporter : public benchmark::ConsoleReporter {
 public:
  peak_reporter() { measure(); }

  double peak_gflops() const { return peak_gflops_; }

  // Measures the peak a few times more; keeps the best.
  void measure(int times = 5) {
    for (int i = 0; i < times; ++i) peak_gflops_ = std::max(peak_gflops_, measure_fma_peak_gflops());
  }

  void ReportRuns(const std::vector<Run>& runs) override {
    measure();
    std::vector<Run> copy = runs;
    for (Run& r : copy) {
      // Spread aggregates (stddev, cv) are not times: a rate of them means nothing.
      const bool time = r.run_type != Run::RT_Aggregate || (r.aggregate_name != "stddev" && r.aggregate_name != "cv");
      if (time && r.counters.count("flops") && r.real_accumulated_time > 0) {
        const double gflops = r.counters["flops"].value * double(r.iterations) / r.real_accumulated_time / 1e9;
        r.counters["GFLOP/s"] = gflops;
        r.counters["peak_fraction"] = gflops / peak_gflops_;
        r.counters["peak"] = peak_gflops_;
      }
    }
    ConsoleReporter::ReportRuns(copy);
  }

 private:
  double peak_gflops_ = 0;
};

}  // namespace bench
