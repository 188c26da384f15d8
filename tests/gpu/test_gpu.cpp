// GPU schedules run for real: kernels built ahead of time for one GPU API (CMakeLists.txt beside
// this file builds this program twice: test_opencl, kernels for host-opencl, run on whatever
// OpenCL platform is installed, PoCL on a machine without a GPU; test_cuda, kernels for
// host-cuda-cuda_capability_80, run on an NVIDIA GPU) and compared with the double reference
// (tests/support/reference.hpp) under the suite's tolerance rule. The program links no libHalide (the JIT
// and PoCL in one process can clash over LLVM): only the kernels' libraries, which carry Halide's
// runtime. Covers the fused GPU schedule in its default, register tiles where Dh is bound (full,
// causal, sliding window, ALiBi, softcap with the log-sum-exp, sigmoid attention: softmax-free;
// tails: sizes not multiples of the tiles) and with other tiles (shared=2), its per-thread variant
// (shared=0, rolled), its shared-memory variant, shared=1 (full; causal with the
// log-sum-exp; a sliding window; with and without staged tiles; last key tiles with fewer keys than threads, where
// PoCL once went wrong), its register-tile variant, shared=2, the GPU products (projections, W_O) and the generic GPU schedule (with
// the log-sum-exp; the weights, a generic-only path), bfloat16 and float16 tensors on CUDA (storage;
// float32 arithmetic), and the backward pass (built GRADIENTS).
//
// With no platform or device for the API the program exits 77, which ctest reports as skipped
// (CI installs PoCL, scripts/setup.sh, so there test_opencl runs; test_cuda runs where a GPU is).
// Each case prints its time (PoCL compiles a kernel at its first launch: most of it);
// `test_opencl WORD` runs only the cases whose name contains WORD.
#include <dlfcn.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "gpu_kernels.h"  // the kernels of this API, as gpu::NAME (gpu_kernels.h.in)
#include "runtime/kernel_buffer.hpp"
#include "support/reference.hpp"
#include "support/reference_gradient.hpp"

namespace {

using attn::aot::kernel_buffer;
using attn::ref::index;
template <class Acc>
using mat = attn::ref::mat<Acc>;

int failures = 0;
std::string last_error;

void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

std::vector<float> random_values(index n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = u(rng);
  return v;
}

template <class Acc>
mat<Acc> slice(const std::vector<float>& t, index first, index rows, index cols) {
  mat<Acc> m(rows, cols);
  for (index i = 0; i < rows * cols; ++i) m.a[static_cast<std::size_t>(i)] = static_cast<Acc>(t[static_cast<std::size_t>(first + i)]);
  return m;
}

// Runs the kernel; copies the output (and the weights, if any) back from the device.
int run(const std::function<int()>& call, std::vector<kernel_buffer*> outputs) {
  last_error.clear();
  if (const int rc = call(); rc != 0) return rc;
  for (kernel_buffer* o : outputs)
    if (const int rc = o->copy_to_host(); rc != 0) return rc;
  return 0;
}

// Per-head attention over q, k, v of shape (B, H = 8, T, Dh), checked head by head; kernels built
// WITH_LSE also write each row's log-sum-exp, (B, H, T), checked too.
using per_head_kernel = int (*)(halide_buffer_t*, halide_buffer_t*, halide_buffer_t*, halide_buffer_t*);
using per_head_lse_kernel = int (*)(halide_buffer_t*, halide_buffer_t*, halide_buffer_t*, halide_buffer_t*, halide_buffer_t*);
using mask_pred = attn::ref::mask_pred;
using score_mod = std::function<double(double, index, index, index)>;
using weight_fn = std::function<double(double score, index keys)>;  // softmax-free attention's weights

struct heads_case {
  std::string name;
  index b, t, dh;
  mask_pred keep = {};   // empty: every key
  score_mod mod = {};    // empty: none
  weight_fn weight = {};  // empty: softmax
  bool sixteen_bit = false;  // k bfloat16, v float16 (the reference reads the same rounded values)
};

void check_heads(const heads_case& c, const std::function<int(halide_buffer_t**)>& kernel, bool with_lse) {
  constexpr index H = 8;
  const index b = c.b, t = c.t, dh = c.dh;
  const index n = b * H * t * dh;
  std::vector<float> q = random_values(n, 1), k = random_values(n, 2), v = random_values(n, 3), out(static_cast<std::size_t>(n), -7.0f),
                     lse(static_cast<std::size_t>(b * H * t), -7.0f);
  std::vector<attn::bfloat16> k16;
  std::vector<attn::float16> v16;
  if (c.sixteen_bit) {
    for (float& x : k) x = static_cast<float>(k16.emplace_back(x));
    for (float& x : v) x = static_cast<float>(v16.emplace_back(x));
  }
  int rc = 0;
  {
    std::optional<kernel_buffer> kb, vb;
    if (c.sixteen_bit) kb.emplace(k16.data(), std::initializer_list<index>{b, H, t, dh}), vb.emplace(v16.data(), std::initializer_list<index>{b, H, t, dh});
    else kb.emplace(k.data(), std::initializer_list<index>{b, H, t, dh}), vb.emplace(v.data(), std::initializer_list<index>{b, H, t, dh});
    kernel_buffer qb(q.data(), {b, H, t, dh}), ob(out.data(), {b, H, t, dh}), lb(lse.data(), {b, H, t});
    halide_buffer_t* args[] = {qb, *kb, *vb, ob, lb};
    rc = run([&] { return kernel(args); }, with_lse ? std::vector<kernel_buffer*>{&ob, &lb} : std::vector<kernel_buffer*>{&ob});
  }
  const std::string what = c.name + " B=" + std::to_string(b) + " T=" + std::to_string(t) + " Dh=" + std::to_string(dh);
  if (rc != 0) return check(false, what + ": kernel returned " + std::to_string(rc) + " " + last_error);
  const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
  for (index bh = 0; bh < b * H; ++bh) {
    const index h = bh % H;
    auto reference = [&](auto acc) {
      using Acc = decltype(acc);
      attn::ref::score_mod<Acc> m;
      if (c.mod) m = [&](Acc s, index i, index j, index hh) { return static_cast<Acc>(c.mod(static_cast<double>(s), i, j, hh)); };
      const auto qh = slice<Acc>(q, bh * t * dh, t, dh), kh = slice<Acc>(k, bh * t * dh, t, dh), vh = slice<Acc>(v, bh * t * dh, t, dh);
      if (!c.weight) return attn::ref::scaled_dot_product(qh, kh, vh, scale, c.keep, m, h);
      mat<Acc> scores = attn::ref::matmul(qh, attn::ref::transpose(kh));
      for (Acc& e : scores.a) e *= static_cast<Acc>(scale);
      const std::function<Acc(Acc)> f = [&](Acc s) { return static_cast<Acc>(c.weight(static_cast<double>(s), t)); };
      return attn::ref::attend_unnormalised(scores, vh, f, c.keep, m, h);
    };
    const auto d = reference(0.0);
    const auto f = reference(0.0f);
    const std::string where = what + " batch " + std::to_string(bh / H) + " head " + std::to_string(h);
    const attn::ref::comparison co = attn::ref::compare(out.data() + bh * t * dh, t * dh, d.output, f.output);
    if (!co.ok || bh == b * H - 1) check(co.ok, where + ": " + co.describe());
    if (!co.ok) return;
    if (!with_lse) continue;
    const attn::ref::comparison cl = attn::ref::compare(lse.data() + bh * t, t, d.lse, f.lse);
    if (!cl.ok || bh == b * H - 1) check(cl.ok, where + ", log-sum-exp: " + cl.describe());
    if (!cl.ok) return;
  }
}

void check_heads(const heads_case& c, per_head_kernel kernel) {
  check_heads(c, [kernel](halide_buffer_t** a) { return kernel(a[0], a[1], a[2], a[3]); }, false);
}
void check_heads(const heads_case& c, per_head_lse_kernel kernel) {
  check_heads(c, [kernel](halide_buffer_t** a) { return kernel(a[0], a[1], a[2], a[3], a[4]); }, true);
}

bool keep_causal(index q, index kv, index) { return kv <= q; }

// Sizes: one tile, not a multiple of the query tile or the key tile, several tiles.
void full() {
  for (index t : {1, 37, 100}) check_heads({"attention (full)", t == 37 ? 2 : 1, t, 32}, gpu::attention);
}
void causal() {
  for (index t : {5, 70, 129, 1000}) check_heads({"causal", t == 70 ? 3 : 1, t, 64, keep_causal}, gpu::causal);
  for (index t : {5, 70, 1000}) check_heads({"causal, shared=0 q_tile=32 unroll=0", t == 70 ? 3 : 1, t, 64, keep_causal}, gpu::causal_rolled);
#if ATTN_GPU_16_BIT
  for (index t : {7, 100}) check_heads({"causal, bfloat16 k, float16 v", 1, t, 16, keep_causal, {}, {}, true}, gpu::causal_16_bit);
#endif
}
void sliding_window() {
  check_heads({"sliding window 256", 1, 300, 16, [](index q, index kv, index) { return kv <= q && q - kv < 256; }}, gpu::window);
}
void alibi() {
  check_heads({"ALiBi + causal", 2, 45, 16, keep_causal,
               [](double s, index q, index kv, index h) { return s - attn::ref::alibi_slope(h, 8) * static_cast<double>(q - kv); }},
              gpu::alibi);
}
void softcap() {  // with the log-sum-exp
  check_heads({"softcap 20 + causal, with lse", 1, 45, 16, keep_causal,
               [](double s, index, index, index) { return 20.0 * std::tanh(s / 20.0); }},
              gpu::softcap);
}
void sigmoid() {  // softmax-free
  for (index t : {3, 45})
    check_heads({"sigmoid attention, causal", t == 45 ? 2 : 1, t, 16, keep_causal, {},
                 [](double s, index keys) { return attn::ref::sigmoid(s - std::log(static_cast<double>(keys))); }},
                gpu::sigmoid);
}
// The shared-memory variant (kv_tile 32, 8 threads): last key tiles of 1, 2, 7, 9 keys; causal at
// T = 1000, where its shared memory was once sized as T² (PoCL asserted, CUDA refused the launch).
void shared_memory() {
  for (index t : {1, 2, 7, 33, 41, 100})
    check_heads({"attention (full), shared=1 stage_k=0 stage_v=0", t == 33 ? 2 : 1, t, 16}, gpu::attention_shared);
  for (index t : {2, 9, 34, 64, 100, 1000})
    check_heads({"causal, shared=1 stage_k=1 stage_v=1, with lse", t == 34 ? 2 : 1, t, 16, keep_causal}, gpu::causal_shared);
  for (index t : {300, 1000})
    check_heads({"sliding window 256, shared=1 stage_k=1 stage_v=1", 1, t, 16, [](index q, index kv, index) { return kv <= q && q - kv < 256; }},
                gpu::window_shared);
}
// The register-tile variant (shared=2): tiles of 16 and 32 keys and rows; sizes not multiples of
// them (1, 7, 33, 257), batch 2, causal with the log-sum-exp, a window's band, softcap unstaged,
// rows that keep no key.
void register_tiles() {
  for (index t : {1, 7, 16, 33, 257})
    check_heads({"attention (full), shared=2", t == 33 ? 2 : 1, t, 32}, gpu::attention_tiled);
  for (index t : {2, 9, 34, 100, 1000})
    check_heads({"causal, shared=2, with lse", t == 34 ? 2 : 1, t, 16, keep_causal}, gpu::causal_tiled);
  check_heads({"softcap 20 + causal, shared=2 stage_k=0 stage_v=0", 2, 45, 16, keep_causal,
               [](double s, index, index, index) { return 20.0 * std::tanh(s / 20.0); }},
              gpu::softcap_tiled);
  for (index t : {300, 1000})
    check_heads({"sliding window 256, shared=2", 1, t, 16, [](index q, index kv, index) { return kv <= q && q - kv < 256; }},
                gpu::window_tiled);
  // Dv = 12 over 8 threads: the state unpacked, 2 columns a thread, the last threads' past V's width.
  for (index t : {5, 40}) check_heads({"causal, Dh = 12, shared=2 (state unpacked)", t == 40 ? 2 : 1, t, 12, keep_causal}, gpu::causal_unpacked_tiled);
  // Rows without a kept key (0..4: output 0, log-sum-exp -inf) in the blocks of rows with some.
  for (index t : {3, 21, 100})
    check_heads({"keys 0..i-5 (fully masked rows), shared=2, with lse", t == 21 ? 2 : 1, t, 16,
                 [](index q, index kv, index) { return kv + 5 <= q; }},
                gpu::masked_rows_tiled);
}
void generic() { check_heads({"attention, generic path, with lse", 2, 37, 16}, gpu::generic_attention); }

// Multi-head self-attention with projections and W_O: x (T, 512), 8 heads of 64.
void multi_head() {
  constexpr index D = 512, T = 24;
  const float w = 1.0f / std::sqrt(static_cast<float>(D));
  std::vector<float> x = random_values(T * D, 4), wq = random_values(D * D, 5, w), wk = random_values(D * D, 6, w),
                     wv = random_values(D * D, 7, w), wo = random_values(D * D, 8, w), out(T * D, -7.0f);
  int rc = 0;
  {
    kernel_buffer xb(x.data(), {1, T, D}), qb(wq.data(), {D, D}), kb(wk.data(), {D, D}), vb(wv.data(), {D, D}), ob(wo.data(), {D, D}),
        outb(out.data(), {1, T, D});
    rc = run([&] { return gpu::mha(xb, qb, kb, vb, ob, outb); }, {&outb});
  }
  if (rc != 0) return check(false, "multi-head self-attention: kernel returned " + std::to_string(rc));
  auto reference = [&](auto acc) {
    using Acc = decltype(acc);
    return attn::ref::multi_head_self_attention(slice<Acc>(x, 0, T, D), slice<Acc>(wq, 0, D, D), slice<Acc>(wk, 0, D, D),
                                                slice<Acc>(wv, 0, D, D), slice<Acc>(wo, 0, D, D), 8)
        .output;
  };
  const attn::ref::comparison c = attn::ref::compare(out.data(), T * D, reference(0.0), reference(0.0f));
  check(c.ok, "multi-head self-attention with projections and W_O, T=24 D=512: " + c.describe());
}

// The generic GPU schedule with the attention weights: causal self-attention, D = 16, Dk = 8.
void generic_with_weights() {
  constexpr index D = 16, Dk = 8;
  for (index T : {1, 13, 40}) {
    std::vector<float> x = random_values(T * D, 9), wq = random_values(D * Dk, 10, 0.5f), wk = random_values(D * Dk, 11, 0.5f),
                       wv = random_values(D * Dk, 12, 0.5f), out(T * Dk, -7.0f), weights(T * T, -7.0f);
    int rc = 0;
    {
      kernel_buffer xb(x.data(), {1, T, D}), qb(wq.data(), {D, Dk}), kb(wk.data(), {D, Dk}), vb(wv.data(), {D, Dk}),
          ob(out.data(), {1, T, Dk}), wb(weights.data(), {1, T, T});
      rc = run([&] { return gpu::weights(xb, qb, kb, vb, ob, wb); }, {&ob, &wb});
    }
    if (rc != 0) return check(false, "generic with weights: kernel returned " + std::to_string(rc));
    auto reference = [&](auto acc) {
      using Acc = decltype(acc);
      return attn::ref::causal_self_attention(slice<Acc>(x, 0, T, D), slice<Acc>(wq, 0, D, Dk), slice<Acc>(wk, 0, D, Dk),
                                              slice<Acc>(wv, 0, D, Dk));
    };
    const auto d = reference(0.0);
    const auto f = reference(0.0f);
    const attn::ref::comparison co = attn::ref::compare(out.data(), T * Dk, d.output, f.output);
    const attn::ref::comparison cw = attn::ref::compare(weights.data(), T * T, d.weights, f.weights);
    check(co.ok, "generic causal self-attention T=" + std::to_string(T) + ", output: " + co.describe());
    check(cw.ok, "generic causal self-attention T=" + std::to_string(T) + ", weights: " + cw.describe());
  }
}

// Head h of heads stacked along the rows, `rows` each.
template <class Acc>
mat<Acc> head_rows(const mat<Acc>& m, index h, index rows) {
  mat<Acc> r(rows, m.cols);
  for (index i = 0; i < rows * m.cols; ++i) r.a[static_cast<std::size_t>(i)] = m.a[static_cast<std::size_t>(h * rows * m.cols + i)];
  return r;
}

// The fused backward of a per-head attention over q, k, v (B, H = 8, T, Dh), from the output and
// log-sum-exp a float forward would have saved (the double reference's, rounded): dq, dk, dv
// against the double reverse-mode reference (support/reference_gradient.hpp) under the suite's
// rule; a row that keeps no key gets exactly dq = 0.
using per_head_gradients_kernel = int (*)(halide_buffer_t*, halide_buffer_t*, halide_buffer_t*, halide_buffer_t*, halide_buffer_t*,
                                          halide_buffer_t*, halide_buffer_t*, halide_buffer_t*, halide_buffer_t*);
struct gradients_case {
  std::string name;
  index b, t, dh;
  mask_pred keep = {};  // empty: every key
};
// mod: a score modifier generic over the number type (double, float and the reference's variables), or none.
template <class Mod = std::nullptr_t>
void check_head_gradients(const gradients_case& c, per_head_gradients_kernel kernel, Mod mod = nullptr) {
  constexpr index H = 8;
  const index b = c.b, t = c.t, dh = c.dh, n = b * H * t * dh, heads = b * H;
  auto modifier = [&](auto acc) {
    using Acc = decltype(acc);
    attn::ref::score_mod<Acc> m;
    if constexpr (!std::is_null_pointer_v<Mod>) m = [mod](Acc sc, index i, index j, index h) { return mod(sc, i, j, h); };
    return m;
  };
  const std::vector<float> q = random_values(n, 51), k = random_values(n, 52), v = random_values(n, 53), dy = random_values(n, 54);
  // Heads stacked along the rows: (B·H·T, Dh).
  auto attention = [&](const auto& x) {
    using Acc = std::decay_t<decltype(x[0].a[0])>;
    const attn::ref::score_mod<Acc> m = modifier(Acc{});
    mat<Acc> out(heads * t, dh);
    for (index bh = 0; bh < heads; ++bh) {
      const mat<Acc> o = attn::ref::scaled_dot_product(head_rows(x[0], bh, t), head_rows(x[1], bh, t), head_rows(x[2], bh, t),
                                                       attn::ref::inv_sqrt(dh), c.keep, m, bh % H)
                             .output;
      for (index i = 0; i < t * dh; ++i) out.a[static_cast<std::size_t>(bh * t * dh + i)] = o.a[static_cast<std::size_t>(i)];
    }
    return out;
  };
  std::vector<float> saved_output(static_cast<std::size_t>(n)), saved_lse(static_cast<std::size_t>(heads * t));
  for (index bh = 0; bh < heads; ++bh) {
    const auto r = attn::ref::scaled_dot_product(slice<double>(q, bh * t * dh, t, dh), slice<double>(k, bh * t * dh, t, dh),
                                                 slice<double>(v, bh * t * dh, t, dh), attn::ref::inv_sqrt(dh), c.keep, modifier(0.0),
                                                 bh % H);
    for (index i = 0; i < t * dh; ++i) saved_output[static_cast<std::size_t>(bh * t * dh + i)] = static_cast<float>(r.output.a[static_cast<std::size_t>(i)]);
    for (index i = 0; i < t; ++i) saved_lse[static_cast<std::size_t>(bh * t + i)] = static_cast<float>(r.lse(i, 0));
  }
  std::vector<std::vector<float>> got(3, std::vector<float>(static_cast<std::size_t>(n), -7.0f));
  int rc = 0;
  {
    auto in = [&](const std::vector<float>& x) { return kernel_buffer(const_cast<float*>(x.data()), {b, H, t, dh}); };  // read only
    kernel_buffer qb = in(q), kb = in(k), vb = in(v), yb = in(dy), ob = in(saved_output),
                  lb(saved_lse.data(), {b, H, t}), dqb(got[0].data(), {b, H, t, dh}), dkb(got[1].data(), {b, H, t, dh}),
                  dvb(got[2].data(), {b, H, t, dh});
    rc = run([&] { return kernel(qb, kb, vb, yb, ob, lb, dqb, dkb, dvb); }, {&dqb, &dkb, &dvb});
  }
  const std::string what = c.name + " gradients B=" + std::to_string(b) + " T=" + std::to_string(t);
  if (rc != 0) return check(false, what + ": kernel returned " + std::to_string(rc) + " " + last_error);
  const std::vector<mat<double>> inputs{slice<double>(q, 0, heads * t, dh), slice<double>(k, 0, heads * t, dh), slice<double>(v, 0, heads * t, dh)};
  const mat<double> d_y = slice<double>(dy, 0, heads * t, dh);
  const auto d = attn::ref::reference_gradients<double>(attention, inputs, d_y);
  const auto f = attn::ref::reference_gradients<float>(attention, inputs, d_y);
  const char* names[] = {"dq", "dk", "dv"};
  for (std::size_t g = 0; g < 3; ++g) {
    const attn::ref::comparison cg = attn::ref::compare(got[g].data(), d[g].size(), d[g], f[g]);
    check(cg.ok, what + ", " + names[g] + ": " + cg.describe());
  }
  if (!c.keep) return;
  index masked_rows = 0, nonzero = 0;
  for (index bh = 0; bh < heads; ++bh)
    for (index i = 0; i < t; ++i) {
      bool kept = false;
      for (index j = 0; j < t && !kept; ++j) kept = c.keep(i, j, bh % H);
      if (kept) continue;
      ++masked_rows;
      for (index e = 0; e < dh; ++e) nonzero += got[0][static_cast<std::size_t>((bh * t + i) * dh + e)] != 0.0f;
    }
  if (masked_rows > 0) check(nonzero == 0, what + ": dq exactly 0 in the " + std::to_string(masked_rows) + " rows that keep no key");
}

// The fused backward on the default GPU schedule (q_tile 32, kv_tile 16, 8 threads at Dh = 16)
// and with other tiles: one tile, sizes not multiples of the tiles, several tiles, batch 2; a
// window's band (tiles skipped on both sides); modifiers through the score; rows without a kept key.
void fused_gradients() {
  for (index t : {1, 33, 100}) check_head_gradients({"causal", t == 33 ? 2 : 1, t, 16, keep_causal}, gpu::causal_gradients);
  check_head_gradients({"sliding window 256", 1, 300, 16, [](index q, index kv, index) { return kv <= q && q - kv < 256; }},
                       gpu::window_gradients);
  check_head_gradients({"ALiBi + causal", 2, 45, 16, keep_causal}, gpu::alibi_gradients, [](auto sc, index q, index kv, index h) {
    using Acc = decltype(sc);
    return sc - static_cast<Acc>(attn::ref::alibi_slope(h, 8)) * static_cast<Acc>(q - kv);
  });
  check_head_gradients({"softcap 20 + causal", 1, 45, 16, keep_causal}, gpu::softcap_gradients, [](auto sc, index, index, index) {
    using Acc = decltype(sc);
    using std::tanh;
    return static_cast<Acc>(20.0) * tanh(sc / static_cast<Acc>(20.0));
  });
  for (index t : {3, 21, 100})
    check_head_gradients({"keys 0..i-5 (fully masked rows), q_tile=16 kv_tile=32", t == 21 ? 2 : 1, t, 16,
                          [](index q, index kv, index) { return kv + 5 <= q; }},
                         gpu::masked_rows_gradients);
}

// The backward pass (built GRADIENTS): causal attention with a learned bias per distance and
// head, bias (R = 16, H), q, k, v (H = 8, T, Dh = 16). The forward (built WITH_LSE) saves its
// output and log-sum-exp; from them the fused backward (twice: the same bits) and the generic one
// compute dq, dk, dv and the table's gradient, each against the double reverse-mode reference
// (support/reference_gradient.hpp) under the suite's rule with the naive float backward pass as
// the yardstick.
void gradients() {
  constexpr index H = 8, Dh = 16, R = 16;
  for (index T : {1, 13, 40, 100}) {
    const index n = H * T * Dh;
    const std::vector<float> q = random_values(n, 41), k = random_values(n, 42), v = random_values(n, 43),
                             bias = random_values(R * H, 44), dy = random_values(n, 45);
    std::vector<float> saved_output(static_cast<std::size_t>(n), -7.0f), saved_lse(static_cast<std::size_t>(H * T), -7.0f);
    const std::string at = " T=" + std::to_string(T);
    auto in = [](const std::vector<float>& t, std::initializer_list<index> shape) {
      return kernel_buffer(const_cast<float*>(t.data()), shape);  // read only by the kernels
    };
    int rc = 0;
    {
      kernel_buffer qb = in(q, {1, H, T, Dh}), kb = in(k, {1, H, T, Dh}), vb = in(v, {1, H, T, Dh}), bb = in(bias, {R, H}),
                    ob(saved_output.data(), {1, H, T, Dh}), lb(saved_lse.data(), {1, H, T});
      rc = run([&] { return gpu::relative_bias(qb, kb, vb, bb, ob, lb); }, {&ob, &lb});
    }
    if (rc != 0) {
      check(false, "forward" + at + ": kernel returned " + std::to_string(rc) + " " + last_error);
      continue;
    }
    using gradients_kernel = int (*)(halide_buffer_t*, halide_buffer_t*, halide_buffer_t*, halide_buffer_t*, halide_buffer_t*,
                                     halide_buffer_t*, halide_buffer_t*, halide_buffer_t*, halide_buffer_t*, halide_buffer_t*,
                                     halide_buffer_t*);
    // dq, dk, dv, dbias; empty where the kernel failed.
    auto backward = [&](gradients_kernel kernel, const std::string& what) {
      std::vector<std::vector<float>> d{std::vector<float>(static_cast<std::size_t>(n), -7.0f), std::vector<float>(static_cast<std::size_t>(n), -7.0f),
                                        std::vector<float>(static_cast<std::size_t>(n), -7.0f), std::vector<float>(R * H, -7.0f)};
      kernel_buffer qb = in(q, {1, H, T, Dh}), kb = in(k, {1, H, T, Dh}), vb = in(v, {1, H, T, Dh}), bb = in(bias, {R, H}),
                    yb = in(dy, {1, H, T, Dh}), ob = in(saved_output, {1, H, T, Dh}), lb = in(saved_lse, {1, H, T}),
                    dqb(d[0].data(), {1, H, T, Dh}), dkb(d[1].data(), {1, H, T, Dh}), dvb(d[2].data(), {1, H, T, Dh}), dbb(d[3].data(), {R, H});
      const int code = run([&] { return kernel(qb, kb, vb, bb, yb, ob, lb, dqb, dkb, dvb, dbb); }, {&dqb, &dkb, &dvb, &dbb});
      if (code != 0) {
        check(false, what + at + ": kernel returned " + std::to_string(code) + " " + last_error);
        d.clear();
      }
      return d;
    };
    // The heads stacked along the rows: (H·T, Dh); the bias (R, H).
    auto attention = [&](const auto& x) {
      using Acc = std::decay_t<decltype(x[0].a[0])>;
      mat<Acc> out(H * T, Dh);
      for (index h = 0; h < H; ++h) {
        const attn::ref::score_mod<Acc> mod = [&](Acc s, index i, index j, index hh) {
          return s + x[3](std::clamp<index>(i - j, 0, R - 1), hh);
        };
        const mat<Acc> o = attn::ref::scaled_dot_product(head_rows(x[0], h, T), head_rows(x[1], h, T), head_rows(x[2], h, T),
                                                         attn::ref::inv_sqrt(Dh), [](index i, index j, index) { return j <= i; }, mod, h)
                               .output;
        for (index i = 0; i < T * Dh; ++i) out.a[static_cast<std::size_t>(h * T * Dh + i)] = o.a[static_cast<std::size_t>(i)];
      }
      return out;
    };
    const std::vector<mat<double>> inputs{slice<double>(q, 0, H * T, Dh), slice<double>(k, 0, H * T, Dh), slice<double>(v, 0, H * T, Dh),
                                          slice<double>(bias, 0, R, H)};
    const mat<double> d_y = slice<double>(dy, 0, H * T, Dh);
    const auto d = attn::ref::reference_gradients<double>(attention, inputs, d_y);
    const auto f = attn::ref::reference_gradients<float>(attention, inputs, d_y);
    auto compare = [&](const std::vector<std::vector<float>>& got, const std::string& what) {
      if (got.empty()) return;
      const char* names[] = {"dq", "dk", "dv", "dbias"};
      for (std::size_t g = 0; g < 4; ++g) {
        const attn::ref::comparison c = attn::ref::compare(got[g].data(), d[g].size(), d[g], f[g]);
        check(c.ok, what + at + ", " + names[g] + ": " + c.describe());
      }
    };
    const auto fused = backward(gpu::gradients, "fused gradients");
    compare(fused, "fused gradients");
    if (const auto again = backward(gpu::gradients, "fused gradients again"); !fused.empty() && !again.empty())
      check(again == fused, "fused gradients" + at + ": the same bits on a second call");
    compare(backward(gpu::gradients_generic, "generic gradients"), "generic gradients");
  }
}

// Asked through the driver's library as Halide's runtime loads it (dlopen), so that building this
// test needs neither OpenCL nor CUDA headers. Empty: there is one; else why not.
std::string missing_platform() {
  if (std::string_view(gpu::api) == "cuda") {
    void* cuda = dlopen("libcuda.so.1", RTLD_LAZY);
    if (cuda == nullptr) cuda = dlopen("libcuda.so", RTLD_LAZY);
    if (cuda == nullptr) return "no CUDA driver (libcuda.so.1) found";
    const auto init = reinterpret_cast<int (*)(unsigned)>(dlsym(cuda, "cuInit"));
    const auto count = reinterpret_cast<int (*)(int*)>(dlsym(cuda, "cuDeviceGetCount"));
    int devices = 0;
    if (init == nullptr || count == nullptr || init(0) != 0 || count(&devices) != 0 || devices == 0) return "no CUDA device";
    return {};
  }
  void* cl = dlopen("libOpenCL.so.1", RTLD_LAZY);
  if (cl == nullptr) cl = dlopen("libOpenCL.so", RTLD_LAZY);
  const auto f = cl != nullptr ? reinterpret_cast<int (*)(unsigned, void*, unsigned*)>(dlsym(cl, "clGetPlatformIDs")) : nullptr;
  unsigned platforms = 0;
  if (f == nullptr || f(0, nullptr, &platforms) != 0 || platforms == 0)
    return "no OpenCL platform found (install pocl-opencl-icd: bash scripts/setup.sh)";
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress as it happens (ctest, timeouts)
  if (const std::string why = missing_platform(); !why.empty()) {
    std::printf("SKIP: %s\n", why.c_str());
    return 77;
  }
  // Halide's default handler aborts; print and return the code instead.
  halide_set_error_handler([](void*, const char* msg) {
    last_error += msg;
    std::fprintf(stderr, "halide: %s\n", msg);
  });
  struct test_case {
    const char* name;
    void (*run)();
  };
  const test_case cases[] = {{"full", full},       {"causal", causal},   {"sliding_window", sliding_window},
                             {"alibi", alibi},     {"softcap", softcap}, {"sigmoid", sigmoid}, {"generic", generic},
                             {"multi_head", multi_head}, {"generic_with_weights", generic_with_weights},
                             {"shared_memory", shared_memory}, {"register_tiles", register_tiles}, {"gradients", gradients},
                             {"fused_gradients", fused_gradients}};
  const std::string_view only = argc > 1 ? argv[1] : "";
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  for (const test_case& c : cases) {
    if (std::string_view(c.name).find(only) == std::string_view::npos) continue;
    const auto t0 = clock::now();
    c.run();
    std::printf("-- %s: %.1f s\n", c.name, std::chrono::duration<double>(clock::now() - t0).count());
  }
  std::printf("-- all: %.1f s\n", std::chrono::duration<double>(clock::now() - start).count());
  std::printf("%s: %d failure(s)\n", failures ? "FAILED" : "passed", failures);
  return failures ? 1 : 0;
}
