// attnforge's CUDA kernels (built ahead of time, CMakeLists.txt) timed on the GPU: fp32 forward,
// B = 4, H = 16, T from the command line, Dh 64 and 128, full and causal. q, k, v stay on the
// device between calls (kernel_buffer: copied over on the first call only); each timing is the
// median of --reps calls, each followed by a device sync. Prints one CSV row per case:
//   impl,mask,T,Dh,ms,gflops,peak_fraction
// FLOPs: 4·B·H·T²·Dh for full attention, half of it for causal (the work a causal kernel must do;
// the convention of FlashAttention's benchmarks). peak_fraction: of --peak-tflops (fp32, no tensor cores).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_causal_128.h"
#include "gpu_causal_64.h"
#include "gpu_full_128.h"
#include "gpu_full_64.h"
#include "generators/aot/kernel_buffer.hpp"

namespace {

using kernel = int (*)(halide_buffer_t*, halide_buffer_t*, halide_buffer_t*, halide_buffer_t*);

double time_ms(kernel f, int t, int dh, int reps, int& rc) {
  constexpr int B = 4, H = 16;
  const std::size_t n = std::size_t{B} * H * t * dh;
  std::vector<float> q(n), k(n), v(n), out(n);
  for (std::size_t i = 0; i < n; ++i) q[i] = k[i] = v[i] = static_cast<float>((i * 7919) % 1000) / 1000.0f - 0.5f;
  attn::aot::kernel_buffer qb(q.data(), {B, H, t, dh}), kb(k.data(), {B, H, t, dh}), vb(v.data(), {B, H, t, dh}),
      ob(out.data(), {B, H, t, dh});
  halide_buffer_t* o = ob;
  auto call = [&] {
    if ((rc = f(qb, kb, vb, ob)) == 0) rc = o->device_interface->device_sync(nullptr, o);
  };
  call();  // warm-up: copies the inputs, loads the module
  std::vector<double> ms;
  for (int r = 0; r < reps && rc == 0; ++r) {
    const auto start = std::chrono::steady_clock::now();
    call();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  if (rc == 0) rc = ob.copy_to_host();
  if (ms.empty()) return 0;
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> ts;
  double peak_tflops = 0;
  int reps = 20;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--peak-tflops") && i + 1 < argc) peak_tflops = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else ts.push_back(std::atoi(argv[i]));
  }
  if (ts.empty()) ts = {1024, 4096, 8192};
  // Halide's default handler aborts (e.g. no CUDA driver): print the message, report the code.
  halide_set_error_handler([](void*, const char* msg) { std::fprintf(stderr, "halide: %s\n", msg); });
  struct variant {
    const char* mask;
    int dh;
    kernel f;
  };
  const variant variants[] = {{"full", 64, gpu_full_64}, {"full", 128, gpu_full_128}, {"causal", 64, gpu_causal_64}, {"causal", 128, gpu_causal_128}};
  std::printf("impl,mask,T,Dh,ms,gflops,peak_fraction\n");
  int failures = 0;
  for (int t : ts)
    for (const variant& x : variants) {
      int rc = 0;
      const double ms = time_ms(x.f, t, x.dh, reps, rc);
      if (rc != 0) {
        std::fprintf(stderr, "attnforge %s T=%d Dh=%d: error %d\n", x.mask, t, x.dh, rc);
        ++failures;
        continue;
      }
      const double flops = 4.0 * 4 * 16 * double(t) * t * x.dh * (std::strcmp(x.mask, "causal") ? 1.0 : 0.5);
      const double gflops = flops / (ms * 1e6);
      std::printf("attnforge,%s,%d,%d,%.3f,%.1f,%.3f\n", x.mask, t, x.dh, ms, gflops, peak_tflops > 0 ? gflops / (peak_tflops * 1e3) : 0.0);
      std::fflush(stdout);
    }
  return failures ? 1 : 0;
}
