// libFuzzer target: a key-padding attention compiled twice (once each, ~1 s): generic with the
// weights, and fused (flash) without. Each input picks one and calls it with fuzzed shapes,
// batch, strides, memory layouts, lengths and finite values. The promise checked:
//   - a valid call gives the double reference's result, within the tests' tolerance rule
//     (tests/support/reference.hpp: at most 2x the naive float error plus a small floor);
//   - an invalid call (one mutation, chosen by the input) throws a typed attn error
//     (shape_error, dtype_error, argument_error) and leaves the output buffers untouched.
// Anything else aborts: a finding. Built with clang -fsanitize=fuzzer (scripts/fuzz.sh) and, as
// fuzz_corpus_replay, with any compiler to replay tests/fuzz/corpus/ under ctest (label fuzz).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "runtime/jit.hpp"
#include "support/reference.hpp"

namespace {

using namespace attn::dsl;
namespace ref = attn::ref;
using attn::tensor;
using attn::tensor_view;
using ref::index;

constexpr auto NQ = dim<"NQ">;
constexpr auto NX = dim<"NX">;
constexpr auto Dm = dim<"Dm", 4>;
constexpr auto Dv = dim<"Dv", 3>;
constexpr auto q = input<"q">(NQ, Dm);
constexpr auto k = input<"k">(NX, Dm);
constexpr auto v = input<"v">(NX, Dv);
constexpr auto padded = combine(softmax(key_padding(scaled_scores(q, k), lengths<"len">)), v);

constexpr float sentinel = 4242.0f;

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "FUZZ FINDING: %s\n", what.c_str());
  std::abort();
}

// Reads the fuzz input a byte at a time; past the end every byte is 0.
struct bytes {
  const std::uint8_t* p;
  std::size_t n;
  std::uint8_t next() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  int pick(int choices) { return next() % choices; }
};

// A logical tensor stored in memory with a fuzzed layout: dense, padded rows, columns first
// (inner stride != 1: the kernel copies it), or rows reversed (negative stride).
struct stored {
  std::vector<float> memory;
  tensor_view view;
};

stored store(const tensor<float>& t, int layout, int pad) {
  const int r = t.rank();
  const index rows = t.size(r - 2), cols = t.size(r - 1), batch = r == 3 ? t.size(0) : 1;
  stored s;
  std::vector<index> strides(static_cast<std::size_t>(r));
  index row_stride = cols, col_stride = 1, item = rows * cols, origin = 0;
  if (layout == 1) row_stride = cols + pad, item = rows * row_stride;
  if (layout == 2) row_stride = 1, col_stride = rows;
  s.memory.assign(static_cast<std::size_t>(batch * item + pad), sentinel);
  if (layout == 3) row_stride = -cols, origin = (rows - 1) * cols;
  for (index b = 0; b < batch; ++b)
    for (index i = 0; i < rows; ++i)
      for (index j = 0; j < cols; ++j)
        s.memory[static_cast<std::size_t>(b * item + origin + i * row_stride + j * col_stride)] =
            t.data()[static_cast<std::size_t>((b * rows + i) * cols + j)];
  s.view = t.view();
  s.view.data = s.memory.data() + origin;
  s.view.strides[static_cast<std::size_t>(r - 2)] = row_stride;
  s.view.strides[static_cast<std::size_t>(r - 1)] = col_stride;
  if (r == 3) s.view.strides[0] = item;
  return s;
}

// Every element of the memory outside the view's elements, and (if untouched) inside, still the sentinel?
bool all_sentinel(const std::vector<float>& m) {
  return std::all_of(m.begin(), m.end(), [](float x) { return x == sentinel; });
}

enum mutation { none, wrong_static_dim, disagreeing_dim, float_lengths, null_input, wrong_output, zero_output_stride, huge_stride,
                batch_mismatch, mutations };

struct kernels_once {
  attn::kernel<std::remove_cvref_t<decltype(padded)>> generic = attn::jit(padded, {.with_weights = true});
  attn::kernel<std::remove_cvref_t<decltype(padded)>> fused = attn::jit(padded, {.path = attn::lowering::fused});
};

void run_one(bytes in) {
  static const kernels_once once;  // one compilation each per process
  const bool fused = in.pick(2) == 1;

  const index batch = in.pick(4);  // 0: no batch dim
  const index nq = 1 + in.pick(9), nx = 1 + in.pick(11);
  const int layout_q = in.pick(4), layout_k = in.pick(4), layout_v = in.pick(4), layout_out = in.pick(3);
  const int pad = 1 + in.pick(3);
  const bool shared_values = batch > 0 && in.pick(4) == 0;  // values without a batch dim: shared by the batch
  const mutation m = static_cast<mutation>(in.pick(3) == 0 ? 1 + in.pick(mutations - 1) : 0);
  const float scale = std::ldexp(1.0f, in.pick(7) - 3);  // values in [-scale, scale], 1/8 .. 8
  std::mt19937 rng(in.next() | (in.next() << 8));

  const tensor<float> Q = ref::random_tensor(ref::with_batch(batch, {nq, 4}), rng, scale);
  const tensor<float> K = ref::random_tensor(ref::with_batch(batch, {nx, 4}), rng, scale);
  const tensor<float> V = ref::random_tensor(shared_values ? std::vector<index>{nx, 3} : ref::with_batch(batch, {nx, 3}), rng, scale);
  tensor<std::int32_t> len(batch > 0 ? std::vector<index>{batch} : std::vector<index>{});
  for (std::int32_t& l : len.values()) l = static_cast<std::int32_t>(in.pick(static_cast<int>(nx) + 7)) - 3;  // -3 .. nx+3

  stored sq = store(Q, layout_q, pad), sk = store(K, layout_k, pad), sv = store(V, layout_v, pad);
  const tensor<float> out_shape(ref::with_batch(batch, {nq, 3})), weights_shape(ref::with_batch(batch, {nq, nx}));
  stored so = store(tensor<float>(out_shape.sizes(), sentinel), layout_out, pad);
  stored sw = store(tensor<float>(weights_shape.sizes(), sentinel), 0, pad);
  tensor_view len_view = len.view();
  tensor<float> float_len(len.sizes());

  switch (m) {
    case none: break;
    case wrong_static_dim: sv.view.sizes[static_cast<std::size_t>(sv.view.rank - 1)] = 2; break;
    case disagreeing_dim: sk.view.sizes[static_cast<std::size_t>(sk.view.rank - 2)] = nx + 1; break;
    case float_lengths: len_view = float_len.view(); break;
    case null_input: sq.view.data = nullptr; break;
    case wrong_output: so.view.sizes[static_cast<std::size_t>(so.view.rank - 1)] = 4; break;
    case zero_output_stride:
      if (nq == 1) return;  // a size-1 axis may have any stride
      so.view.strides[static_cast<std::size_t>(so.view.rank - 2)] = 0;
      break;
    case huge_stride:
      if (nx == 1) return;  // a size-1 axis's stride is never used
      sk.view.strides[static_cast<std::size_t>(sk.view.rank - 2)] = std::int64_t{1} << 32;
      break;
    case batch_mismatch:
      if (batch == 0) return;
      sk.view.sizes[0] = batch + 1;
      break;
    case mutations: break;
  }

  try {
    if (fused) once.fused.into(so.view, sq.view, sk.view, sv.view, len_view);
    else once.generic.into_with_weights(so.view, sw.view, sq.view, sk.view, sv.view, len_view);
  } catch (const attn::shape_error&) {
    if (m == none) throw;
  } catch (const attn::dtype_error&) {
    if (m == none) throw;
  } catch (const attn::argument_error&) {
    if (m == none) throw;
  }
  if (m != none) {
    if (!all_sentinel(so.memory) || !all_sentinel(sw.memory)) finding("mutation " + std::to_string(m) + ": a failed call wrote its outputs");
    return;
  }

  // Nothing written outside the outputs' elements (padding, gaps).
  const auto written = [](const std::vector<float>& mem) { return std::count_if(mem.begin(), mem.end(), [](float x) { return x != sentinel; }); };
  if (written(so.memory) != std::max<index>(batch, 1) * nq * 3 || written(sw.memory) != (fused ? 0 : std::max<index>(batch, 1) * nq * nx))
    finding("a call wrote outside its outputs' elements");

  // The tolerance floor grows with the logits: a logit of size L is only known to L·2⁻²⁴ in float,
  // which exp turns into a relative error of the weights; where it lands depends on the order
  // q·k is summed in, so the naive float can be luckily exact (the first fuzz finding: values
  // up to 8, logits up to 128, kernel 9.7e-6 against a naive 2.8e-6). Allow 4 such ulps.
  const double logit_bound = 2.0 * scale * scale;  // |q·k|/√4 with |q_i|, |k_i| <= scale
  const double floor_rel = std::max(ref::default_floor, 4.0 * logit_bound * std::ldexp(1.0, -24));

  // The double reference, item by item, from the logical tensors.
  for (index b = 0; b < std::max<index>(batch, 1); ++b) {
    const index l = ref::length_at(len, b);
    const ref::mask_pred keep = [l](index, index kv, index) { return kv < l; };
    const auto r = ref::scaled_dot_product(ref::item<double>(Q, b, 2), ref::item<double>(K, b, 2), ref::item<double>(V, b, 2),
                                           ref::inv_sqrt(4), keep);
    const auto f = ref::scaled_dot_product(ref::item<float>(Q, b, 2), ref::item<float>(K, b, 2), ref::item<float>(V, b, 2),
                                           ref::inv_sqrt(4), keep);
    std::vector<float> got(static_cast<std::size_t>(nq * 3)), got_w(static_cast<std::size_t>(nq * nx));
    const tensor_view& o = so.view;
    const index ob = o.rank == 3 ? b * o.stride(0) : 0;
    for (index i = 0; i < nq; ++i)
      for (index j = 0; j < 3; ++j)
        got[static_cast<std::size_t>(i * 3 + j)] = static_cast<const float*>(o.data)[ob + i * o.stride(o.rank - 2) + j * o.stride(o.rank - 1)];
    const float* w = static_cast<const float*>(sw.view.data) + (batch > 0 ? b * nq * nx : 0);
    std::copy(w, w + nq * nx, got_w.begin());
    const ref::comparison co = ref::compare(got.data(), nq * 3, r.output, f.output, floor_rel);
    const ref::comparison cw = fused ? co : ref::compare(got_w.data(), nq * nx, r.weights, f.weights, floor_rel);
    if (!co.ok || !cw.ok)
      finding(std::string(fused ? "fused" : "generic") + " batch " + std::to_string(batch) + " item " + std::to_string(b) + " nq " + std::to_string(nq) + " nx " + std::to_string(nx) +
              " len " + std::to_string(l) + ": output " + co.describe() + "; weights " + cw.describe());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    run_one(bytes{data, size});
  } catch (const std::exception& e) {
    finding(std::string("unexpected exception: ") + e.what());
  }
  return 0;
}
