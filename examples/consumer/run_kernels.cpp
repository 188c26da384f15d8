// Runs the two kernels built ahead of time and writes their outputs (raw float32) to the folder
// given as argument: causal.bin, mine.bin. Links only the kernels' static libraries.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include "causal_kernel.h"
#include "runtime/kernel_buffer.hpp"
#include "inputs.hpp"
#include "my_kernel.h"

namespace {

using attn::aot::kernel_buffer;
using namespace consumer;

// Runs one per-head kernel on q, k, v of shape (1, heads, T, Dh) and writes its output.
template <class Kernel>
bool run(Kernel kernel, std::int64_t heads, const std::filesystem::path& file) {
  // [snippet: call]
  const std::int64_t n = heads * T * Dh;
  std::vector<float> q = values(n, 1), k = values(n, 2), v = values(n, 3), out(static_cast<std::size_t>(n));
  kernel_buffer qb(q.data(), {1, heads, T, Dh}), kb(k.data(), {1, heads, T, Dh}), vb(v.data(), {1, heads, T, Dh}),
      ob(out.data(), {1, heads, T, Dh});
  if (const int rc = kernel(qb, kb, vb, ob); rc != 0) {
    std::fprintf(stderr, "%s: kernel returned %d\n", file.c_str(), rc);
    return false;
  }
  // [end snippet]
  std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(n * sizeof(float)));
  std::printf("%s: %lld values, first %.6f\n", file.c_str(), static_cast<long long>(n), out[0]);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: run_kernels OUTPUT_DIR\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  // A kernel whose call fails says why in NAME_error().
  if (!run(causal_kernel, causal_heads, dir / "causal.bin")) {
    std::fprintf(stderr, "causal_kernel: %s\n", causal_kernel_error());
    return 1;
  }
  if (!run(my_kernel, my_heads, dir / "mine.bin")) {
    std::fprintf(stderr, "my_kernel: %s\n", my_kernel_error());
    return 1;
  }
  return 0;
}
