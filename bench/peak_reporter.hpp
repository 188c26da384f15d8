#pragma once
// A console reporter that adds GFLOP/s and the fraction of the machine's FMA peak (fma_peak.hpp) to
// every row whose benchmark set the counter "flops" (per iteration).
//
// The peak is measured in the same run: at the start and again before each benchmark's rows are
// printed, keeping the best so far. One measurement takes milliseconds, so on a shared machine a
// single one may land in a busy moment; the best of many is the machine's peak, and fractions
// against it are never flattered by a low one.
//
// With process_cpu (for benchmarks that call MeasureProcessCPUTime()), rows also get
// cpu_peak_fraction: flops per CPU-second of all the process's threads over the FMA loop's flops per
// CPU-second of one thread (its best). On a machine shared with other work, time the kernel's threads
// wait for a core counts in the wall time but not here; time they spin waiting for work counts
// here, so this fraction errs low.
#include <algorithm>
#include <string>
#include <ctime>
#include <vector>
#include <benchmark/benchmark.h>
#include "fma_peak.hpp"

namespace bench {

class peak_reporter : public benchmark::ConsoleReporter {
 public:
  explicit peak_reporter(bool process_cpu = false) : process_cpu_(process_cpu) { measure(); }

  double peak_gflops() const { return peak_gflops_; }

  double core_peak_gflops() const { return core_peak_gflops_; }

  // Measures the peaks a few times more; keeps the best.
  void measure(int times = 5) {
    for (int i = 0; i < times; ++i) {
      peak_gflops_ = std::max(peak_gflops_, measure_fma_peak_gflops());
      if (process_cpu_) core_peak_gflops_ = std::max(core_peak_gflops_, core_cpu_time_peak());
    }
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
        if (process_cpu_ && r.cpu_accumulated_time > 0)
          r.counters["cpu_peak_fraction"] =
              r.counters["flops"].value * double(r.iterations) / r.cpu_accumulated_time / 1e9 / core_peak_gflops_;
      }
    }
    ConsoleReporter::ReportRuns(copy);
  }

 private:
  // The FMA loop on this thread alone, per second of its CPU time.
  static double core_cpu_time_peak() {
    const long iterations = 1'000'000;
    const auto cpu = [] {
      timespec t{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
      return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
    };
    const double t0 = cpu();
    volatile double keep = chains(iterations);
    (void)keep;
    return 2.0 * 256 * double(iterations) / (cpu() - t0) / 1e9;
  }

  bool process_cpu_;
  double peak_gflops_ = 0, core_peak_gflops_ = 0;
};

}  // namespace bench
