// The memory of a kernel's intermediates (test_aot_memory, label aot): at its first call a kernel
// installs an allocator that keeps an attnforge call's blocks of 1 MiB and more for the next call,
// taking fresh ones from the allocator installed before it (here the program's, which counts
// them); other Halide code's allocations still reach the program's allocator as they were.
// `test_aot_memory none` runs with ATTN_SCRATCH_CACHE=0: every call takes and frees its blocks.
// A program of its own: the allocator is installed once per process.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "aot_causal_attention.h"
#include "runtime/kernel_buffer.hpp"

namespace {

using attn::aot::kernel_buffer;

constexpr std::size_t large = std::size_t(1) << 20;
std::atomic<int> large_taken{0}, large_freed{0}, foreign{0};
int marker;  // other Halide code's user_context

// The program's allocator, installed before the kernel's first call: aligned as Halide asks, each
// block's size kept in front of it.
void* counting_malloc(void* user_context, std::size_t bytes) {
  if (bytes >= large) ++large_taken;
  if (user_context == &marker) ++foreign;
  char* base = static_cast<char*>(std::aligned_alloc(128, 128 + (bytes + 127) / 128 * 128));
  if (base == nullptr) return nullptr;
  std::memcpy(base, &bytes, sizeof bytes);
  return base + 128;
}

void counting_free(void* user_context, void* p) {
  if (p == nullptr) return;
  char* base = static_cast<char*>(p) - 128;
  std::size_t bytes;
  std::memcpy(&bytes, base, sizeof bytes);
  if (bytes >= large) ++large_freed;
  if (user_context == &marker) ++foreign;
  std::free(base);
}

int failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

// aot_causal_attention on (1, 8, 8192, 16) tensors: its copy of Kᵀ is 4 MiB.
constexpr int T = 8192, Dh = 16;

std::vector<float> run_once(const std::vector<float>& x) {
  std::vector<float> y(x.size());
  kernel_buffer q(const_cast<float*>(x.data()), {1, 8, T, Dh}), k(const_cast<float*>(x.data()), {1, 8, T, Dh}),
      v(const_cast<float*>(x.data()), {1, 8, T, Dh}), o(y.data(), {1, 8, T, Dh});
  if (aot_causal_attention(q, k, v, o) != 0) std::printf("call failed: %s\n", aot_causal_attention_error());
  return y;
}

}  // namespace

int main(int argc, char** argv) {
  const bool kept = !(argc > 1 && std::strcmp(argv[1], "none") == 0);
  halide_set_custom_malloc(counting_malloc);
  halide_set_custom_free(counting_free);
  std::vector<float> x(std::size_t(8) * T * Dh);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 101) / 101.0f - 0.5f;

  const std::vector<float> first = run_once(x);
  const int after_first = large_taken.load();
  check(after_first > 0, "the first call takes its large blocks from the program's allocator (" + std::to_string(after_first) + ")");
  const std::vector<float> second = run_once(x), third = run_once(x);
  check(second == first && third == first, "every call's output is the same");
  if (kept) {
    check(large_taken.load() == after_first, "later calls reuse the kept blocks: " + std::to_string(large_taken.load() - after_first) + " taken");
    check(large_freed.load() == 0, "kept blocks are not freed: " + std::to_string(large_freed.load()));
  } else {
    check(large_taken.load() == 3 * after_first, "ATTN_SCRATCH_CACHE=0: each call takes its blocks (" + std::to_string(large_taken.load()) + ")");
    check(large_freed.load() == large_taken.load(), "ATTN_SCRATCH_CACHE=0: and frees them (" + std::to_string(large_freed.load()) + ")");
  }

  // Calls on two threads at once share the kept blocks; their outputs stay the same.
  std::vector<float> a, b;
  std::thread t([&] { for (int i = 0; i < 3; ++i) a = run_once(x); });
  for (int i = 0; i < 3; ++i) b = run_once(x);
  t.join();
  check(a == first && b == first, "calls on two threads: the same outputs");
  if (kept) check(large_taken.load() <= 2 * after_first, "calls on two threads take at most one more set of blocks: " + std::to_string(large_taken.load()));

  // Other Halide code's allocations reach the program's allocator with their user_context.
  void* p = halide_malloc(&marker, 2 * large);
  halide_free(&marker, p);
  check(p != nullptr && foreign.load() == 2, "other Halide code's blocks go to the program's allocator (" + std::to_string(foreign.load()) + " of 2)");
  std::printf("%s: %d failure(s)\n", failures ? "FAILED" : "passed", failures);
  return failures ? 1 : 0;
}
