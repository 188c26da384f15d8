// attnforge's CUDA kernels (built ahead of time, CMakeLists.txt: one set per schedule) timed on
// the GPU: fp32 forward, B = 4, H = 16, T from the command line, Dh 64 and 128, full and causal
// (and with the default schedule: ALiBi + causal, softcap 20 + causal, a sliding window of 256);
// then the default schedule's backward (impl attnforge-backward: d_q, d_k, d_v from d_out and
// the output and log-sum-exp its forward saved, which stay on the device).
// q, k, v stay on the device between calls (kernel_buffer: copied over on the first call only);
// each timing is the median of the calls made in about --seconds (at least 3, at most --reps),
// each followed by a device sync. Every kernel's output is then checked against a double
// reference on sample rows (first, last, and between; two heads; the backward: those rows of d_q,
// those keys of d_k and d_v, relative to the largest of each): a wrong kernel is reported as FAIL
// with its error and the program exits 1. Prints one CSV row per case:
//   impl,schedule,mask,T,Dh,ms,gflops,peak_fraction,max_error
// FLOPs: 4·B·H·Dh per query-key pair the mask keeps: T² for full attention, half of it for causal
// (the work a masked kernel must do; the convention of FlashAttention's benchmarks); the backward
// 2.5 times that (its five products to the forward's two). peak_fraction: of --peak-tflops (fp32,
// no tensor cores).
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

// The backward's error on the sample rows (d_q) and keys (d_k, d_v) of two heads, each relative to
// the largest magnitude of its reference there, in double from the forward's saved output and
// log-sum-exp: P = exp(S - lse), dP = dO·Vᵀ, D = rowsum(dO ∘ O), dS = P ∘ (dP - D) through the
// modifier's derivative, d_q = dS·K/√Dh, d_k = dSᵀ·Q/√Dh, d_v = Pᵀ·dO.
struct backward_values {
  const std::vector<float>&q, &k, &v, &dy, &out, &lse, &dq, &dk, &dv;
};
double backward_error(const backward_values& x, int t, int dh, const mask_kind& mask) {
  const double scale = 1.0 / std::sqrt(double(dh));
  double worst = 0;
  const std::vector<int> samples{0, 1, t / 3, t / 2, t - 2, t - 1};
  for (std::size_t bh : {std::size_t{0}, std::size_t{B} * H - 1}) {
    const std::size_t head = bh * std::size_t(t) * dh;
    auto row = [&](const std::vector<float>& m, int i) { return m.data() + head + std::size_t(i) * dh; };
    auto dot = [&](const float* a, const float* b) {
      double s = 0;
      for (int d = 0; d < dh; ++d) s += double(a[d]) * b[d];
      return s;
    };
    // p_ij and dS_ij (through the modifier) of a kept pair.
    auto pair = [&](int i, int j, double& p, double& ds) {
      const double raw = dot(row(x.q, i), row(x.k, j)) * scale;
      double s = raw, slope = 1;
      if (mask.alibi) s -= attn::ref::alibi_slope(attn::ref::index(bh % H), H) * double(i - j);
      if (mask.softcap > 0) {
        const double th = std::tanh(s / mask.softcap);
        s = mask.softcap * th;
        slope = 1 - th * th;
      }
      p = std::exp(s - x.lse[bh * std::size_t(t) + std::size_t(i)]);
      ds = p * (dot(row(x.dy, i), row(x.v, j)) - dot(row(x.dy, i), row(x.out, i))) * slope;
    };
    std::vector<double> want(dh);
    auto compare = [&](const float* got) {
      double err = 0, largest = 0;
      for (int d = 0; d < dh; ++d) {
        err = std::max(err, std::abs(got[d] - want[d]));
        largest = std::max(largest, std::abs(want[d]));
      }
      return largest > 0 ? err / largest : err;
    };
    for (int s : samples) {
      if (s < 0 || s >= t) continue;
      std::fill(want.begin(), want.end(), 0.0);
      for (int j = 0; j < t; ++j) {  // d_q of query s
        if (!mask.keeps(s, j)) continue;
        double p, ds;
        pair(s, j, p, ds);
        for (int d = 0; d < dh; ++d) want[d] += ds * scale * row(x.k, j)[d];
      }
      worst = std::max(worst, compare(row(x.dq, s)));
      std::vector<double> want_v(dh, 0.0);
      std::fill(want.begin(), want.end(), 0.0);
      for (int i = 0; i < t; ++i) {  // d_k and d_v of key s
        if (!mask.keeps(i, s)) continue;
        double p, ds;
        pair(i, s, p, ds);
        for (int d = 0; d < dh; ++d) {
          want[d] += ds * scale * row(x.q, i)[d];
          want_v[d] += p * row(x.dy, i)[d];
        }
      }
      worst = std::max(worst, compare(row(x.dk, s)));
      want.swap(want_v);
      worst = std::max(worst, compare(row(x.dv, s)));
    }
  }
  return worst;
}

struct timing {
  double ms = 0, error = 0;
  int rc = 0;
};

// The median time of `call` (which sets rc) over the calls made in about `seconds`, at least 3 and
// at most `reps`, after a first call (the warm-up: copies the inputs, loads the module).
template <class Call>
double median_ms(const Call& call, const int& rc, int reps, double seconds) {
  std::vector<double> ms;
  call();
  using clock = std::chrono::steady_clock;
  const auto begin = clock::now();
  while (rc == 0 && int(ms.size()) < reps && (ms.size() < 3 || std::chrono::duration<double>(clock::now() - begin).count() < seconds)) {
    const auto start = clock::now();
    call();
    ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - start).count());
  }
  if (ms.empty()) return 0;
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return ms[ms.size() / 2];
}

int device_sync(halide_buffer_t* b) { return b->device_interface->device_sync(nullptr, b); }

timing run(const bench_kernel& x, int t, int reps, double seconds) {
  const std::size_t n = std::size_t{B} * H * t * x.dh;
  std::vector<float> q = random_values(n, 1), k = random_values(n, 2), v = random_values(n, 3), out(n, NAN);
  timing r;
  {
    attn::aot::kernel_buffer qb(q.data(), {B, H, t, x.dh}), kb(k.data(), {B, H, t, x.dh}), vb(v.data(), {B, H, t, x.dh}),
        ob(out.data(), {B, H, t, x.dh});
    auto call = [&] {
      if ((r.rc = x.run(qb, kb, vb, ob)) == 0) r.rc = device_sync(ob);
    };
    r.ms = median_ms(call, r.rc, reps, seconds);
    if (r.rc == 0) r.rc = ob.copy_to_host();
  }
  if (r.rc == 0) r.error = max_error(q, k, v, out, t, x.dh, kind_of(x.mask));
  return r;
}

// The backward after its forward (which saves out and lse on the device); the backward's calls timed.
timing run_backward(const backward_kernel& x, int t, int reps, double seconds) {
  const std::size_t n = std::size_t{B} * H * t * x.dh;
  std::vector<float> q = random_values(n, 1), k = random_values(n, 2), v = random_values(n, 3), dy = random_values(n, 4);
  std::vector<float> out(n, NAN), lse(std::size_t{B} * H * t, NAN), dq(n, NAN), dk(n, NAN), dv(n, NAN);
  timing r;
  {
    using attn::aot::kernel_buffer;
    kernel_buffer qb(q.data(), {B, H, t, x.dh}), kb(k.data(), {B, H, t, x.dh}), vb(v.data(), {B, H, t, x.dh}),
        yb(dy.data(), {B, H, t, x.dh}), ob(out.data(), {B, H, t, x.dh}), lb(lse.data(), {B, H, t}), dqb(dq.data(), {B, H, t, x.dh}),
        dkb(dk.data(), {B, H, t, x.dh}), dvb(dv.data(), {B, H, t, x.dh});
    if ((r.rc = x.forward(qb, kb, vb, ob, lb)) == 0) r.rc = device_sync(lb);
    auto call = [&] {
      if ((r.rc = x.backward(qb, kb, vb, yb, ob, lb, dqb, dkb, dvb)) == 0) r.rc = device_sync(dvb);
    };
    if (r.rc == 0) r.ms = median_ms(call, r.rc, reps, seconds);
    for (kernel_buffer* b : {&ob, &lb, &dqb, &dkb, &dvb})
      if (r.rc == 0) r.rc = b->copy_to_host();
  }
  if (r.rc == 0) r.error = backward_error({q, k, v, dy, out, lse, dq, dk, dv}, t, x.dh, kind_of(x.mask));
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
  // One CSV row; `passes`: the FLOPs as multiples of the forward's.
  auto report = [&](const char* impl, const char* schedule, const char* mask, int t, int dh, const timing& r, double passes) {
    if (r.rc != 0) {
      std::fprintf(stderr, "FAIL %s [%s] %s T=%d Dh=%d: error %d\n", impl, schedule, mask, t, dh, r.rc);
      ++failures;
      return;
    }
    if (!(r.error <= tolerance)) {
      std::fprintf(stderr, "FAIL %s [%s] %s T=%d Dh=%d: output error %g above %g\n", impl, schedule, mask, t, dh, r.error, tolerance);
      ++failures;
    }
    const double gflops = passes * 4.0 * B * H * kept_pairs(kind_of(mask), t) * dh / (r.ms * 1e6);
    std::printf("%s,%s,%s,%d,%d,%.3f,%.1f,%.4f,%.2g\n", impl, schedule, mask, t, dh, r.ms, gflops,
                peak_tflops > 0 ? gflops / (peak_tflops * 1e3) : 0.0, r.error);
  };
  auto selected = [&](const char* mask) { return masks.empty() || masks.find("," + std::string(mask) + ",") != std::string::npos; };
  for (int t : ts)
    for (const bench_kernel& x : bench_kernels)
      if (std::string(x.schedule).find(only) != std::string::npos && selected(x.mask))
        report("attnforge", x.schedule, x.mask, t, x.dh, run(x, t, reps, seconds), 1.0);
  if (std::string("default").find(only) != std::string::npos)
    for (int t : ts)
      for (const backward_kernel& x : backward_kernels)
        if (selected(x.mask)) report("attnforge-backward", "default", x.mask, t, x.dh, run_backward(x, t, reps, seconds), 2.5);
  return failures ? 1 : 0;
}
