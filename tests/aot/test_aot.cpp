// Kernels built ahead of time (tests/aot/CMakeLists.txt: attn_add_kernel) against the JIT
// kernels of the same expressions, options and sizes: equal bit for bit, as both run the same
// lowering and schedule for the same target. Also: the multi-target library runs here, and a
// tensor of the wrong size is refused with an error code, not read out of bounds (the entry
// point's other checks: test_aot_errors.cpp).
#define BOOST_TEST_MODULE aot
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <cstring>
#include <string>
#include <random>
#include <vector>

#include "aot_alibi_causal_attention.h"
#include "aot_attention.h"
#include "aot_causal_attention.h"
#include "aot_causal_self_attention.h"
#include "aot_multi_head_self_attention.h"
#include "aot_registered.h"
#include "aot_sliding_window_attention.h"
#include "aot_softcap_causal_attention.h"
#include "aot_gradients.h"
#include "aot_16_bit.h"
#include "aot_lse.h"
#include "aot_weights.h"
#ifdef ATTN_TEST_MULTITARGET
#include "aot_multitarget.h"
#endif
#include "runtime/kernel_buffer.hpp"
#include "generators/aot/named_variants.hpp"
#include "registered_kernel.hpp"
#include "runtime/jit.hpp"
#include "support/reference.hpp"

namespace {

using attn::aot::kernel_buffer;
using attn::tensor;
namespace named = attn::named;

// In-process JIT only: the disk cache is not what is compared here.
struct no_disk_cache {
  no_disk_cache() { setenv("ATTN_CACHE_DIR", "off", 1); }
};
BOOST_TEST_GLOBAL_FIXTURE(no_disk_cache);

constexpr std::int64_t H = 8, Dh = 16;

tensor<float> random(std::vector<std::int64_t> sizes, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  return attn::ref::random_tensor(std::move(sizes), rng, scale);
}

// A per-head kernel (q, k, v of shape (H, T, Dh)) built ahead of time vs the JIT's.
template <class E, class Fn>
void check_heads(const E& e, Fn aot, std::int64_t t) {
  auto q = random({H, t, Dh}, 1), k = random({H, t, Dh}, 2), v = random({H, t, Dh}, 3);
  const tensor<float> jit = attn::jit(e, {.bind = {named::Dh = Dh}})(q, k, v);
  std::vector<float> out(static_cast<std::size_t>(H * t * Dh), -1.0f);
  kernel_buffer qb(q.data(), {1, H, t, Dh}), kb(k.data(), {1, H, t, Dh}), vb(v.data(), {1, H, t, Dh}), ob(out.data(), {1, H, t, Dh});
  BOOST_TEST_REQUIRE(aot(qb, kb, vb, ob) == 0);
  BOOST_TEST(out == jit.values());
}

}  // namespace

BOOST_AUTO_TEST_CASE(named_per_head_variants_equal_the_jit) {
  for (std::int64_t t : {1, 7, 64, 100}) {
    BOOST_TEST_CONTEXT("T = " << t) {
      check_heads(named::attention, aot_attention, t);
      check_heads(named::causal_attention, aot_causal_attention, t);
      check_heads(named::sliding_window_attention, aot_sliding_window_attention, t);
      check_heads(named::alibi_causal_attention, aot_alibi_causal_attention, t);
      check_heads(named::softcap_causal_attention, aot_softcap_causal_attention, t);
    }
  }
}

BOOST_AUTO_TEST_CASE(user_registered_kernel_equals_the_jit) {
  for (std::int64_t t : {5, 33}) check_heads(aot_test::causal_alibi_softcap, aot_registered, t);
}

// 16-bit tensors: the header names their types, the kernel checks them and computes the JIT's bits.
BOOST_AUTO_TEST_CASE(sixteen_bit_tensors_equal_the_jit) {
  const std::int64_t t = 33;
  const tensor<float> q = random({H, t, Dh}, 1), k32 = random({H, t, Dh}, 2), v32 = random({H, t, Dh}, 3);
  tensor<attn::bfloat16> k({H, t, Dh});
  tensor<attn::float16> v({H, t, Dh});
  for (std::size_t i = 0; i < k.values().size(); ++i) k.values()[i] = attn::bfloat16(k32.values()[i]), v.values()[i] = attn::float16(v32.values()[i]);
  const tensor<attn::bfloat16> jit = attn::jit(aot_test::causal_16_bit_cache, {.bind = {named::Dh = Dh}})(q, k, v);
  tensor<attn::bfloat16> out({H, t, Dh}, attn::bfloat16(-1.0f));
  kernel_buffer qb(const_cast<float*>(q.data()), {1, H, t, Dh}), kb(k.data(), {1, H, t, Dh}), vb(v.data(), {1, H, t, Dh}),
      ob(out.data(), {1, H, t, Dh});
  BOOST_TEST_REQUIRE(aot_16_bit(qb, kb, vb, ob) == 0, aot_16_bit_error());
  BOOST_TEST(std::memcmp(out.data(), jit.data(), out.values().size() * sizeof(attn::bfloat16)) == 0);
  kernel_buffer wrong(const_cast<float*>(k32.data()), {1, H, t, Dh});  // float32 keys
  BOOST_TEST(aot_16_bit(qb, wrong, vb, ob) == -3);
  BOOST_TEST(std::string(aot_16_bit_error()).find("tensor 'k'") != std::string::npos, aot_16_bit_error());
  BOOST_TEST(std::string(aot_16_bit_error()).find("expected bfloat16, got float32") != std::string::npos, aot_16_bit_error());
  std::vector<float> out32(static_cast<std::size_t>(H * t * Dh));
  kernel_buffer wrong_out(out32.data(), {1, H, t, Dh});  // a float32 output for a bfloat16 one
  BOOST_TEST(aot_16_bit(qb, kb, vb, wrong_out) == -3);
  BOOST_TEST(std::string(aot_16_bit_error()).find("expected bfloat16, got float32") != std::string::npos, aot_16_bit_error());
}

#ifdef ATTN_TEST_MULTITARGET
BOOST_AUTO_TEST_CASE(multitarget_library_runs_here) {
  // Whichever target it picks on this CPU, the result is attention's: within float rounding of
  // the host JIT (another target may vectorise, and so round, differently).
  for (std::int64_t t : {3, 50}) {
    auto q = random({H, t, Dh}, 4), k = random({H, t, Dh}, 5), v = random({H, t, Dh}, 6);
    const tensor<float> jit = attn::jit(named::causal_attention, {.bind = {named::Dh = Dh}})(q, k, v);
    std::vector<float> out(jit.values().size());
    kernel_buffer qb(q.data(), {1, H, t, Dh}), kb(k.data(), {1, H, t, Dh}), vb(v.data(), {1, H, t, Dh}), ob(out.data(), {1, H, t, Dh});
    BOOST_TEST_REQUIRE(aot_multitarget(qb, kb, vb, ob) == 0);
    // Outputs are averages of values in [-1, 1]; 1e-5 is tens of float ulps at that scale.
    BOOST_TEST(attn::ref::max_abs_difference(out.data(), jit.data(), static_cast<std::int64_t>(out.size())) <= 1e-5);
  }
}
#endif

BOOST_AUTO_TEST_CASE(projections_and_weights_equal_the_jit) {
  constexpr std::int64_t t = 9, D = 16, Dk = 8;
  auto x = random({t, D}, 7), wq = random({D, Dk}, 8, 0.5f), wk = random({D, Dk}, 9, 0.5f), wv = random({D, Dk}, 10, 0.5f);
  const auto bind = std::vector<attn::dsl::dim_binding>{named::D = D, named::Dk = Dk};
  const tensor<float> jit = attn::jit(named::causal_self_attention, {.bind = bind})(x, wq, wk, wv);
  const attn::outputs jit_w = attn::jit(named::causal_self_attention, {.bind = bind, .with_weights = true}).run(x, wq, wk, wv);
  std::vector<float> out(static_cast<std::size_t>(t * Dk)), out_w(out.size()), weights(static_cast<std::size_t>(t * t));
  kernel_buffer xb(x.data(), {1, t, D}), qb(wq.data(), {D, Dk}), kb(wk.data(), {D, Dk}), vb(wv.data(), {D, Dk});
  kernel_buffer ob(out.data(), {1, t, Dk}), owb(out_w.data(), {1, t, Dk}), wb(weights.data(), {1, t, t});
  BOOST_TEST_REQUIRE(aot_causal_self_attention(xb, qb, kb, vb, ob) == 0);
  BOOST_TEST(out == jit.values());
  BOOST_TEST_REQUIRE(aot_weights(xb, qb, kb, vb, owb, wb) == 0);
  BOOST_TEST(out_w == jit_w.output.values());
  BOOST_TEST(weights == jit_w.weights.values());
}

BOOST_AUTO_TEST_CASE(gradients_equal_the_jit) {
  // The backward pass (GRADIENTS): the tensors, then d_output, output and lse (what the forward
  // saved), then d_x, d_wq, d_wk, d_wv, bit for bit as attn::jit_gradients' given the same saved
  // tensors; the weights' gradients summed over the batch.
  constexpr std::int64_t b = 2, t = 9, D = 16, Dk = 8;
  auto x = random({b, t, D}, 31), wq = random({D, Dk}, 32, 0.5f), wk = random({D, Dk}, 33, 0.5f), wv = random({D, Dk}, 34, 0.5f),
       dy = random({b, t, Dk}, 35);
  const auto bind = std::vector<attn::dsl::dim_binding>{named::D = D, named::Dk = Dk};
  attn::outputs forward = attn::jit(named::causal_self_attention, {.bind = bind, .with_lse = true}).run(x, wq, wk, wv);
  const attn::gradients jit =
      attn::jit_gradients(named::causal_self_attention, {.bind = bind})(dy, attn::saved{forward.output, forward.lse}, x, wq, wk, wv);
  std::vector<float> dx(x.values().size()), dwq(wq.values().size()), dwk(wk.values().size()), dwv(wv.values().size());
  kernel_buffer xb(x.data(), {b, t, D}), qb(wq.data(), {D, Dk}), kb(wk.data(), {D, Dk}), vb(wv.data(), {D, Dk}), yb(dy.data(), {b, t, Dk});
  kernel_buffer ob(forward.output.data(), {b, t, Dk}), lb(forward.lse.data(), {b, t});
  kernel_buffer dxb(dx.data(), {b, t, D}), dqb(dwq.data(), {D, Dk}), dkb(dwk.data(), {D, Dk}), dvb(dwv.data(), {D, Dk});
  BOOST_TEST_REQUIRE(aot_gradients(xb, qb, kb, vb, yb, ob, lb, dxb, dqb, dkb, dvb) == 0);
  BOOST_TEST(dx == jit["x"].values());
  BOOST_TEST(dwq == jit["wq"].values());
  BOOST_TEST(dwk == jit["wk"].values());
  BOOST_TEST(dwv == jit["wv"].values());
}

BOOST_AUTO_TEST_CASE(log_sum_exp_equals_the_jit) {
  // The fused kernel with its log-sum-exp (WITH_LSE): output and lse bit for bit as the JIT's.
  for (std::int64_t t : {1, 7, 100}) {
    auto q = random({H, t, Dh}, 21), k = random({H, t, Dh}, 22), v = random({H, t, Dh}, 23);
    const attn::outputs jit = attn::jit(named::causal_attention, {.bind = {named::Dh = Dh}, .with_lse = true}).run(q, k, v);
    std::vector<float> out(static_cast<std::size_t>(H * t * Dh)), lse(static_cast<std::size_t>(H * t));
    kernel_buffer qb(q.data(), {1, H, t, Dh}), kb(k.data(), {1, H, t, Dh}), vb(v.data(), {1, H, t, Dh}), ob(out.data(), {1, H, t, Dh}),
        lb(lse.data(), {1, H, t});
    BOOST_TEST_REQUIRE(aot_lse(qb, kb, vb, ob, lb) == 0);
    BOOST_TEST(out == jit.output.values());
    BOOST_TEST(lse == jit.lse.values());
  }
}

BOOST_AUTO_TEST_CASE(multi_head_self_attention_equals_the_jit) {
  constexpr std::int64_t t = 6, D = 512;
  auto x = random({t, D}, 11), wq = random({D, D}, 12, 0.05f), wk = random({D, D}, 13, 0.05f), wv = random({D, D}, 14, 0.05f),
       wo = random({D, D}, 15, 0.05f);
  const tensor<float> jit = attn::jit(named::multi_head_self_attention)(x, wq, wk, wv, wo);
  std::vector<float> out(static_cast<std::size_t>(t * D));
  kernel_buffer xb(x.data(), {1, t, D}), qb(wq.data(), {D, D}), kb(wk.data(), {D, D}), vb(wv.data(), {D, D}), ob_(wo.data(), {D, D}),
      yb(out.data(), {1, t, D});
  BOOST_TEST_REQUIRE(aot_multi_head_self_attention(xb, qb, kb, vb, ob_, yb) == 0);
  BOOST_TEST(out == jit.values());
}

BOOST_AUTO_TEST_CASE(wrong_sizes_are_an_error_code) {
  // Dh is bound to 16 at build time: tensors with Dh = 8 are refused at entry, nothing is read.
  constexpr std::int64_t t = 4;
  std::vector<float> q(static_cast<std::size_t>(H * t * 8)), out(q.size());
  kernel_buffer qb(q.data(), {1, H, t, 8}), kb(q.data(), {1, H, t, 8}), vb(q.data(), {1, H, t, 8}), ob(out.data(), {1, H, t, 8});
  BOOST_TEST(aot_causal_attention(qb, kb, vb, ob) == halide_error_code_constraint_violated);
  BOOST_TEST(std::string(aot_causal_attention_error()) == "tensor 'q': Dh is 16 in this kernel (bound when it was built), got 8");
}

BOOST_AUTO_TEST_CASE(an_output_wider_than_the_bound_width_is_an_error_code) {
  // Dh is bound to 16 and the state packed in vectors of it: a 32-column output must not get
  // columns read off another vector of the state (an error, not a silently wrong result).
  constexpr std::int64_t t = 4;
  std::vector<float> q(static_cast<std::size_t>(H * t * 16), 0.5f), out(static_cast<std::size_t>(H * t * 32), -7.0f);
  kernel_buffer qb(q.data(), {1, H, t, 16}), kb(q.data(), {1, H, t, 16}), vb(q.data(), {1, H, t, 16}), ob(out.data(), {1, H, t, 32});
  BOOST_TEST(aot_causal_attention(qb, kb, vb, ob) == halide_error_code_constraint_violated);
  BOOST_TEST(std::string(aot_causal_attention_error()) == "output 'output': Dh is 16 in this kernel (bound when it was built), got 32");
  BOOST_TEST(out == std::vector<float>(out.size(), -7.0f));
}
