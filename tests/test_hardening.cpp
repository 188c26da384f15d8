// Regression tests for the runtime under hostile inputs: each defect found, reproduced, with the
// typed error (type, a key phrase, and the output still holding its sentinel) or the correct
// result it now gives.
#define BOOST_TEST_MODULE hardening
#include <boost/test/unit_test.hpp>

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <typeinfo>
#include <unistd.h>
#include <vector>

#include "runtime/halide_errors.hpp"
#include "runtime/jit.hpp"
#include "runtime/limits.hpp"
#include "runtime/scratch_memory.hpp"
#include "support/error_checks.hpp"
#include "support/reference.hpp"
#include "support/scoped_env.hpp"

namespace {

using namespace attn::dsl;
namespace ref = attn::ref;
using attn::tensor;
using ref::message_has;
using ref::sentinel;
using ref::untouched;

constexpr auto T = dim<"T">;
constexpr auto NX = dim<"NX">;
constexpr auto Dm = dim<"Dm", 8>;
constexpr auto Dv = dim<"Dv", 3>;
constexpr auto x = input<"x">(T, Dm);

// softmax(x·xᵀ/√8)·x: output (T, 8), the same shape as its one input.
constexpr auto self = variants::simplified(x, x);

// softmax(key_padding(q·kᵀ/√8, lens))·values; call order q, keys, values, lens.
constexpr auto q = input<"q">(T, Dm);
constexpr auto keys = input<"keys">(NX, Dm);
constexpr auto values = input<"values">(NX, Dv);
constexpr auto padded = combine(softmax(key_padding(scaled_scores(q, keys), lengths<"lens">)), values);

constexpr std::int64_t int32_max = 2147483647;

// Whether this process can load NVIDIA's driver library, as Halide's CUDA runtime does.
bool cuda_driver_loads() {
  for (const char* name : {"libcuda.so", "libcuda.so.1"})
    if (void* lib = ::dlopen(name, RTLD_LAZY | RTLD_LOCAL)) {
      ::dlclose(lib);
      return true;
    }
  return false;
}

// Restores a process-wide limit when a test ends, whatever happens.
struct restore_limits {
  std::size_t cache = attn::kernel_cache_limit();
  ~restore_limits() {
    attn::set_kernel_cache_limit(cache);
    attn::set_memory_budget(0);
  }
};

}  // namespace

// ------------------------------------------------------------------ item 2: the JIT cache

BOOST_AUTO_TEST_CASE(constants_that_print_alike_are_distinct_kernels) {
  // With 6 decimals both constants printed as 0.000000: the second call got the first's kernel.
  std::mt19937 rng(1);
  const tensor<float> X = ref::random_tensor({3, 8}, rng);
  const auto a = attn::jit(scale(matmul(x, transpose(x)), 1e-7f));
  const auto b = attn::jit(scale(matmul(x, transpose(x)), 4e-7f));
  BOOST_CHECK(&a.compiled() != &b.compiled());
  const tensor<float> ya = a(X), yb = b(X);
  for (std::size_t i = 0; i < ya.values().size(); ++i)
    BOOST_TEST(yb.values()[i] == 4.0f * ya.values()[i], boost::test_tools::tolerance(1e-5f));
  BOOST_TEST(std::abs(ya.values()[0]) > 0.0f);
}

BOOST_AUTO_TEST_CASE(cache_is_bounded_and_keeps_kernels_callers_hold) {
  const restore_limits restore;
  attn::set_kernel_cache_limit(2);
  BOOST_CHECK_EQUAL(attn::kernel_cache_limit(), 2u);
  BOOST_CHECK_LE(attn::compiled_kernel::cache_size(), 2u);  // lowering the limit evicts at once
  std::mt19937 rng(2);
  const tensor<float> X = ref::random_tensor({4, 8}, rng);
  const auto first = attn::jit(scale(matmul(x, transpose(x)), 0.5f));
  const tensor<float> before = first(X);
  for (float c : {0.25f, 0.125f, 0.0625f}) {
    const auto k = attn::jit(scale(matmul(x, transpose(x)), c));
    BOOST_CHECK_LE(attn::compiled_kernel::cache_size(), 2u);
  }
  // `first` was dropped from the cache, but this caller still holds it: it still runs, the same.
  const tensor<float> after = first(X);
  BOOST_CHECK(before.values() == after.values());
  // Asking again compiles it anew (it is no longer cached).
  const auto again = attn::jit(scale(matmul(x, transpose(x)), 0.5f));
  BOOST_CHECK(&again.compiled() != &first.compiled());
  BOOST_CHECK(again(X).values() == before.values());
}

// ------------------------------------------------------------------ item 3: 32-bit limits

BOOST_AUTO_TEST_CASE(batch_stride_of_2_pow_32_is_a_shape_error) {
  // Narrowed to int32, the stride 2^32 became 0: batch 1 silently read batch 0.
  const auto k = attn::jit(self);
  std::vector<float> data(16, 1.0f);
  const auto strided = attn::view(data.data(), {2, 1, 8}, {std::int64_t{1} << 32, 8, 1});
  tensor<float> out({2, 1, 8}, sentinel);
  BOOST_CHECK_EXCEPTION(k.into(out.view(), strided), attn::shape_error,
                        message_has<attn::shape_error>({"'x'", "axis 0", "4294967296", std::to_string(int32_max)}));
  BOOST_CHECK(untouched(out));
}

BOOST_AUTO_TEST_CASE(extent_above_int32_is_a_shape_error) {
  // T = 2^32 + 5 was narrowed to T = 5. The view is never read: the check comes first.
  const auto k = attn::jit(self);
  std::vector<float> data(8, 1.0f);
  const std::int64_t t = (std::int64_t{1} << 32) + 5;
  const auto huge = attn::view(data.data(), {t, 8}, {0, 1});
  tensor<float> out({5, 8}, sentinel);
  BOOST_CHECK_EXCEPTION(k.into(out.view(), huge), attn::shape_error,
                        message_has<attn::shape_error>({"'x'", "axis 0", std::to_string(t), std::to_string(int32_max)}));
  BOOST_CHECK(untouched(out));
  BOOST_CHECK_THROW(k(huge), attn::shape_error);
  // Each size fits int32, their product does not: Halide buffers hold at most 2^31 - 1 elements.
  const auto wide = attn::view(data.data(), {65536, 65536, 8}, {0, 0, 1});
  constexpr auto rows = input<"rows">(T, NX, Dm);
  BOOST_CHECK_EXCEPTION(attn::jit(scale(rows, 2.0f))(wide), attn::shape_error,
                        message_has<attn::shape_error>({"'rows'", "elements", std::to_string(int32_max)}));
}

BOOST_AUTO_TEST_CASE(output_stride_beyond_int32_is_a_shape_error) {
  const auto k = attn::jit(self);
  std::mt19937 rng(3);
  const tensor<float> X = ref::random_tensor({2, 8}, rng);
  tensor<float> out({2, 8}, sentinel);
  const auto far = attn::view(out.data(), {2, 8}, {int32_max, 1});  // row 1 starts 8 GiB away
  BOOST_CHECK_EXCEPTION(k.into(far, X), attn::shape_error,
                        message_has<attn::shape_error>({"output", "axis 0", "stride", std::to_string(int32_max)}));
  BOOST_CHECK(untouched(out));
}

BOOST_AUTO_TEST_CASE(size_products_are_overflow_checked) {
  // 2^40 · 2^40 wrapped around int64 (UBSan: tensor.hpp), and a call then "succeeded".
  const std::int64_t big = std::int64_t{1} << 40;
  BOOST_CHECK_EXCEPTION(tensor<float>({big, big}), attn::shape_error, message_has<attn::shape_error>({"overflows"}));
  float one = 0;
  BOOST_CHECK_EXCEPTION(attn::view(&one, {big, big, 8}), attn::shape_error, message_has<attn::shape_error>({"overflows"}));
  const auto v = attn::view(&one, {big, big}, {0, 0});
  BOOST_CHECK_EXCEPTION(v.elements(), attn::shape_error, message_has<attn::shape_error>({"overflows"}));
  BOOST_CHECK_EXCEPTION(tensor<float>({4, -1}), attn::shape_error, message_has<attn::shape_error>({"negative"}));
}

// ------------------------------------------------------------------ item 4: targets

BOOST_AUTO_TEST_CASE(target_for_another_architecture_is_a_compile_error) {
  // These crashed the process inside LLVM (SIGSEGV, assertion).
  for (const char* target : {"arm-64-linux", "riscv-64-linux-rvv-vector_bits_128", "x86-32-linux", "x86-64-windows"})
    BOOST_CHECK_EXCEPTION(attn::jit(self, {.target = target}), attn::compile_error,
                          message_has<attn::compile_error>({target, "cannot run", "AOT"}));
  // A feature this CPU lacks (no shipping x86 CPU has APX yet).
  BOOST_CHECK_EXCEPTION(attn::jit(self, {.target = "host-x86apx"}), attn::compile_error,
                        message_has<attn::compile_error>({"x86apx", "lacks"}));
}

BOOST_AUTO_TEST_CASE(host_targets_still_compile_and_run) {
  std::mt19937 rng(4);
  const tensor<float> X = ref::random_tensor({5, 8}, rng);
  for (const char* target : {"host", "host-strict_float", "x86-64-linux-avx2", "host-no_asserts"}) {
    const auto k = attn::jit(self, {.target = target});
    const ref::comparison c = ref::compare_simplified_self(k(X), X);
    BOOST_CHECK_MESSAGE(c.ok, target << ": " << c.describe());
  }
}

BOOST_AUTO_TEST_CASE(gpu_target_does_not_crash) {
  // A GPU kernel compiles without a GPU; running it needs a driver. CUDA's: where libcuda is
  // missing (a machine without an NVIDIA driver), Halide's CUDA runtime fails at the first call
  // (error -21, symbol not found): an attn::error itself, none of the caller's kinds (shape, type,
  // argument, memory), naming the missing CUDA API, and the output is not written; with the driver
  // the kernel runs and is right. OpenCL's driver is PoCL, which must not run in a process that
  // holds the JIT (LLVM clash; PoCL also keeps memory LeakSanitizer reports), so OpenCL kernels run
  // in test_opencl, built ahead of time.
  std::mt19937 rng(5);
  const tensor<float> X = ref::random_tensor({5, 8}, rng);
  BOOST_CHECK_NO_THROW(attn::jit(self, {.target = "host-opencl"}));
  const auto cuda = attn::jit(self, {.target = "host-cuda"});
  if (cuda_driver_loads()) {
    const ref::comparison c = ref::compare_simplified_self(cuda(X), X);
    BOOST_CHECK_MESSAGE(c.ok, "host-cuda: " << c.describe());
  } else {
    tensor<float> out({5, 8}, sentinel);
    BOOST_CHECK_EXCEPTION(cuda.into(out.view(), X), attn::error, [](const attn::error& e) {
      BOOST_TEST((typeid(e) == typeid(attn::error)), "not a plain attn::error: " << e.what());
      return message_has<attn::error>({"Halide error -21", "CUDA API not found"})(e);
    });
    BOOST_CHECK(untouched(out));
  }
  // The GPU schedule's shared-memory variant compiles and says so (test_opencl runs it on PoCL).
  const auto k = attn::jit(self, {.target = "host-opencl", .path = attn::lowering::fused, .schedule = "shared=1"});
  BOOST_TEST(k.compiled().describe().find("shared=1") != std::string::npos, k.compiled().describe());
  // The log-sum-exp and softmax-free attention have GPU schedules too (test_opencl runs both).
  for (const char* schedule : {"shared=0", "shared=1", "shared=2"}) {
    BOOST_CHECK_NO_THROW(attn::jit(self, {.target = "host-opencl", .with_lse = true, .schedule = schedule}));
    BOOST_CHECK_NO_THROW(attn::jit(variants::sigmoid_attention(causal(matmul(x, transpose(x))), x), {.target = "host-opencl", .schedule = schedule}));
  }
}

// ------------------------------------------------------------------ item 5: loop_nest's files

BOOST_AUTO_TEST_CASE(loop_nest_from_several_threads_uses_private_files) {
  // Listings went to one predictable name in the temp folder: threads emptied each other's.
  const std::filesystem::path tmp = std::filesystem::temp_directory_path() / ("attn_test_tmp_" + std::to_string(::getpid()));
  std::filesystem::create_directories(tmp);
  const ref::scoped_env tmpdir("TMPDIR", tmp.c_str());
  const auto k = attn::jit(self);
  // Halide numbers its temporaries afresh on each listing: compare the structure, line by line.
  const auto shape_of_listing = [](const std::string& s) {
    return std::make_pair(std::count(s.begin(), s.end(), '\n'), std::count(s.begin(), s.end(), '{'));
  };
  const std::string expected = k.loop_nest();
  BOOST_REQUIRE(expected.find("produce") != std::string::npos);
  std::atomic<int> different{0};
  std::vector<std::thread> pool;
  for (int w = 0; w < 4; ++w)
    pool.emplace_back([&] {
      for (int i = 0; i < 3; ++i)
        if (shape_of_listing(k.loop_nest()) != shape_of_listing(expected)) ++different;
    });
  for (auto& t : pool) t.join();
  BOOST_CHECK_EQUAL(different.load(), 0);
  BOOST_CHECK(std::filesystem::is_empty(tmp));  // every private directory was removed
  std::filesystem::remove_all(tmp);
}

// ------------------------------------------------------------------ item 6: aliasing

BOOST_AUTO_TEST_CASE(output_overlapping_its_input_gives_the_right_result) {
  // The kernel read x while writing y = x's memory: a silently wrong result.
  const auto k = attn::jit(self);
  std::mt19937 rng(6);
  const tensor<float> X = ref::random_tensor({7, 8}, rng);
  tensor<float> inout = X;
  k.into(inout.view(), inout);
  const ref::comparison c = ref::compare_simplified_self(inout, X);
  BOOST_CHECK_MESSAGE(c.ok, c.describe());
  // Partial overlap: the output starts one row into the input.
  std::vector<float> buffer(8 * 8);
  std::copy(X.values().begin(), X.values().end(), buffer.begin());
  k.into(attn::view(buffer.data() + 8, {7, 8}), attn::view(buffer.data(), {7, 8}));
  tensor<float> shifted({7, 8});
  std::copy(buffer.begin() + 8, buffer.end(), shifted.data());
  const ref::comparison cs = ref::compare_simplified_self(shifted, X);
  BOOST_CHECK_MESSAGE(cs.ok, cs.describe());
}

BOOST_AUTO_TEST_CASE(self_overlapping_output_is_an_argument_error) {
  const auto k = attn::jit(self);
  std::mt19937 rng(7);
  const tensor<float> X = ref::random_tensor({4, 8}, rng);
  tensor<float> out({4, 8}, sentinel);
  // A zero row stride: every row written to row 0.
  BOOST_CHECK_EXCEPTION(k.into(attn::view(out.data(), {4, 8}, {0, 1}), X), attn::argument_error,
                        message_has<attn::argument_error>({"output", "axis 0", "stride 0"}));
  BOOST_CHECK(untouched(out));
  // Rows 4 apart but 8 wide: row i's second half is row i+1's first half.
  BOOST_CHECK_EXCEPTION(k.into(attn::view(out.data(), {4, 8}, {4, 1}), X), attn::argument_error,
                        message_has<attn::argument_error>({"output", "share an address"}));
  BOOST_CHECK(untouched(out));
}

BOOST_AUTO_TEST_CASE(output_and_weights_overlapping_is_an_argument_error) {
  const auto k = attn::jit(padded, {.with_weights = true});
  std::mt19937 rng(8);
  const tensor<float> Q = ref::random_tensor({4, 8}, rng), K = ref::random_tensor({6, 8}, rng), V = ref::random_tensor({6, 3}, rng);
  tensor<std::int32_t> lens(std::vector<ref::index>{});
  lens.data()[0] = 6;
  tensor<float> shared({64}, sentinel);
  BOOST_CHECK_EXCEPTION(k.into_with_weights(attn::view(shared.data(), {4, 3}), attn::view(shared.data() + 8, {4, 6}), Q, K, V, lens),
                        attn::argument_error, message_has<attn::argument_error>({"'output'", "'weights'", "overlap"}));
  BOOST_CHECK(untouched(shared));
  // Weights written over an input (the keys' memory) are computed aside, then copied: right.
  tensor<float> out({4, 3});
  std::vector<float> keys_and_weights(K.values().begin(), K.values().end());
  k.into_with_weights(out.view(), attn::view(keys_and_weights.data(), {4, 6}), Q, attn::view(keys_and_weights.data(), {6, 8}), V, lens);
  const auto r = ref::scaled_dot_product(ref::item<double>(Q, 0, 2), ref::item<double>(K, 0, 2), ref::item<double>(V, 0, 2), ref::inv_sqrt(8));
  const auto f = ref::scaled_dot_product(ref::item<float>(Q, 0, 2), ref::item<float>(K, 0, 2), ref::item<float>(V, 0, 2), ref::inv_sqrt(8));
  const ref::comparison co = ref::compare(out.data(), 12, r.output, f.output);
  const ref::comparison cw = ref::compare(keys_and_weights.data(), 24, r.weights, f.weights);
  BOOST_CHECK_MESSAGE(co.ok, co.describe());
  BOOST_CHECK_MESSAGE(cw.ok, cw.describe());
}

// ------------------------------------------------------------------ item 9: bindings, errors

BOOST_AUTO_TEST_CASE(bad_bindings_are_errors_at_jit_time) {
  constexpr auto Q = dim<"Q">;
  BOOST_CHECK_EXCEPTION(attn::jit(self, {.bind = {Q = 4}}), attn::argument_error,
                        message_has<attn::argument_error>({"Q", "no dim", "T"}));
  BOOST_CHECK_EXCEPTION(attn::jit(self, {.bind = {Dm = 7}}), attn::shape_error,
                        message_has<attn::shape_error>({"Dm", "fixed at 8", "7"}));
  BOOST_CHECK_EXCEPTION(attn::jit(self, {.bind = {T = 0}}), attn::shape_error, message_has<attn::shape_error>({"T", "[1, "}));
  BOOST_CHECK_EXCEPTION(attn::jit(self, {.bind = {T = std::int64_t{1} << 32}}), attn::shape_error,
                        message_has<attn::shape_error>({"T", std::to_string(int32_max)}));
  BOOST_CHECK_EXCEPTION(attn::jit(self, {.bind = {T = 4, T = 5}}), attn::argument_error,
                        message_has<attn::argument_error>({"T", "also bound"}));
  // Binding a static dim to its own size is allowed and changes nothing.
  std::mt19937 rng(9);
  const tensor<float> X = ref::random_tensor({3, 8}, rng);
  const ref::comparison c = ref::compare_simplified_self(attn::jit(self, {.bind = {Dm = 8, T = 3}})(X), X);
  BOOST_CHECK_MESSAGE(c.ok, c.describe());
}

BOOST_AUTO_TEST_CASE(halide_errors_become_typed_errors_naming_the_tensor) {
  // Halide's own messages name its buffers (p_keys, the output Func); the user sees their names.
  const attn::detail::buffer_names names{{"p_keys", "keys"}, {"p_keys2", "keys2"}, {"output3", "output"}};
  const std::string m = attn::detail::with_user_names(
      "Input buffer p_keys is accessed at 9, which is beyond the max (7) in dimension 1 of p_keys2; output3.stride.0\n", names);
  BOOST_CHECK_EQUAL(m, "Input buffer 'keys' is accessed at 9, which is beyond the max (7) in dimension 1 of 'keys2'; 'output'.stride.0");
  // Codes from HalideRuntime.h: -4 access_out_of_bounds, -11 out_of_memory, -5 allocation too large, -3 bad_type.
  BOOST_CHECK_EXCEPTION(attn::detail::throw_halide_error(-4, "Input buffer p_keys is accessed at 9", names), attn::shape_error,
                        message_has<attn::shape_error>({"'keys'", "accessed"}));
  BOOST_CHECK_THROW(attn::detail::throw_halide_error(-11, "out of memory", names), attn::memory_error);
  BOOST_CHECK_THROW(attn::detail::throw_halide_error(-5, "allocation too large", names), attn::memory_error);
  BOOST_CHECK_THROW(attn::detail::throw_halide_error(-3, "p_keys has type int32", names), attn::dtype_error);
  BOOST_CHECK_THROW(attn::detail::throw_halide_error(-1, "other", names), attn::error);
}

// ------------------------------------------------------------------ the memory budget

BOOST_AUTO_TEST_CASE(huge_call_with_weights_fails_fast_with_a_memory_error) {
  // run() allocated (and zero-filled) the T×T weights first, then threw std::bad_alloc.
  const auto k = attn::jit(self, {.with_weights = true});
  std::vector<float> row(8, 0.5f);
  const auto long_x = attn::view(row.data(), {200000, 8}, {0, 1});  // one row repeated: no memory
  BOOST_CHECK_EXCEPTION(k.run(long_x), attn::memory_error, message_has<attn::memory_error>({"needs", "GiB"}));
}

BOOST_AUTO_TEST_CASE(memory_budget_is_settable_and_names_what_was_needed) {
  const restore_limits restore;
  const auto k = attn::jit(self, {.path = attn::lowering::generic});
  std::mt19937 rng(10);
  const tensor<float> X = ref::random_tensor({512, 8}, rng);
  tensor<float> out({512, 8}, sentinel);
  attn::set_memory_budget(1 << 20);  // 1 MiB; the scores alone are 512·512·4 = 1 MiB, softmax another
  BOOST_CHECK_EQUAL(attn::memory_budget(), 1 << 20);
  BOOST_CHECK_EXCEPTION(k.into(out.view(), X), attn::memory_error,
                        message_has<attn::memory_error>({"memory budget", "set_memory_budget", "intermediate matmul (512, 512)", "1048576 bytes"}));
  BOOST_CHECK(untouched(out));
  // The fused lowering never materialises the 512×512 scores: the same call fits the budget.
  const auto fused = attn::jit(self, {.path = attn::lowering::fused});
  BOOST_REQUIRE(fused.compiled().describe().starts_with("path=fused"));
  fused.into(out.view(), X);
  const ref::comparison c = ref::compare_simplified_self(out, X);
  BOOST_CHECK_MESSAGE(c.ok, c.describe());
  attn::set_memory_budget(0);  // back to the default
  BOOST_CHECK_GT(attn::memory_budget(), std::int64_t{1} << 20);
  std::fill(out.values().begin(), out.values().end(), sentinel);
  k.into(out.view(), X);
  BOOST_CHECK(!untouched(out));
}

BOOST_AUTO_TEST_CASE(intermediate_beyond_halide_buffer_limit_is_a_memory_error) {
  // 30000² scores are 3.6 GB: more than one Halide buffer holds without large_buffers.
  const restore_limits restore;
  attn::set_memory_budget(std::int64_t{1} << 62);
  const auto k = attn::jit(self, {.path = attn::lowering::generic});
  std::vector<float> row(8, 0.5f);
  const auto long_x = attn::view(row.data(), {30000, 8}, {0, 1});
  tensor<float> out({30000, 8}, sentinel);
  BOOST_CHECK_EXCEPTION(k.into(out.view(), long_x), attn::memory_error,
                        message_has<attn::memory_error>({"intermediate matmul (30000, 30000)", "one buffer"}));
  BOOST_CHECK(untouched(out));
}

// ------------------------------------------------------------------ lengths outside [0, N]

BOOST_AUTO_TEST_CASE(lengths_outside_0_n_are_clamped) {
  // key_padding keeps keys kv < len: len > N keeps all N keys, len <= 0 none (a fully masked
  // row: weights and output 0).
  const auto k = attn::jit(padded);
  std::mt19937 rng(11);
  const tensor<float> Q = ref::random_tensor({2, 3, 8}, rng), K = ref::random_tensor({2, 5, 8}, rng), V = ref::random_tensor({2, 5, 3}, rng);
  auto lens = [](std::int32_t a, std::int32_t b) {
    tensor<std::int32_t> l({2});
    l.data()[0] = a, l.data()[1] = b;
    return l;
  };
  const tensor<float> clamped = k(Q, K, V, lens(5, 0)), outside = k(Q, K, V, lens(1000, -7));
  BOOST_CHECK(clamped.values() == outside.values());
  for (ref::index i = 0; i < 9; ++i) BOOST_CHECK_EQUAL(outside.data()[9 + i], 0.0f);
}

BOOST_AUTO_TEST_CASE(large_intermediates_are_reused_and_aligned) {
  using attn::detail::scratch_cached_bytes;
  using attn::detail::scratch_free;
  using attn::detail::scratch_malloc;
  const std::size_t saved = attn::scratch_cache_limit();
  attn::set_scratch_cache_limit(std::size_t(64) << 20);
  const std::size_t mib = std::size_t(1) << 20, before = scratch_cached_bytes();
  auto* a = static_cast<unsigned char*>(scratch_malloc(3 * mib));
  BOOST_REQUIRE(a != nullptr);
  BOOST_TEST(reinterpret_cast<std::uintptr_t>(a) % 128 == 0u);
  std::fill(a, a + 3 * mib, 7);
  scratch_free(a);
  BOOST_TEST(scratch_cached_bytes() >= before + 3 * mib);
  // A block of about the same size is the kept one; a much smaller one is not.
  void* b = scratch_malloc(3 * mib - 1000);
  BOOST_TEST(b == static_cast<void*>(a));
  void* small = scratch_malloc(mib);
  BOOST_TEST(small != b);
  scratch_free(small);
  scratch_free(b);
  // Over the limit: nothing kept beyond it.
  attn::set_scratch_cache_limit(2 * mib);
  BOOST_TEST(scratch_cached_bytes() <= 2 * mib);
  void* huge = scratch_malloc(5 * mib);
  scratch_free(huge);
  BOOST_TEST(scratch_cached_bytes() <= 2 * mib);
  attn::set_scratch_cache_limit(0);
  BOOST_TEST(scratch_cached_bytes() == 0u);
  BOOST_TEST(scratch_malloc(SIZE_MAX - 10) == nullptr);
  attn::set_scratch_cache_limit(saved);
}

BOOST_AUTO_TEST_CASE(scratch_memory_from_several_threads) {
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t, &bad] {
      std::mt19937 rng(static_cast<unsigned>(t));
      for (int i = 0; i < 200; ++i) {
        const std::size_t n = (std::size_t(1) << 20) + rng() % (std::size_t(3) << 20);
        auto* p = static_cast<unsigned char*>(attn::detail::scratch_malloc(n));
        std::fill(p, p + n, static_cast<unsigned char>(t));
        if (p[0] != t || p[n - 1] != t) ++bad;
        attn::detail::scratch_free(p);
      }
    });
  for (auto& th : threads) th.join();
  BOOST_TEST(bad.load() == 0);
}

BOOST_AUTO_TEST_CASE(kernels_do_not_depend_on_fresh_intermediates) {
  // The second call gets the first call's freed (dirty) intermediates back: same result, bit for bit.
  constexpr auto E = dim<"E", 64>;
  constexpr auto H = head_dim<"H", 4>;
  constexpr auto xs = input<"xs">(T, E);
  const auto k = attn::jit(variants::multi_head_self_attention(xs, weight<"wq">(E, E), weight<"wk">(E, E), weight<"wv">(E, E),
                                                                weight<"wo">(E, E), H));
  std::mt19937 rng(23);
  const tensor<float> X = ref::random_tensor({4099, 64}, rng), WQ = ref::random_tensor({64, 64}, rng, 0.2f),
                      WK = ref::random_tensor({64, 64}, rng, 0.2f), WV = ref::random_tensor({64, 64}, rng),
                      WO = ref::random_tensor({64, 64}, rng);
  const tensor<float> first = k(X, WQ, WK, WV, WO);
  BOOST_TEST(attn::detail::scratch_cached_bytes() > 0u);
  const tensor<float> second = k(X, WQ, WK, WV, WO);
  BOOST_CHECK(first.values() == second.values());
}

BOOST_AUTO_TEST_CASE(bound_sizes_smaller_than_a_tile_run) {
  // T bound to 9 (and a static one-row query): the products are sized exactly, and the fused
  // kernel's tiles (12 query rows, 64 keys) must not read them past their last row.
  constexpr auto E = dim<"E", 16>;
  constexpr auto xs = input<"xs">(T, E);
  const auto layer = variants::causal_self_attention(xs, weight<"wq">(E, E), weight<"wk">(E, E), weight<"wv">(E, E));
  std::mt19937 rng(31);
  const tensor<float> X = ref::random_tensor({9, 16}, rng), WQ = ref::random_tensor({16, 16}, rng, 0.3f),
                      WK = ref::random_tensor({16, 16}, rng, 0.3f), WV = ref::random_tensor({16, 16}, rng);
  const tensor<float> bound = attn::jit(layer, {.bind = {T = 9}})(X, WQ, WK, WV);
  const tensor<float> generic = attn::jit(layer, {.path = attn::lowering::generic})(X, WQ, WK, WV);
  for (std::size_t i = 0; i < bound.values().size(); ++i)
    BOOST_TEST(std::abs(bound.values()[i] - generic.values()[i]) < 1e-5f);
}
