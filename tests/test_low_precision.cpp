// bfloat16 and float16 tensors (input<"k", bf16>(...)): stored 16-bit, read as float32, computed
// in float32, except on a CPU with AVX512-BF16 (bfloat16 dot products: each pair of products
// exact, summed as an FMA rounds, denormal inputs flushed): Q·Kᵀ of two bfloat16 tensors, and
// P·V of a bfloat16 V where the result is stored as bfloat16, P then rounded to bfloat16.
// The output is stored in the float tensors' common type (float32 where they differ), or as
// output_as<...> says: rounded once, to nearest even, from the float32 result.
// The rule for their results, written down:
//   - a kernel with 16-bit tensors converted as loaded computes exactly what the same kernel
//     computes from float32 tensors holding the same (rounded) values, then rounds it to its
//     output's type: the same bits;
//   - against a float64 reference from the same rounded values its error is at most 4 times that of
//     a naive float32 implementation (scores, softmax, P·V summed in order) reading the same values,
//     plus 1e-6 of the output's largest magnitude; where the kernel rounds P, the naive one rounds
//     its weights to bfloat16 before P·V, and both outputs are bfloat16.
// The conversions themselves round to nearest, ties to even, and keep NaN, infinities and float16's
// subnormals. A float32 tensor given for a bfloat16 one is a dtype_error naming both.
// (Kernels built ahead of time: test_aot.)
#define BOOST_TEST_MODULE low_precision
#include <boost/test/unit_test.hpp>

#include <unistd.h>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include "dsl/dsl.hpp"
#include "dsl/gradient.hpp"
#include "dsl/variants.hpp"
#include "runtime/aot_compile.hpp"
#include "runtime/gradients.hpp"
#include "runtime/jit.hpp"
#include "support/reference.hpp"
#include <Halide.h>

namespace {

using namespace attn::dsl;
namespace ref = attn::ref;
using attn::bfloat16;
using attn::float16;
using attn::tensor;

constexpr auto T = dim<"T">;
constexpr auto Dh = dim<"Dh", 16>;
constexpr auto H = head_dim<"H", 2>;
// The same tensors as float32, bfloat16 (b) and float16 (h).
constexpr auto q = input<"q">(H, T, Dh);
constexpr auto k = input<"k">(H, T, Dh);
constexpr auto v = input<"v">(H, T, Dh);
constexpr auto qb = input<"q", bf16>(H, T, Dh);
constexpr auto kb = input<"k", bf16>(H, T, Dh);
constexpr auto vb = input<"v", bf16>(H, T, Dh);
constexpr auto qh = input<"q", f16>(H, T, Dh);
constexpr auto kh = input<"k", f16>(H, T, Dh);
constexpr auto vh = input<"v", f16>(H, T, Dh);

template <class To>
tensor<To> rounded(const tensor<float>& x) {
  tensor<To> t(x.sizes());
  for (std::size_t i = 0; i < x.values().size(); ++i) t.values()[i] = To(x.values()[i]);
  return t;
}

template <class From>
tensor<float> widened(const tensor<From>& x) {
  tensor<float> t(x.sizes());
  for (std::size_t i = 0; i < x.values().size(); ++i) t.values()[i] = static_cast<float>(x.values()[i]);
  return t;
}

template <class Elem>
bool same_bits(const tensor<Elem>& a, const tensor<Elem>& b) {
  return a.sizes() == b.sizes() && std::memcmp(a.data(), b.data(), a.values().size() * sizeof(Elem)) == 0;
}
bool same_bits(const attn::any_tensor& a, const attn::any_tensor& b) {
  return a.type() == b.type() && a.sizes() == b.sizes() &&
         std::memcmp(a.view().data, b.view().data, static_cast<std::size_t>(a.view().elements() * attn::dtype_bytes(a.type()))) == 0;
}

bool has_bf16_dot_products(const Halide::Target& t) {
  return t.has_feature(Halide::Target::AVX512_Zen4) || t.has_feature(Halide::Target::AVX512_SapphireRapids);
}

// This CPU without its bfloat16 dot products: every 16-bit tensor converted as loaded.
std::string converting_host() {
  Halide::Target t = Halide::get_host_target();
  for (auto f : {Halide::Target::AVX512_SapphireRapids, Halide::Target::AVX512_Zen5, Halide::Target::AVX512_Zen4}) t = t.without_feature(f);
  return t.to_string();
}

// A 16-bit kernel (converted as loaded, its output 16-bit) and the float32 one of the same
// expression on the rounded values, its output rounded: the same bits.
template <class Elem, class E16, class E32>
void expect_as_float32(const std::string& what, const E16& low, const E32& full, std::int64_t n, std::mt19937& rng) {
  const auto k16 = attn::jit(low, {.target = converting_host()});
  const auto k32 = attn::jit(full);
  const tensor<Elem> q = rounded<Elem>(ref::random_tensor({2, 2, n, 16}, rng)), k = rounded<Elem>(ref::random_tensor({2, 2, n, 16}, rng)),
                     v = rounded<Elem>(ref::random_tensor({2, 2, n, 16}, rng));
  const tensor<Elem> y16 = k16(q, k, v);
  BOOST_TEST(same_bits(y16, rounded<Elem>(k32(widened(q), widened(k), widened(v)))), what << " at T = " << n);
}

// The naive float32 output of a kernel that rounds P: the weights rounded to bfloat16 before P·V,
// the output rounded to bfloat16.
ref::mat<float> with_rounded_weights(ref::result<float> naive, const ref::mat<float>& v) {
  for (float& w : naive.weights.a) w = static_cast<float>(bfloat16(w));
  ref::mat<float> y = ref::matmul(naive.weights, v);
  for (float& x : y.a) x = static_cast<float>(bfloat16(x));
  return y;
}

// A single-head bfloat16 kernel (T, width), kernel_at(T), against the float64 reference of the same
// rounded values: within 4 times the naive float32's error plus 1e-6 of the largest output. A
// bfloat16 output: the kernel rounds P (describe() says so), the naive one its weights.
template <class Make>
void expect_within_the_rule(const std::string& what, const Make& kernel_at, const std::vector<std::int64_t>& sizes, const ref::mask_pred& keep,
                            const ref::score_mod<double>& mod64, const ref::score_mod<float>& mod32, std::mt19937& rng,
                            std::int64_t width = 32, std::int64_t keys = 0) {
  for (std::int64_t n : sizes) {
    const auto kernel = kernel_at(n);
    const std::int64_t nk = keys > 0 ? keys : n;  // keys: as many as queries, or `keys`
    const tensor<bfloat16> qb = rounded<bfloat16>(ref::random_tensor({n, width}, rng, 2.0f)),
                           kb = rounded<bfloat16>(ref::random_tensor({nk, width}, rng, 2.0f)),
                           vb = rounded<bfloat16>(ref::random_tensor({nk, width}, rng));
    const auto result = kernel(qb, kb, vb);
    constexpr bool rounds_p = std::is_same_v<std::remove_cvref_t<decltype(result)>, tensor<bfloat16>>;
    const tensor<float> y = widened(result);
    const auto exact = ref::scaled_dot_product(ref::item<double>(widened(qb), 0, 2), ref::item<double>(widened(kb), 0, 2),
                                               ref::item<double>(widened(vb), 0, 2), ref::inv_sqrt(width), keep, mod64);
    const ref::mat<float> v32 = ref::item<float>(widened(vb), 0, 2);
    auto naive = ref::scaled_dot_product(ref::item<float>(widened(qb), 0, 2), ref::item<float>(widened(kb), 0, 2), v32,
                                         ref::inv_sqrt(width), keep, mod32);
    if (rounds_p) naive.output = with_rounded_weights(naive, v32);
    double err = 0, naive_err = 0, largest = 0;
    for (std::size_t i = 0; i < y.values().size(); ++i) {
      err = std::max(err, std::abs(y.values()[i] - exact.output.a[i]));
      naive_err = std::max(naive_err, std::abs(naive.output.a[i] - exact.output.a[i]));
      largest = std::max(largest, std::abs(exact.output.a[i]));
    }
    BOOST_TEST(err <= 4 * naive_err + 1e-6 * largest, what << ", T = " << n << ": error " << err << ", naive float32's " << naive_err);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(conversions_round_to_nearest_even) {
  BOOST_TEST(bfloat16(1.0f).bits == 0x3f80);
  BOOST_TEST(bfloat16(std::bit_cast<float>(0x3f808000u)).bits == 0x3f80);  // a tie: to even
  BOOST_TEST(bfloat16(std::bit_cast<float>(0x3f818000u)).bits == 0x3f82);  // a tie: to even (up)
  BOOST_TEST(bfloat16(std::bit_cast<float>(0x3f808001u)).bits == 0x3f81);
  BOOST_TEST(std::isnan(static_cast<float>(bfloat16(std::numeric_limits<float>::quiet_NaN()))));
  BOOST_TEST(static_cast<float>(bfloat16(-std::numeric_limits<float>::infinity())) == -std::numeric_limits<float>::infinity());
  BOOST_TEST(float16(1.0f).bits == 0x3c00);
  BOOST_TEST(float16(65504.0f).bits == 0x7bff);
  BOOST_TEST(float16(65520.0f).bits == 0x7c00);                          // rounds past the largest: infinity
  BOOST_TEST(float16(std::ldexp(1.0f, -24)).bits == 0x0001);               // the smallest subnormal
  BOOST_TEST(float16(std::ldexp(1.0f, -25)).bits == 0x0000);               // a tie: to even (0)
  BOOST_TEST(float16(std::ldexp(3.0f, -25)).bits == 0x0002);               // a tie: to even (2)
  BOOST_TEST(float16(-std::ldexp(1023.0f, -24)).bits == 0x83ff);
  BOOST_TEST(float16(std::ldexp(1.0f, -14)).bits == 0x0400);               // the smallest normal
  BOOST_TEST(float16(1.0f + std::ldexp(1.0f, -11)).bits == 0x3c00);        // a tie: to even
  BOOST_TEST(float16(1.0f + 3 * std::ldexp(1.0f, -11)).bits == 0x3c02);    // a tie: to even (up)
  BOOST_TEST(std::isnan(static_cast<float>(float16(std::numeric_limits<float>::quiet_NaN()))));
  // Every float16 reads back exactly and converts to itself.
  for (std::uint32_t b = 0; b < 0x10000u; ++b) {
    float16 h;
    h.bits = static_cast<std::uint16_t>(b);
    const float f = static_cast<float>(h);
    if (!std::isnan(f)) BOOST_TEST_REQUIRE(float16(f).bits == h.bits, "bits " << b);
  }
}

BOOST_AUTO_TEST_CASE(sixteen_bit_kernels_compute_what_float32_computes_from_the_same_values) {
  std::mt19937 rng(5);
  for (std::int64_t n : {1, 7, 33, 257}) {
    expect_as_float32<bfloat16>("causal, bfloat16", combine(softmax(causal(scaled_scores(qb, kb))), vb),
                                combine(softmax(causal(scaled_scores(q, k))), v), n, rng);
    expect_as_float32<float16>("causal, float16", combine(softmax(causal(scaled_scores(qh, kh))), vh),
                               combine(softmax(causal(scaled_scores(q, k))), v), n, rng);
    expect_as_float32<bfloat16>("sliding window + softcap, bfloat16",
                                combine(softmax(sliding_window(softcap(scaled_scores(qb, kb), 20.0f), 5)), vb),
                                combine(softmax(sliding_window(softcap(scaled_scores(q, k), 20.0f), 5)), v), n, rng);
    expect_as_float32<bfloat16>("ALiBi + causal, bfloat16", combine(softmax(causal(alibi(scaled_scores(qb, kb), H))), vb),
                                combine(softmax(causal(alibi(scaled_scores(q, k), H))), v), n, rng);
  }
}

// Gradients of a kernel with 16-bit tensors, each in its tensor's type: those of the float32 kernel
// on the same values, rounded to that type; the fused backward and the generic one alike.
BOOST_AUTO_TEST_CASE(gradients_are_those_of_the_same_values_in_float32) {
  std::mt19937 rng(11);
  for (const attn::lowering path : {attn::lowering::automatic, attn::lowering::generic}) {
    const auto g16 = attn::jit_gradients(combine(softmax(causal(scaled_scores(q, kb))), vh), {.path = path});
    const auto g32 = attn::jit_gradients(combine(softmax(causal(scaled_scores(q, k))), v), {.path = path});
    const tensor<float> qt = ref::random_tensor({2, 2, 70, 16}, rng), dy = ref::random_tensor({2, 2, 70, 16}, rng);
    const tensor<bfloat16> kt = rounded<bfloat16>(ref::random_tensor({2, 2, 70, 16}, rng));
    const tensor<float16> vt = rounded<float16>(ref::random_tensor({2, 2, 70, 16}, rng));
    const attn::gradients a = g16(dy, qt, kt, vt), b = g32(dy, qt, widened(kt), widened(vt));
    BOOST_REQUIRE(a.size() == 3u);
    BOOST_TEST((a.values[0].type() == attn::dtype::f32 && a.values[1].type() == attn::dtype::bf16 && a.values[2].type() == attn::dtype::f16));
    for (std::size_t i = 0; i < a.size(); ++i) {
      const attn::any_tensor rounded_b(a.values[i].type(), b.values[i].sizes(), b.values[i].as<float>().values());
      BOOST_TEST(same_bits(a.values[i], rounded_b), "d" << a.names[i] << " " << g16.describe());
    }
    BOOST_CHECK_THROW(a["k"], attn::dtype_error);  // read as float32: it is bfloat16
    BOOST_TEST(g16.describe().find("d_k=bfloat16,d_v=float16 (rounded as stored)") != std::string::npos, g16.describe());
    BOOST_TEST(same_bits(a.get<bfloat16>("k"), a.values[1].as<bfloat16>()));
  }
}

BOOST_AUTO_TEST_CASE(within_four_times_a_naive_float32_error) {
  std::mt19937 rng(9);
  constexpr auto D = dim<"D", 32>;
  const auto y = combine(softmax(causal(scaled_scores(input<"q", bf16>(T, D), input<"k", bf16>(T, D)))), input<"v", bf16>(T, D));
  const auto keep = [](ref::index i, ref::index j, ref::index) { return j <= i; };
  const auto kernel = attn::jit(output_as<f32>(y), {.target = converting_host()});
  expect_within_the_rule("causal, converted", [&](std::int64_t) { return kernel; }, {1, 7, 33, 257, 1000}, keep, {}, {}, rng);
}

// Built for a CPU with AVX512-BF16 on any machine: the kernel's assembly has vdpbf16ps.
BOOST_AUTO_TEST_CASE(bfloat16_dot_products_build_for_avx512_zen4) {
  constexpr auto D = dim<"D", 32>;
  const auto y = combine(softmax(causal(scaled_scores(input<"q", bf16>(T, D), input<"k", bf16>(T, D)))), input<"v", bf16>(T, D));
  attn::aot::options o;
  o.name = "bf16_dots";
  o.targets = {"x86-64-linux-avx512_zen4"};
  o.bind = {{"T", 64}};
  o.assembly = true;
  o.out_dir = std::filesystem::temp_directory_path() / ("attn_bf16_dots_" + std::to_string(::getpid()));
  std::filesystem::create_directories(o.out_dir);
  attn::aot::generate(attn::dsl::to_ir(y), o);
  std::ifstream s(o.out_dir / "bf16_dots.s");
  const std::string assembly{std::istreambuf_iterator<char>(s), {}};
  std::filesystem::remove_all(o.out_dir);
  BOOST_TEST(assembly.find("vdpbf16ps") != std::string::npos);
}

// Q·Kᵀ on bfloat16 dot products where the CPU has them (describe() says so), P·V too where the
// output is bfloat16 and the queries are known when compiling to be more than a few (T bound
// here: 13 queries and more), every mask and modifier family within the rule; elsewhere skipped
// (bfloat16_dot_products_build_for_avx512_zen4 builds them).
BOOST_AUTO_TEST_CASE(bfloat16_dot_products_where_the_cpu_has_them, *boost::unit_test::label("dot_products")) {
  if (!has_bf16_dot_products(Halide::get_host_target())) {
    BOOST_TEST_MESSAGE("skipped: this CPU has no AVX512-BF16");
    return;
  }
  std::mt19937 rng(21);
  constexpr auto D = dim<"D", 32>;
  const auto s = scaled_scores(input<"q", bf16>(T, D), input<"k", bf16>(T, D));
  constexpr auto v32 = input<"v", bf16>(T, D);
  // T bound to n; a float32 output: Q·Kᵀ on the dot products, P·V in float32; a bfloat16 one: both.
  const auto float32_output = [](const auto& e) {
    return [e](std::int64_t n) {
      auto kernel = attn::jit(output_as<f32>(e), {.bind = {{"T", n}}});
      BOOST_TEST(kernel.compiled().describe().find("products=bfloat16 dot products (Q·Kᵀ,") != std::string::npos, kernel.compiled().describe());
      return kernel;
    };
  };
  const auto bfloat16_output = [](const auto& e) {
    return [e](std::int64_t n) {
      auto kernel = attn::jit(e, {.bind = {{"T", n}}});
      BOOST_TEST(kernel.compiled().describe().find("products=bfloat16 dot products (Q·Kᵀ and P·V,") != std::string::npos,
                 kernel.compiled().describe());
      return kernel;
    };
  };
  const auto causal_keep = [](ref::index i, ref::index j, ref::index) { return j <= i; };
  const auto window_keep = [](ref::index i, ref::index j, ref::index) { return j <= i && i - j < 5; };
  const auto cap = [](auto x, ref::index, ref::index, ref::index) { return 20 * std::tanh(x / 20); };
  const auto slope = [](auto x, ref::index i, ref::index j, ref::index) { return x - 0.25f * static_cast<float>(i - j); };
  const auto every_family = [&](const auto& bound, const std::vector<std::int64_t>& sizes) {
    expect_within_the_rule("causal", bound(combine(softmax(causal(s)), v32)), sizes, causal_keep, {}, {}, rng);
    expect_within_the_rule("full", bound(combine(softmax(s), v32)), {33, 1000}, {}, {}, {}, rng);
    expect_within_the_rule("sliding window 5 + softcap", bound(combine(softmax(sliding_window(softcap(s, 20.0f), 5)), v32)), sizes,
                           window_keep, cap, cap, rng);
    expect_within_the_rule("linear bias + causal", bound(combine(softmax(causal(modify(s, score - 0.25f * (q_idx - kv_idx)))), v32)),
                           {33, 257}, causal_keep, slope, slope, rng);
  };
  every_family(float32_output, {13, 33, 257, 1000});
  every_family(bfloat16_output, {13, 256, 1000});  // 256: whole partial tiles, on pairs
  // A head width whose pairs are no whole number of the keys' copy's blocks (10 pairs: 8 + 2).
  constexpr auto D20 = dim<"D", 20>;
  const auto s20 = scaled_scores(input<"q", bf16>(T, D20), input<"k", bf16>(T, D20));
  expect_within_the_rule("causal, Dh 20", bfloat16_output(combine(softmax(causal(s20)), input<"v", bf16>(T, D20))), {33, 257},
                         causal_keep, {}, {}, rng, 20);
  // Queries counted at the call: one kernel for every count, on the dot products too; up to 4
  // queries Q·Kᵀ runs as partial dot products in float32 (K's rows read as they are), up to 12
  // (decoding) on K's pairs copied per key tile, past that once per call.
  const auto at_the_call = [](const auto& e) {
    auto kernel = attn::jit(e);
    BOOST_TEST(kernel.compiled().describe().find("products=bfloat16 dot products (Q·Kᵀ beyond 4 queries") != std::string::npos,
               kernel.compiled().describe());
    return [kernel](std::int64_t) { return kernel; };
  };
  expect_within_the_rule("causal, T at the call", at_the_call(combine(softmax(causal(s)), v32)), {1, 4, 5, 7, 12, 13, 257}, causal_keep,
                         {}, {}, rng);
  constexpr auto NQ = dim<"NQ">;
  constexpr auto NK = dim<"NK">;
  const auto decode = scaled_scores(input<"q", bf16>(NQ, D), input<"k", bf16>(NK, D));
  expect_within_the_rule("few queries, 1000 keys", at_the_call(combine(softmax(decode), input<"v", bf16>(NK, D))), {1, 3, 5, 12}, {}, {},
                         {}, rng, 32, 1000);

  // NaN in keys and values behind key padding (a length of 0 included) reaches nothing; full key
  // tiles of 32 (P·V on pairs) beside partial ones of 16 (guarded).
  const auto padded = attn::jit(combine(softmax(key_padding(scaled_scores(input<"q", bf16>(NQ, Dh), input<"k", bf16>(NK, Dh)), lengths<"len">)),
                                        input<"v", bf16>(NK, Dh)),
                                {.bind = {{"NQ", 20}}, .schedule = "kv_tile=32 partial_tile=16"});
  BOOST_TEST(padded.compiled().describe().find("products=bfloat16 dot products (Q·Kᵀ and P·V,") != std::string::npos,
             padded.compiled().describe());
  const tensor<bfloat16> q = rounded<bfloat16>(ref::random_tensor({3, 20, 16}, rng));
  tensor<bfloat16> k = rounded<bfloat16>(ref::random_tensor({3, 40, 16}, rng)), v = rounded<bfloat16>(ref::random_tensor({3, 40, 16}, rng));
  tensor<std::int32_t> len({3});
  len.values() = {17, 40, 0};
  for (std::int64_t b : {0, 2})
    for (std::int64_t j = len.values()[static_cast<std::size_t>(b)]; j < 40; ++j)
      for (std::int64_t d = 0; d < 16; ++d) k(b, j, d) = v(b, j, d) = bfloat16(std::numeric_limits<float>::quiet_NaN());
  const tensor<float> out = widened(padded(q, k, v, len));
  for (std::int64_t b = 0; b < 3; ++b)
    for (std::int64_t i = 0; i < 20; ++i)
      for (std::int64_t d = 0; d < 16; ++d) {
        BOOST_TEST_REQUIRE(std::isfinite(out(b, i, d)));
        if (b == 2) BOOST_TEST_REQUIRE(out(b, i, d) == 0.0f);  // no key: 0
      }
}

// GQA and MQA (repeat_heads of a bfloat16 K and V) on the dot products too, each group's pairs
// read by its query heads: bitwise the output of the same kernel on K and V repeated by hand, with
// the queries bound (Q·Kᵀ and P·V on pairs) and counted at the call (few: K's pairs per key tile;
// many), a batch of 2.
BOOST_AUTO_TEST_CASE(grouped_heads_on_bfloat16_dot_products, *boost::unit_test::label("dot_products")) {
  if (!has_bf16_dot_products(Halide::get_host_target())) {
    BOOST_TEST_MESSAGE("skipped: this CPU has no AVX512-BF16");
    return;
  }
  std::mt19937 rng(29);
  constexpr auto H4 = head_dim<"H", 4>;
  constexpr auto NQ = dim<"NQ">;
  constexpr auto NK = dim<"NK">;
  constexpr auto D = dim<"D", 32>;
  const auto q4 = input<"q", bf16>(H4, NQ, D);
  const auto by_hand = combine(softmax(scaled_scores(q4, input<"k", bf16>(H4, NK, D))), input<"v", bf16>(H4, NK, D));
  const auto check = [&](const auto& grouped, std::int64_t groups) {
    for (const std::int64_t nq : {3, 5, 20}) {
      for (const bool bound : {false, true}) {
        attn::jit_options o;
        if (bound) o.bind = {{"NQ", nq}};
        const auto kernel = attn::jit(grouped, o), reference = attn::jit(by_hand, o);
        // Bound: P·V on pairs past 12 queries, Q·Kᵀ past 4 (partial dot products in float32 up to 4).
        const std::string how = kernel.compiled().describe();
        if (!bound) BOOST_TEST(how.find("products=bfloat16 dot products (Q·Kᵀ beyond 4 queries,") != std::string::npos, how);
        else if (nq > 12) BOOST_TEST(how.find("products=bfloat16 dot products (Q·Kᵀ and P·V,") != std::string::npos, how);
        else if (nq > 4) BOOST_TEST(how.find("products=bfloat16 dot products (Q·Kᵀ,") != std::string::npos, how);
        else BOOST_TEST(how.find("products=bfloat16") == std::string::npos, how);
        const tensor<bfloat16> qt = rounded<bfloat16>(ref::random_tensor({2, 4, nq, 32}, rng)),
                               kt = rounded<bfloat16>(ref::random_tensor({2, groups, 70, 32}, rng)),
                               vt = rounded<bfloat16>(ref::random_tensor({2, groups, 70, 32}, rng));
        tensor<bfloat16> k4({2, 4, 70, 32}), v4({2, 4, 70, 32});
        for (std::int64_t b = 0; b < 2; ++b)
          for (std::int64_t h = 0; h < 4; ++h)
            for (std::int64_t j = 0; j < 70; ++j)
              for (std::int64_t d = 0; d < 32; ++d) {
                k4(b, h, j, d) = kt(b, h / (4 / groups), j, d);
                v4(b, h, j, d) = vt(b, h / (4 / groups), j, d);
              }
        BOOST_TEST(same_bits(kernel(qt, kt, vt), reference(qt, k4, v4)), groups << " groups, " << nq << " queries, bound " << bound);
      }
    }
  };
  constexpr auto G = head_dim<"G", 2>;
  check(combine(softmax(scaled_scores(q4, repeat_heads(input<"k", bf16>(G, NK, D), H4))), repeat_heads(input<"v", bf16>(G, NK, D), H4)), 2);
  constexpr auto G1 = head_dim<"G", 1>;
  check(combine(softmax(scaled_scores(q4, repeat_heads(input<"k", bf16>(G1, NK, D), H4))), repeat_heads(input<"v", bf16>(G1, NK, D), H4)),
        1);
}

BOOST_AUTO_TEST_CASE(mixed_types_masked_nan_and_errors) {
  std::mt19937 rng(3);
  constexpr auto NQ = dim<"NQ">;
  constexpr auto NK = dim<"NK">;
  // A bfloat16 key/value cache with float32 queries, keys padded: NaN behind the padding stays there.
  const auto y = combine(softmax(key_padding(scaled_scores(input<"q">(NQ, Dh), input<"k", bf16>(NK, Dh)), lengths<"len">)),
                         input<"v", bf16>(NK, Dh));
  const auto kernel = attn::jit(y);
  const tensor<float> q = ref::random_tensor({2, 3, 16}, rng);
  tensor<bfloat16> k = rounded<bfloat16>(ref::random_tensor({2, 40, 16}, rng)), v = rounded<bfloat16>(ref::random_tensor({2, 40, 16}, rng));
  tensor<std::int32_t> len({2});
  len.values() = {17, 40};
  for (std::int64_t j = 17; j < 40; ++j)
    for (std::int64_t d = 0; d < 16; ++d) k(0, j, d) = v(0, j, d) = bfloat16(std::numeric_limits<float>::quiet_NaN());
  BOOST_TEST(kernel.compiled().describe().find("read=k:bfloat16,v:bfloat16 (converted to float32 as loaded)") != std::string::npos,
             kernel.compiled().describe());
  const tensor<float> out = kernel(q, k, v, len);
  for (float x : out.values()) BOOST_TEST_REQUIRE(std::isfinite(x));
  const auto reference = attn::jit(combine(softmax(key_padding(scaled_scores(input<"q">(NQ, Dh), input<"k">(NK, Dh)), lengths<"len">)),
                                           input<"v">(NK, Dh)));
  tensor<float> k32 = widened(k), v32 = widened(v);
  for (std::int64_t j = 17; j < 40; ++j)
    for (std::int64_t d = 0; d < 16; ++d) k32(0, j, d) = v32(0, j, d) = 0.0f;
  BOOST_TEST(same_bits(out, reference(q, k32, v32, len)));

  // The type is part of the signature: a float32 tensor for a bfloat16 one says so.
  BOOST_CHECK_EXCEPTION(kernel(q, widened(k), v, len), attn::dtype_error, [](const attn::dtype_error& e) {
    const std::string m = e.what();
    return m.find("tensor 'k'") != std::string::npos && m.find("expected bfloat16, got float32") != std::string::npos;
  });
  // A kernel built ahead of time declares them (test_aot runs one).
  attn::aot::options o;
  o.name = "low";
  const std::string header = attn::aot::abi_comment(attn::dsl::to_ir(y), o);
  BOOST_TEST(header.find("2. k  bfloat16 [batch, NK (any), Dh = 16]") != std::string::npos, header);
  // OpenCL C holds 16-bit elements as half: without cl_half that is refused, naming the tensor.
  o.targets = {"host-opencl"};
  o.out_dir = std::filesystem::temp_directory_path();
  BOOST_CHECK_EXCEPTION(attn::aot::generate(attn::dsl::to_ir(y), o), attn::compile_error, [](const attn::compile_error& e) {
    const std::string m = e.what();
    return m.find("tensor 'k' is bfloat16") != std::string::npos && m.find("cl_half") != std::string::npos;
  });
}

// The output's type: the float tensors' common one, or output_as's; the checks name it.
BOOST_AUTO_TEST_CASE(output_type_follows_the_inputs_or_output_as) {
  std::mt19937 rng(17);
  const auto bf16_y = combine(softmax(causal(scaled_scores(qb, kb))), vb);
  const auto f32_y = combine(softmax(causal(scaled_scores(q, k))), v);
  const auto mixed = attn::jit(combine(softmax(causal(scaled_scores(q, kb))), vb));
  static_assert(std::is_same_v<decltype(attn::jit(bf16_y))::output_value, bfloat16>);
  static_assert(std::is_same_v<decltype(attn::jit(combine(softmax(scaled_scores(qh, kh)), vh)))::output_value, float16>);
  static_assert(std::is_same_v<decltype(mixed)::output_value, float>);
  static_assert(std::is_same_v<decltype(attn::jit(output_as<f32>(bf16_y)))::output_value, float>);
  static_assert(std::is_same_v<decltype(attn::jit(output_as<bf16>(f32_y)))::output_value, bfloat16>);
  BOOST_TEST((mixed.compiled().output_type() == attn::dtype::f32));

  const tensor<bfloat16> qt = rounded<bfloat16>(ref::random_tensor({2, 2, 33, 16}, rng)), kt = rounded<bfloat16>(ref::random_tensor({2, 2, 33, 16}, rng));
  tensor<bfloat16> vt = rounded<bfloat16>(ref::random_tensor({2, 2, 33, 16}, rng));
  vt(1, 0, 0, 3) = bfloat16(std::numeric_limits<float>::quiet_NaN());  // every query of (1, 0) sees it at d = 3
  for (const attn::lowering path : {attn::lowering::automatic, attn::lowering::generic}) {
    const auto rounded_out = attn::jit(bf16_y, {.path = path});
    const auto float_out = attn::jit(output_as<f32>(bf16_y), {.path = path});
    const tensor<bfloat16> y = rounded_out(qt, kt, vt);
    const tensor<float> y32 = float_out(qt, kt, vt);
    BOOST_TEST(same_bits(y, rounded<bfloat16>(y32)), rounded_out.compiled().describe());
    for (std::int64_t i = 0; i < 33; ++i) BOOST_TEST_REQUIRE(std::isnan(static_cast<float>(y(1, 0, i, 3))));
    // float32 tensors, the output rounded to bfloat16: the float32 kernel's output rounded.
    const tensor<bfloat16> yr = attn::jit(output_as<bf16>(f32_y), {.path = path})(widened(qt), widened(kt), widened(vt));
    BOOST_TEST(same_bits(yr, rounded<bfloat16>(attn::jit(f32_y, {.path = path})(widened(qt), widened(kt), widened(vt)))));
  }

  // Into the caller's memory: a strided bfloat16 view is written; a float32 one is a dtype_error.
  const auto kernel = attn::jit(bf16_y);
  tensor<bfloat16> wide({2, 2, 33, 32});
  kernel.into(attn::view(wide.data(), {2, 2, 33, 16}, {2 * 33 * 32, 33 * 32, 32, 1}), qt, kt, vt);
  const tensor<bfloat16> y = kernel(qt, kt, vt);
  for (std::int64_t i = 0; i < 33; ++i) BOOST_TEST_REQUIRE(wide(0, 1, i, 5).bits == y(0, 1, i, 5).bits);
  tensor<float> wrong({2, 2, 33, 16});
  BOOST_CHECK_EXCEPTION(kernel.into(wrong, qt, kt, vt), attn::dtype_error, [](const attn::dtype_error& e) {
    return std::string(e.what()).find("output 'output': expected bfloat16, got float32") != std::string::npos;
  });
  const std::array<attn::tensor_view, 3> views{qt.view(), kt.view(), vt.view()};
  BOOST_CHECK_THROW(kernel.compiled().run(views), attn::dtype_error);  // run<float> of a bfloat16 output

  // Output and parts: a tensor's own type when the expression is the tensor; output_as only on the whole.
  BOOST_TEST((attn::dsl::to_ir(qb).output().type == attn::ir::element::bf16));
  BOOST_CHECK_THROW(attn::dsl::to_ir(output_as<f32>(vb) + vb), std::logic_error);

  // Ahead of time the header states it.
  attn::aot::options o;
  o.name = "typed";
  const std::string header = attn::aot::abi_comment(attn::dsl::to_ir(bf16_y), o);
  BOOST_TEST(header.find("output  bfloat16") != std::string::npos, header);
  BOOST_TEST(kernel.compiled().describe().find("output=bfloat16 (rounded as stored)") != std::string::npos, kernel.compiled().describe());
  // OpenCL C holds 16-bit elements as half: a bfloat16 output too needs cl_half.
  o.targets = {"host-opencl"};
  o.out_dir = std::filesystem::temp_directory_path();
  BOOST_CHECK_EXCEPTION(attn::aot::generate(attn::dsl::to_ir(output_as<bf16>(f32_y)), o), attn::compile_error, [](const attn::compile_error& e) {
    return std::string(e.what()).find("a result is stored as bfloat16") != std::string::npos;
  });
}

// Gradients of a kernel whose tensors and output are bfloat16: dY and the saved output are read as
// stored (bfloat16; the output given by the caller or computed), the gradients are bfloat16.
BOOST_AUTO_TEST_CASE(gradients_read_a_bfloat16_saved_output) {
  std::mt19937 rng(19);
  const auto y = combine(softmax(causal(scaled_scores(qb, kb))), vb);
  const auto grads = attn::jit_gradients(y);
  const auto forward = attn::jit(y, {.with_lse = true});
  const tensor<bfloat16> qt = rounded<bfloat16>(ref::random_tensor({1, 2, 40, 16}, rng)), kt = rounded<bfloat16>(ref::random_tensor({1, 2, 40, 16}, rng)),
                         vt = rounded<bfloat16>(ref::random_tensor({1, 2, 40, 16}, rng));
  const tensor<bfloat16> dy = rounded<bfloat16>(ref::random_tensor({1, 2, 40, 16}, rng));
  const auto saved = forward.run(qt, kt, vt);
  const attn::gradients computed = grads(dy, qt, kt, vt), given = grads(dy, attn::saved{saved.output, saved.lse}, qt, kt, vt);
  const attn::gradients exact =
      attn::jit_gradients(combine(softmax(causal(scaled_scores(q, k))), v))(widened(dy), widened(qt), widened(kt), widened(vt));
  BOOST_CHECK_THROW(grads(widened(dy), qt, kt, vt), attn::dtype_error);  // dY in the output's type
  attn::aot::options o;
  o.name = "typed_gradients";
  const std::string header = attn::aot::abi_comment(attn::ir::gradient(attn::dsl::to_ir(y)), o);
  BOOST_TEST(header.find("d_output  bfloat16") != std::string::npos, header);
  BOOST_TEST(header.find("d_q  bfloat16") != std::string::npos, header);
  BOOST_REQUIRE(computed.size() == 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    BOOST_TEST((computed.values[i].type() == attn::dtype::bf16));
    BOOST_TEST(same_bits(computed.values[i], given.values[i]), "d" << computed.names[i]);
    const std::vector<float> got = computed.values[i].floats(), want = exact.values[i].as<float>().values();
    double err = 0, largest = 0;
    for (std::size_t j = 0; j < want.size(); ++j) {
      err = std::max(err, double(std::abs(got[j] - want[j])));
      largest = std::max(largest, double(std::abs(want[j])));
    }
    BOOST_TEST(err <= 0x1p-6 * largest, "d" << computed.names[i] << ": " << err << " of " << largest);  // O and the gradients rounded
  }
  // A tensor shared by the batch (given without the batch dim): its gradient is the batch's sum,
  // added in float32 and rounded once more.
  const tensor<bfloat16> q2 = rounded<bfloat16>(ref::random_tensor({2, 2, 40, 16}, rng)), dy2 = rounded<bfloat16>(ref::random_tensor({2, 2, 40, 16}, rng));
  const tensor<bfloat16> k1 = rounded<bfloat16>(ref::random_tensor({2, 40, 16}, rng)), v1 = rounded<bfloat16>(ref::random_tensor({2, 40, 16}, rng));
  const attn::gradients shared = grads(dy2, q2, k1, v1);
  const tensor<bfloat16>& dk = shared.get<bfloat16>("k");
  const tensor<float> dk32 =
      attn::jit_gradients(combine(softmax(causal(scaled_scores(q, k))), v))(widened(dy2), widened(q2), widened(k1), widened(v1))["k"];
  BOOST_REQUIRE((dk.sizes() == std::vector<std::int64_t>{2, 40, 16}));
  double err = 0, largest = 0;
  for (std::size_t j = 0; j < dk32.values().size(); ++j) {
    err = std::max(err, double(std::abs(static_cast<float>(dk.values()[j]) - dk32.values()[j])));
    largest = std::max(largest, double(std::abs(dk32.values()[j])));
  }
  BOOST_TEST(err <= 0x1p-6 * largest, "shared dk: " << err << " of " << largest);
}
