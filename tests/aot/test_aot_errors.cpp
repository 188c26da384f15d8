// The C ABI of kernels built ahead of time, called wrongly: each call returns its
// halide_error_code_t and NAME_error() names the tensor, the dim, what was expected and what was
// given, as the JIT's checks do (runtime/tensor_checks.cpp); nothing is written to the outputs.
// Errors Halide meets while running (out of memory) come back the same way: this program installs
// no error handler, so Halide's default one, which prints and aborts, is there to be avoided.
// Also: kernel_buffer refuses sizes and strides a halide_buffer_t's int32 cannot hold, and its
// device copies fail the same way.
#define BOOST_TEST_MODULE aot_errors
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "aot_causal_attention.h"
#include "aot_lse.h"
#include "aot_weights.h"
#ifdef ATTN_TEST_MULTITARGET
#include "aot_multitarget.h"
#endif
#include "runtime/kernel_buffer.hpp"

namespace {

using attn::aot::kernel_buffer;

constexpr std::int64_t H = 8, Dh = 16;  // aot_causal_attention: q, k, v, output (batch, H = 8, T, Dh = 16)
constexpr float untouched = -7.0f;

// A per-head call: q, k, v and the output with their own T (and batch), filled with 0.5 and `untouched`.
struct heads_call {
  std::int64_t tq, tk, tv, tout, batch_q = 1, batch_kv = 1;
  std::vector<float> q = values(batch_q, tq, 0.5f), k = values(batch_kv, tk, 0.5f), v = values(batch_kv, tv, 0.5f),
                     out = values(batch_q, tout, untouched);
  kernel_buffer qb{q.data(), {batch_q, H, tq, Dh}}, kb{k.data(), {batch_kv, H, tk, Dh}}, vb{v.data(), {batch_kv, H, tv, Dh}},
      ob{out.data(), {batch_q, H, tout, Dh}};

  static std::vector<float> values(std::int64_t b, std::int64_t t, float x) { return std::vector<float>(static_cast<std::size_t>(b * H * t * Dh), x); }
  halide_buffer_t* buffer(int i) { return i == 0 ? qb : i == 1 ? kb : i == 2 ? vb : static_cast<halide_buffer_t*>(ob); }
  int run() { return aot_causal_attention(qb, kb, vb, ob); }
  bool output_untouched() const { return out == std::vector<float>(out.size(), untouched); }
};

std::string message() { return aot_causal_attention_error(); }

}  // namespace

BOOST_AUTO_TEST_CASE(t_differing_between_q_and_k_is_refused) {
  heads_call c{.tq = 7, .tk = 5, .tv = 5, .tout = 7};
  BOOST_TEST(c.run() == halide_error_code_constraint_violated);
  BOOST_TEST(message() == "tensor 'k': T is 7 in this call (as in tensor 'q'), got 5");
  BOOST_TEST(c.output_untouched());
  heads_call v{.tq = 7, .tk = 7, .tv = 6, .tout = 7};
  BOOST_TEST(v.run() == halide_error_code_constraint_violated);
  BOOST_TEST(message() == "tensor 'v': T is 7 in this call (as in tensor 'q'), got 6");
}

BOOST_AUTO_TEST_CASE(an_output_longer_than_the_inputs_is_refused) {
  heads_call c{.tq = 5, .tk = 5, .tv = 5, .tout = 9};
  BOOST_TEST(c.run() == halide_error_code_constraint_violated);
  BOOST_TEST(message() == "output 'output': T is 5 in this call (as in tensor 'q'), got 9");
  BOOST_TEST(c.output_untouched());
}

BOOST_AUTO_TEST_CASE(static_and_bound_sizes_are_checked) {
  std::vector<float> x(static_cast<std::size_t>(4 * 3 * 16), 0.5f), out(x.size(), untouched);
  kernel_buffer q4(x.data(), {1, 4, 3, 16}), o4(out.data(), {1, 4, 3, 16});
  BOOST_TEST(aot_causal_attention(q4, q4, q4, o4) == halide_error_code_constraint_violated);
  BOOST_TEST(message() == "tensor 'q': H is 8 in this kernel, got 4");
  kernel_buffer q8(x.data(), {1, 8, 3, 8}), o8(out.data(), {1, 8, 3, 8});
  BOOST_TEST(aot_causal_attention(q8, q8, q8, o8) == halide_error_code_constraint_violated);
  BOOST_TEST(message() == "tensor 'q': Dh is 16 in this kernel (bound when it was built), got 8");
  BOOST_TEST(out == std::vector<float>(out.size(), untouched));
}

BOOST_AUTO_TEST_CASE(the_batch_must_agree) {
  heads_call c{.tq = 3, .tk = 3, .tv = 3, .tout = 3, .batch_q = 2, .batch_kv = 1};
  BOOST_TEST(c.run() == halide_error_code_constraint_violated);
  BOOST_TEST(message() == "tensor 'k': batch is 2 in this call (as in tensor 'q'), got 1");
}

BOOST_AUTO_TEST_CASE(an_output_with_stride_0_is_refused) {
  heads_call c{.tq = 5, .tk = 5, .tv = 5, .tout = 5};
  c.buffer(3)->dim[1].stride = 0;  // T: every row to one address
  BOOST_TEST(c.run() == halide_error_code_constraint_violated);
  BOOST_TEST(message() == "output 'output': T has stride 0 and size 5: its elements would all be written to one address");
  c.buffer(3)->dim[1].stride = 8;  // rows of 16 that overlap their neighbours
  BOOST_TEST(c.run() == halide_error_code_constraint_violated);
  BOOST_TEST(message() == "output 'output': T (stride 8) steps within the 16 elements the dims inside it span: two elements would share an address");
  BOOST_TEST(c.output_untouched());
}

BOOST_AUTO_TEST_CASE(a_null_host_pointer_is_refused) {
  heads_call c{.tq = 5, .tk = 5, .tv = 5, .tout = 5};
  c.buffer(2)->host = nullptr;  // Halide would take it for a bounds query and compute nothing
  BOOST_TEST(c.run() == halide_error_code_host_is_null);
  BOOST_TEST(message() == "tensor 'v': no data: host is NULL and there is no device buffer");
  c.buffer(2)->host = reinterpret_cast<std::uint8_t*>(c.v.data());
  c.buffer(3)->host = nullptr;
  BOOST_TEST(c.run() == halide_error_code_host_is_null);
  BOOST_TEST(message() == "output 'output': no data: host is NULL and there is no device buffer");
}

BOOST_AUTO_TEST_CASE(buffers_of_the_wrong_form_are_refused) {
  heads_call c{.tq = 5, .tk = 5, .tv = 5, .tout = 5};
  BOOST_TEST(aot_causal_attention(c.qb, nullptr, c.vb, c.ob) == halide_error_code_buffer_argument_is_null);
  BOOST_TEST(message() == "tensor 'k': the halide_buffer_t pointer is NULL");

  std::vector<std::int32_t> ints(c.q.size());
  kernel_buffer ib(ints.data(), {1, H, 5, Dh});
  BOOST_TEST(aot_causal_attention(ib, c.kb, c.vb, c.ob) == halide_error_code_bad_type);
  BOOST_TEST(message() == "tensor 'q': expected float32, got int32");

  kernel_buffer unbatched(c.q.data(), {H, 5, Dh});
  BOOST_TEST(aot_causal_attention(unbatched, c.kb, c.vb, c.ob) == halide_error_code_bad_dimensions);
  BOOST_TEST(message() == "tensor 'q': expected 4 dims [batch, H, T, Dh] (a halide_buffer_t lists them innermost first), got 3");

  c.buffer(0)->dim[1].min = 2;
  BOOST_TEST(c.run() == halide_error_code_constraint_violated);
  BOOST_TEST(message() == "tensor 'q': T starts at 2 (its min); this kernel's dims start at 0");
  c.buffer(0)->dim[1].min = 0;

  c.buffer(1)->dim[1].extent = 0;
  BOOST_TEST(c.run() == halide_error_code_constraint_violated);
  BOOST_TEST(message() == "tensor 'k': T has size 0; sizes must be at least 1");
  c.buffer(1)->dim[1].extent = -1;
  BOOST_TEST(c.run() == halide_error_code_buffer_extents_negative);
  c.buffer(1)->dim[1].extent = 5;

  c.buffer(0)->dim[0].stride = 2;
  BOOST_TEST(c.run() == halide_error_code_constraint_violated);
  BOOST_TEST(message() == "tensor 'q': Dh, the innermost dim, has stride 2; it must be 1 (dense)");
  BOOST_TEST(c.output_untouched());
}

BOOST_AUTO_TEST_CASE(offsets_beyond_int32_are_refused) {
  // Three batch elements 1.2e9 floats apart: int32 extents and strides, but offsets up to 2.4e9.
  // The check reads no memory, so none is needed.
  heads_call c{.tq = 5, .tk = 5, .tv = 5, .tout = 5};
  for (int i = 0; i < 4; ++i) {
    c.buffer(i)->dim[3].extent = 3;
    c.buffer(i)->dim[3].stride = 1'200'000'000;
  }
  BOOST_TEST(c.run() == halide_error_code_buffer_extents_too_large);
  BOOST_TEST(message() == "tensor 'q': its last element is 2400000639 elements from its first, above 2147483647: this kernel "
                          "addresses buffers with int32 offsets");
  BOOST_TEST(c.output_untouched());
}

BOOST_AUTO_TEST_CASE(outputs_must_not_overlap_inputs_or_each_other) {
  heads_call c{.tq = 5, .tk = 5, .tv = 5, .tout = 5};
  kernel_buffer into_q(c.q.data(), {1, H, 5, Dh});
  BOOST_TEST(aot_causal_attention(c.qb, c.kb, c.vb, into_q) == halide_error_code_constraint_violated);
  BOOST_TEST(message() == "output 'output': it overlaps tensor 'q' in memory: the kernel would overwrite values it still reads");
  BOOST_TEST(c.q == std::vector<float>(c.q.size(), 0.5f));

  // aot_lse: the output and the log-sum-exp share their first floats.
  std::vector<float> out(c.out.size() + 8, untouched);
  kernel_buffer ob(out.data() + 8, {1, H, 5, Dh}), lb(out.data(), {1, H, 5});
  BOOST_TEST(aot_lse(c.qb, c.kb, c.vb, ob, lb) == halide_error_code_constraint_violated);
  BOOST_TEST(std::string(aot_lse_error()) == "output 'output': it overlaps output 'lse' in memory: outputs must not share memory");
}

BOOST_AUTO_TEST_CASE(unbatched_weights_and_their_names) {
  // aot_weights: x (batch, T, D = 16), wq, wk, wv (D, Dk = 8); output (batch, T, Dk), weights (batch, T, T).
  constexpr std::int64_t t = 3;
  std::vector<float> x(static_cast<std::size_t>(t * 16), 0.1f), w(16 * 8, 0.1f), out(static_cast<std::size_t>(t * 8)), weights(t * t);
  kernel_buffer xb(x.data(), {1, t, 16}), wb(w.data(), {16, 8}), wrong(w.data(), {8, 16}), ob(out.data(), {1, t, 8}),
      weights_b(weights.data(), {1, t, t + 1});
  BOOST_TEST(aot_weights(xb, wb, wrong, wb, ob, weights_b) == halide_error_code_constraint_violated);
  BOOST_TEST(std::string(aot_weights_error()) == "tensor 'wk': Dk is 8 in this kernel (bound when it was built), got 16");
  BOOST_TEST(aot_weights(xb, wb, wb, wb, ob, weights_b) == halide_error_code_constraint_violated);
  BOOST_TEST(std::string(aot_weights_error()) == "output 'weights': T is 3 in this call (as in tensor 'x'), got 4");
}

BOOST_AUTO_TEST_CASE(the_message_is_cleared_by_a_call_that_succeeds_and_is_per_thread) {
  heads_call bad{.tq = 7, .tk = 5, .tv = 5, .tout = 7};
  BOOST_TEST(bad.run() != 0);
  std::string other_thread = "unset";
  std::thread([&] { other_thread = message(); }).join();
  BOOST_TEST(other_thread == "");
  BOOST_TEST(message() == "tensor 'k': T is 7 in this call (as in tensor 'q'), got 5");
  heads_call good{.tq = 7, .tk = 7, .tv = 7, .tout = 7};
  BOOST_TEST(good.run() == 0);
  BOOST_TEST(message() == "");
  BOOST_TEST(!good.output_untouched());
}

BOOST_AUTO_TEST_CASE(halide_errors_while_running_come_back_without_aborting) {
  // Every allocation fails: Halide reports "out of memory" through its error handler, which by
  // default prints and aborts this process. The kernel's entry point gets it instead.
  const halide_malloc_t previous = halide_set_custom_malloc([](void*, size_t) -> void* { return nullptr; });
  heads_call c{.tq = 300, .tk = 300, .tv = 300, .tout = 300};
  const int rc = c.run();
  halide_set_custom_malloc(previous);
  BOOST_TEST(rc == halide_error_code_out_of_memory);
  BOOST_TEST(message() == "kernel failed (Halide error -11): Out of memory (halide_malloc returned nullptr)");
  BOOST_TEST(c.run() == 0);
}

BOOST_AUTO_TEST_CASE(a_failed_device_copy_comes_back_without_aborting) {
  // A device whose copies fail, reporting through Halide's error handler as a GPU runtime does.
  // Declared first: the buffer frees its device copy through it when it goes.
  halide_device_interface_t failing{};
  failing.copy_to_host = [](void* user_context, halide_buffer_t*) {
    halide_error(user_context, "the device is gone");
    return static_cast<int>(halide_error_code_copy_to_host_failed);
  };
  failing.device_free = [](void*, halide_buffer_t* b) {
    b->device = 0;
    return 0;
  };
  heads_call c{.tq = 3, .tk = 3, .tv = 3, .tout = 3};
  BOOST_TEST_REQUIRE(c.run() == 0);  // the kernels' error handler is installed at their first call
  halide_buffer_t* out = c.buffer(3);
  out->device = 1;
  out->device_interface = &failing;
  out->flags |= halide_buffer_flag_device_dirty;
  BOOST_TEST(c.ob.copy_to_host() == halide_error_code_copy_to_host_failed);
  BOOST_TEST(c.ob.error() == "copy to host failed (Halide error -14): the device is gone");
}

#ifdef ATTN_TEST_MULTITARGET
BOOST_AUTO_TEST_CASE(a_multitarget_library_checks_the_same) {
  heads_call c{.tq = 7, .tk = 5, .tv = 5, .tout = 7};
  BOOST_TEST(aot_multitarget(c.qb, c.kb, c.vb, c.ob) == halide_error_code_constraint_violated);
  BOOST_TEST(std::string(aot_multitarget_error()) == "tensor 'k': T is 7 in this call (as in tensor 'q'), got 5");
  BOOST_TEST(c.output_untouched());
}
#endif

BOOST_AUTO_TEST_CASE(kernel_buffer_refuses_what_int32_cannot_hold) {
  // The sizes are checked before the data is used: no memory of that size is needed.
  float x = 0;
  try {
    kernel_buffer b(&x, {1, H, (std::int64_t{1} << 32) + 5, Dh});  // would wrap to T = 5
    BOOST_FAIL("a size of 2^32 + 5 was accepted");
  } catch (const std::length_error& e) {
    BOOST_TEST(std::string(e.what()) ==
               "kernel_buffer: axis 2 of 4 (row-major): size 4294967301 does not fit the int32 of a halide_buffer_t (at most 2147483647)");
  }
  try {
    kernel_buffer b(&x, {2, H, 17'500, 16'000});  // the batch stride, 2.24e9, would turn negative
    BOOST_FAIL("a stride of 2.24e9 was accepted");
  } catch (const std::length_error& e) {
    BOOST_TEST(std::string(e.what()) == "kernel_buffer: axis 0 of 4 (row-major): stride (the product of the sizes after it) 2240000000 "
                                        "does not fit the int32 of a halide_buffer_t (at most 2147483647)");
  }
}
