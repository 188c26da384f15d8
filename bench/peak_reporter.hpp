#pragma once
// A console reporter that adds GFLOP/s and the fraction of the machine's FMA peak (measured in the
// same run, fma_peak.hpp) to every row whose benchmark set the counter "flops" (per iteration).
#include <string>
#include <vector>
#include <benchmark/benchmark.h>

namespace bench {

class peak_reporter : public benchmark::ConsoleReporter {
 public:
  explicit peak_reporter(double peak_gflops) : peak_gflops_(peak_gflops) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    std::vector<Run> copy = runs;
    for (Run& r : copy) {
      // Spread aggregates (stddev, cv) are not times: a rate of them means nothing.
      const bool time = r.run_type != Run::RT_Aggregate || (r.aggregate_name != "stddev" && r.aggregate_name != "cv");
      if (time && r.counters.count("flops") && r.real_accumulated_time > 0) {
        const double gflops = r.counters["flops"].value * double(r.iterations) / r.real_accumulated_time / 1e9;
        r.counters["GFLOP/s"] = gflops;
        r.counters["peak_fraction"] = gflops / peak_gflops_;
      }
    }
    ConsoleReporter::ReportRuns(copy);
  }

 private:
  double peak_gflops_;
};

}  // namespace bench
