// attnforge's CUDA kernels (built ahead of time, CMakeLists.txt: one set per schedule) timed on
// the GPU: fp32 forward, B = 4, H = 16, T from the command line, Dh 64 and 128, full and causal
// (and with the default schedule: ALiBi + causal, softcap 20 + causal, a sliding window of 256).
// q, k, v stay on the device between calls (kernel_buffer: copied over on the first call only);
// each timing is the median of the calls made in about --seconds (at least 3, at most --reps),
// each followed by a device sync. Every kernel's output is then checked against a double
// reference on sample rows (first, last, and between; two heads): a wrong kernel is reported as
// FAIL with its error and the program exits 1. Prints one CSV row per case:
//   impl,schedule,mask,T,Dh,ms,gflops,peak_fraction,max_error
// FLOPs: 4·B·H·Dh per query-key pair the mask keeps: T² for full attention, half of it for causal
// (the work a masked kernel must do; the convention of FlashAttention's benchmarks). peak_fraction: of --peak-tflops (fp32, no tensor cores).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_bench_kernels.h"
#include "runtime/kernel_buffer.hpp"
#include "tests/support/reference.hpp"

namespace {

constexpr int B = 4, H = 16;

std::vector<float> random_values(std::size_t n, std::uint64_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {  // a 64-bit LCG: 67M values in well under a second
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    x = static_cast<float>(seed >> 40) / static_cast<float>(1 << 24) * 2.0f - 1.0f;
  }
  return v;
}

// What a mask keeps and how a modifier changes a score, as the kernels of kernels.cpp define them.
struct mask_kind {
  bool causal = false;
  int window = 0;        // > 0: a query keeps its last `window` keys (itself included)
  bool alibi = false;    // s - slope(h)·(q - kv)
  float softcap = 0;     // > 0: cap·tanh(s / cap)
  bool keeps(int q, int kv) const { return (!causal || kv <= q) && (window == 0 || (kv <= q && q - kv < window)); }
};

mask_kind kind_of(const char* mask) {
  const std::string m = mask;
  if (m == "causal") return {.causal = true};
  if (m == "alibi") return {.causal = true, .alibi = true};
  if (m == "softcap") return {.causal = true, .softcap = 20.0f};
  if (m == "window") return {.window = 256};
  return {};
}

// Query-key pairs the mask keeps: the FLOPs count only those (FlashAttention's convention).
double kept_pairs(const mask_kind& m, int t) {
  if (m.window > 0) {
    double pairs = 0;
    for (int q = 0; q < t; ++q) pairs += std::min(q + 1, m.window);
    return pairs;
  }
  return m.causal ? 0.5 * double(t) * t : double(t) * t;
}

// The largest |kernel - reference| over sample rows of two (batch, head) pairs, in double.
double max_error(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v, const std::vector<float>& out,
                 int t, int dh, const mask_kind& mask) {
  double worst = 0;
  const std::size_t head_size = std::size_t(t) * dh;
  for (std::size_t bh : {std::size_t{0}, std::size_t{B} * H - 1})
    for (int i : {0, 1, t / 3, t / 2, t - 2, t - 1}) {
      if (i < 0 || i >= t) continue;
      const float* qi = q.data() + bh * head_size + std::size_t(i) * dh;
      std::vector<double> s(t, -INFINITY);
      double m = -INFINITY;
      for (int j = 0; j < t; ++j) {
        if (!mask.keeps(i, j)) continue;
        const float* kj = k.data() + bh * head_size + std::size_t(j) * dh;
        double dot = 0;
        for (int d = 0; d < dh; ++d) dot += double(qi[d]) * kj[d];
        s[j] = dot / std::sqrt(double(dh));
        if (mask.alibi) s[j] -= attn::ref::alibi_slope(attn::ref::index(bh % H), H) * double(i - j);
        if (mask.softcap > 0) s[j] = mask.softcap * std::tanh(s[j] / mask.softcap);
        m = std::max(m, s[j]);
      }
      double sum = 0;
      for (double& x : s) sum += (x = std::isinf(x) ? 0.0 : std::exp(x - m));
      for (int d = 0; d < dh; ++d) {
        double o = 0;
        for (int j = 0; j < t; ++j) o += s[j] * v[bh * head_size + std::size_t(j) * dh + d];
        worst = std::max(worst, std::abs(o / sum - out[bh * head_size + std::size_t(i) * dh + d]));
      }
    }
  return worst;
}

struct timing {
  double ms = 0, error = 0;
  int rc = 0;
};

timing run(const bench_kernel& x, int t, int reps, double seconds) {
  const std::size_t n = std::size_t{B} * H * t * x.dh;
  std::vector<float> q = random_values(n, 1), k = random_values(n, 2), v = random_values(n, 3), out(n, NAN);
  timing r;
  std::vector<double> ms;
  {
    attn::aot::kernel_buffer qb(q.data(), {B, H, t, x.dh}), kb(k.data(), {B, H, t, x.dh}), vb(v.data(), {B, H, t, x.dh}),
        ob(out.data(), {B, H, t, x.dh});
    halide_buffer_t* o = ob;
    auto call = [&] {
      if ((r.rc = x.run(qb, kb, vb, ob)) == 0) r.rc = o->device_interface->device_sync(nullptr, o);
    };
    call();  // warm-up: copies the inputs, loads the module
    using clock = std::chrono::steady_clock;
    const auto begin = clock::now();
    while (r.rc == 0 && int(ms.size()) < reps &&
           (ms.size() < 3 || std::chrono::duration<double>(clock::now() - begin).count() < seconds)) {
      const auto start = clock::now();
      call();
      ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - start).count());
    }
    if (r.rc == 0) r.rc = ob.copy_to_host();
  }
  if (r.rc != 0 || ms.empty()) return r;
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  r.ms = ms[ms.size() / 2];
  r.error = max_error(q, k, v, out, t, x.dh, kind_of(x.mask));
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> ts;
  double peak_tflops = 0, seconds = 2, tolerance = 1e-4;
  int reps = 20;
  std::string only, masks;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--peak-tflops") && i + 1 < argc) peak_tflops = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--tolerance") && i + 1 < argc) tolerance = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];  // cases whose schedule contains this
    else if (!std::strcmp(argv[i], "--masks") && i + 1 < argc) masks = "," + std::string(argv[++i]) + ",";  // e.g. alibi,window
    else ts.push_back(std::atoi(argv[i]));
  }
  if (ts.empty()) ts = {1024, 4096, 8192};
  // Halide's default handler aborts (e.g. no CUDA driver): print the message, report the code.
  halide_set_error_handler([](void*, const char* msg) { std::fprintf(stderr, "halide: %s\n", msg); });
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::printf("impl,schedule,mask,T,Dh,ms,gflops,peak_fraction,max_error\n");
  int failures = 0;
  for (int t : ts)
    for (const bench_kernel& x : bench_kernels) {
      if (std::string(x.schedule).find(only) == std::string::npos) continue;
      if (!masks.empty() && masks.find("," + std::string(x.mask) + ",") == std::string::npos) continue;
      const timing r = run(x, t, reps, seconds);
      if (r.rc != 0) {
        std::fprintf(stderr, "FAIL attnforge [%s] %s T=%d Dh=%d: error %d\n", x.schedule, x.mask, t, x.dh, r.rc);
        ++failures;
        continue;
      }
      if (!(r.error <= tolerance)) {
        std::fprintf(stderr, "FAIL attnforge [%s] %s T=%d Dh=%d: output error %g above %g\n", x.schedule, x.mask, t, x.dh, r.error,
                     tolerance);
        ++failures;
      }
      const double flops = 4.0 * B * H * kept_pairs(kind_of(x.mask), t) * x.dh;
      const double gflops = flops / (r.ms * 1e6);
      std::printf("attnforge,%s,%s,%d,%d,%.3f,%.1f,%.4f,%.2g\n", x.schedule, x.mask, t, x.dh, r.ms, gflops,
                  peak_tflops > 0 ? gflops / (peak_tflops * 1e3) : 0.0, r.error);
    }
  return failures ? 1 : 0;
}
