// Products alone (project, matmul, combine), JIT-compiled with the register-tiled schedule of
// generators/cpu/matmul_schedule.hpp and compared with the independent reference of support/reference.hpp.
//
// Shapes: rows 1, 7, 33, 257, 1000 (run time: 1 row, a partial row tile, one row past a multiple
// of 16 and 32, many tiles and a tail); widths 3, 8, 64, 100, 512 (static: narrower than a vector,
// half a vector, whole tiles, a partial tile, many tiles) for both the contracted and the output
// dim; run-time contracted and output dims (Q·Kᵀ, A·V); leading dims (a group dim, heads through
// split_heads and concat_heads); vector operands on either side; no batch dim, batches of 1 and 3.
// Each run checks every tensor's bounds, so a schedule that read outside an operand would fail.
//
// Tolerance (ref::compare, as in test_variants): per batch item, max |kernel - double reference|
// must be at most 2 · max |naive float - double reference| + 1e-6 · max(1, max |reference|).
// The naive float is the same sum over k, in order, in float; the kernel sums in the same order,
// with fused multiply-adds, so it is usually a little closer to the double reference.
#define BOOST_TEST_MODULE products
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "generators/lowering/lower.hpp"
#include "generators/cpu/matmul_schedule.hpp"
#include "runtime/jit.hpp"
#include "support/reference.hpp"

namespace {

using namespace attn::dsl;
namespace ref = attn::ref;
using attn::tensor;
using ref::index;
using ref::item;
using ref::mat;
using ref::random_tensor;
using ref::with_batch;

constexpr auto T = dim<"T">;
constexpr auto S = dim<"S">;

const std::vector<index> row_sizes = {1, 7, 33, 257, 1000};
// (T, S) pairs for products whose two outer dims, or whose contracted dim, are run-time dims.
const std::vector<std::pair<index, index>> ts_sizes = {{1, 1}, {1, 7}, {7, 1}, {7, 33}, {33, 7}, {257, 100}, {100, 257}};
// 0: no batch dim; 1 and 3: a leading batch dim.
const std::vector<index> batch_sizes = {0, 1, 3};

std::string case_name(const std::string& what, index rows, index batch) {
  return what + " rows=" + std::to_string(rows) + (batch == 0 ? std::string(" (no batch dim)") : " B=" + std::to_string(batch));
}

// Compares a kernel output with reference(b, Acc{}) (one batch item as mat<Acc>, flattened row-major).
template <class Reference>
void expect_matches(const tensor<float>& got, index batch, const std::vector<index>& item_shape,
                    const Reference& reference, const std::string& what) {
  const std::vector<index> want = with_batch(batch, item_shape);
  BOOST_CHECK_MESSAGE(got.sizes() == want, what << ": output shape " << ref::to_string(got.sizes()) << ", expected "
                                                << ref::to_string(want));
  if (got.sizes() != want) return;
  const index n = ref::elements(item_shape);
  for (index b = 0; b < std::max<index>(batch, 1); ++b) {
    const ref::comparison c = ref::compare(got.data() + b * n, n, reference(b, double{}), reference(b, float{}));
    BOOST_CHECK_MESSAGE(c.ok, what << ", batch item " << b << ": " << c.describe());
  }
}

// Rows [first, first + count) of x.
template <class Acc>
mat<Acc> rows(const mat<Acc>& x, index first, index count) {
  mat<Acc> r(count, x.cols);
  for (index i = 0; i < count; ++i)
    for (index j = 0; j < x.cols; ++j) r(i, j) = x(first + i, j);
  return r;
}

// Stacks equal-width matrices vertically (a leading dim, flattened row-major).
template <class Acc>
mat<Acc> stack(const std::vector<mat<Acc>>& parts) {
  mat<Acc> r(0, parts.front().cols);
  for (const mat<Acc>& p : parts) {
    r.a.insert(r.a.end(), p.a.begin(), p.a.end());
    r.rows += p.rows;
  }
  return r;
}

// ------------------------------------------------------------------ X·W: static widths, run-time rows

template <std::int64_t K, std::int64_t N>
void check_project(std::uint32_t seed) {
  constexpr auto Kd = dim<"K", K>;
  constexpr auto Nd = dim<"N", N>;
  const auto kernel = attn::jit(project(input<"x">(T, Kd), weight<"w">(Kd, Nd)));
  std::mt19937 rng(seed);
  const tensor<float> w = random_tensor({K, N}, rng);
  for (index t : row_sizes)
    for (index batch : batch_sizes) {
      const tensor<float> x = random_tensor(with_batch(batch, {t, K}), rng);
      expect_matches(kernel(x, w), batch, {t, N}, [&](index b, auto acc) {
        using Acc = decltype(acc);
        return ref::matmul(item<Acc>(x, b, 2), item<Acc>(w, 0, 2));
      }, case_name("project K=" + std::to_string(K) + " N=" + std::to_string(N), t, batch));
    }
}

BOOST_AUTO_TEST_CASE(project_narrow) {
  check_project<3, 8>(1);
  check_project<8, 3>(2);
  check_project<3, 100>(3);
}

BOOST_AUTO_TEST_CASE(project_tiles_and_tails) {
  check_project<64, 64>(4);
  check_project<100, 100>(5);
  check_project<8, 512>(6);
}

BOOST_AUTO_TEST_CASE(project_model_width) {
  check_project<512, 64>(7);
  check_project<512, 512>(8);
  check_project<512, 520>(9);  // b packed in column blocks of 128, the last one 8 wide
}

// A wide b (a block of its columns at a time) is read from panels one register tile wide, packed
// per block (matmul_schedule.hpp); a narrow one, that stays in cache whole, in place.
BOOST_AUTO_TEST_CASE(wide_products_read_packed_panels) {
  constexpr auto Kd = dim<"K", 512>;
  const auto wide = attn::jit(project(input<"x">(T, Kd), weight<"w">(Kd, dim<"N", 512>)));
  const auto narrow = attn::jit(project(input<"x">(T, Kd), weight<"w">(Kd, dim<"N", 64>)));
  BOOST_TEST(wide.loop_nest().find("_panels") != std::string::npos);
  BOOST_TEST(narrow.loop_nest().find("_panels") == std::string::npos);
}

// ------------------------------------------------------------------ run-time outer and contracted dims

// Q·Kᵀ: (T, K)·(S, K)ᵀ, the right operand a transposed Func; T and S both run-time.
BOOST_AUTO_TEST_CASE(matmul_transposed_runtime_dims) {
  constexpr auto Kd = dim<"K", 8>;
  const auto kernel = attn::jit(matmul(input<"a">(T, Kd), transpose(input<"b">(S, Kd))));
  std::mt19937 rng(9);
  for (auto [t, s] : ts_sizes)
    for (index batch : batch_sizes) {
      const tensor<float> a = random_tensor(with_batch(batch, {t, 8}), rng);
      const tensor<float> b = random_tensor(with_batch(batch, {s, 8}), rng);
      expect_matches(kernel(a, b), batch, {t, s}, [&](index i, auto acc) {
        using Acc = decltype(acc);
        return ref::matmul(item<Acc>(a, i, 2), ref::transpose(item<Acc>(b, i, 2)));
      }, case_name("a·bᵀ S=" + std::to_string(s), t, batch));
    }
}

// A·V: (T, S)·(S, N), the contracted dim S a run-time dim.
BOOST_AUTO_TEST_CASE(combine_runtime_depth) {
  constexpr auto Nd = dim<"N", 100>;
  const auto kernel = attn::jit(combine(input<"p">(T, S), input<"v">(S, Nd)));
  std::mt19937 rng(10);
  for (auto [t, s] : ts_sizes)
    for (index batch : batch_sizes) {
      const tensor<float> p = random_tensor(with_batch(batch, {t, s}), rng);
      const tensor<float> v = random_tensor(with_batch(batch, {s, 100}), rng);
      expect_matches(kernel(p, v), batch, {t, 100}, [&](index i, auto acc) {
        using Acc = decltype(acc);
        return ref::matmul(item<Acc>(p, i, 2), item<Acc>(v, i, 2));
      }, case_name("combine S=" + std::to_string(s), t, batch));
    }
}

// ------------------------------------------------------------------ leading dims

// (G, T, K)·(G, K, N) and (G, T, K)·(K, N): a group dim on both sides, then broadcast.
BOOST_AUTO_TEST_CASE(matmul_leading_dims) {
  constexpr index g = 3, k = 64, n = 40;
  constexpr auto G = dim<"G", g>;
  constexpr auto Kd = dim<"K", k>;
  constexpr auto Nd = dim<"N", n>;
  const auto both = attn::jit(matmul(input<"a">(G, T, Kd), input<"b">(G, Kd, Nd)));
  const auto shared = attn::jit(project(input<"a">(G, T, Kd), weight<"w">(Kd, Nd)));
  std::mt19937 rng(11);
  for (index t : {index{1}, index{7}, index{33}, index{257}})
    for (index batch : batch_sizes) {
      const tensor<float> a = random_tensor(with_batch(batch, {g, t, k}), rng);
      const tensor<float> b = random_tensor(with_batch(batch, {g, k, n}), rng);
      const tensor<float> w = random_tensor({k, n}, rng);
      auto reference = [&](index i, auto acc, bool broadcast) {
        using Acc = decltype(acc);
        const mat<Acc> ai = item<Acc>(a, i, 3), bi = broadcast ? item<Acc>(w, 0, 2) : item<Acc>(b, i, 3);
        std::vector<mat<Acc>> parts;
        for (index j = 0; j < g; ++j)
          parts.push_back(ref::matmul(rows(ai, j * t, t), broadcast ? bi : rows(bi, j * k, k)));
        return stack(parts);
      };
      expect_matches(both(a, b), batch, {g, t, n}, [&](index i, auto acc) { return reference(i, acc, false); },
                     case_name("(G, T, K)·(G, K, N)", t, batch));
      expect_matches(shared(a, w), batch, {g, t, n}, [&](index i, auto acc) { return reference(i, acc, true); },
                     case_name("(G, T, K)·(K, N)", t, batch));
    }
}

// The generic attention path's products: (H, T, Dh)·(H, Dh, S) through split_heads and a transpose,
// and (H, T, S)·(H, S, Dh) read through split_heads, written through concat_heads.
BOOST_AUTO_TEST_CASE(heads_products) {
  constexpr index heads = 4, d = 40, dh = d / heads;
  constexpr auto D = dim<"D", d>;
  constexpr auto H = head_dim<"H", heads>;
  const auto scores = attn::jit(matmul(split_heads(input<"q">(T, D), H), transpose(split_heads(input<"k">(S, D), H))));
  const auto mixed = attn::jit(concat_heads(combine(input<"p">(H, T, S), split_heads(input<"v">(S, D), H))));
  std::mt19937 rng(12);
  for (const auto& size : ts_sizes)
    for (index batch : batch_sizes) {
      const index t = size.first, s = size.second;  // not a structured binding: Clang 14's lambdas cannot capture one
      const tensor<float> q = random_tensor(with_batch(batch, {t, d}), rng);
      const tensor<float> k = random_tensor(with_batch(batch, {s, d}), rng);
      const tensor<float> p = random_tensor(with_batch(batch, {heads, t, s}), rng);
      const tensor<float> v = random_tensor(with_batch(batch, {s, d}), rng);
      expect_matches(scores(q, k), batch, {heads, t, s}, [&](index i, auto acc) {
        using Acc = decltype(acc);
        std::vector<mat<Acc>> parts;
        for (index h = 0; h < heads; ++h)
          parts.push_back(ref::matmul(ref::columns(item<Acc>(q, i, 2), h * dh, dh),
                                      ref::transpose(ref::columns(item<Acc>(k, i, 2), h * dh, dh))));
        return stack(parts);
      }, case_name("split_heads(q)·split_heads(k)ᵀ S=" + std::to_string(s), t, batch));
      expect_matches(mixed(p, v), batch, {t, d}, [&](index i, auto acc) {
        using Acc = decltype(acc);
        const mat<Acc> pi = item<Acc>(p, i, 3), vi = item<Acc>(v, i, 2);
        mat<Acc> r(t, d);
        for (index h = 0; h < heads; ++h) {
          const mat<Acc> o = ref::matmul(rows(pi, h * t, t), ref::columns(vi, h * dh, dh));
          for (index x = 0; x < t; ++x)
            for (index y = 0; y < dh; ++y) r(x, h * dh + y) = o(x, y);
        }
        return r;
      }, case_name("concat_heads(p·split_heads(v)) S=" + std::to_string(s), t, batch));
    }
}

// ------------------------------------------------------------------ vector operands

template <std::int64_t K, std::int64_t N>
void check_vectors(std::uint32_t seed) {
  constexpr auto Kd = dim<"K", K>;
  constexpr auto Nd = dim<"N", N>;
  const auto left = attn::jit(matmul(input<"u">(Kd), input<"b">(Kd, Nd)));   // (K)·(K, N) -> (N)
  const auto right = attn::jit(matmul(input<"a">(T, Kd), input<"u">(Kd)));   // (T, K)·(K) -> (T)
  std::mt19937 rng(seed);
  for (index batch : batch_sizes) {
    const tensor<float> u = random_tensor(with_batch(batch, {K}), rng);
    const tensor<float> b = random_tensor(with_batch(batch, {K, N}), rng);
    expect_matches(left(u, b), batch, {N}, [&](index i, auto acc) {
      using Acc = decltype(acc);
      return ref::matmul(item<Acc>(u, i, 1), item<Acc>(b, i, 2));
    }, case_name("(K)·(K, N) K=" + std::to_string(K) + " N=" + std::to_string(N), 1, batch));
    for (index t : row_sizes) {
      const tensor<float> a = random_tensor(with_batch(batch, {t, K}), rng);
      expect_matches(right(a, u), batch, {t}, [&](index i, auto acc) {
        using Acc = decltype(acc);
        return ref::matmul(item<Acc>(a, i, 2), ref::transpose(item<Acc>(u, i, 1)));
      }, case_name("(T, K)·(K) K=" + std::to_string(K), t, batch));
    }
  }
}

BOOST_AUTO_TEST_CASE(vector_operands) {
  check_vectors<3, 100>(13);
  check_vectors<512, 64>(14);
}

// ------------------------------------------------------------------ the schedule's parameters

namespace gen = attn::gen;

BOOST_AUTO_TEST_CASE(schedule_text_round_trip) {
  gen::matmul_schedule s;
  s.vector_width = 8;
  s.vectors = 3;
  s.rows = 4;
  s.k_block = 256;
  s.col_block = 128;
  s.parallel = false;
  BOOST_TEST(gen::matmul_schedule::parse(s.to_string()).to_string() == s.to_string());
  BOOST_TEST((gen::matmul_schedule::parse(s.to_string()) == s));
  BOOST_TEST((gen::matmul_schedule::parse(gen::matmul_schedule{}.to_string()) == gen::matmul_schedule{}));
  const gen::matmul_schedule partial = gen::matmul_schedule::parse("rows=6, vectors=1");
  BOOST_TEST(partial.rows == 6);
  BOOST_TEST(partial.vectors == 1);
  BOOST_TEST(partial.vector_width == gen::matmul_schedule{}.vector_width);
  BOOST_CHECK_THROW(gen::matmul_schedule::parse("rows=0"), std::invalid_argument);
  BOOST_CHECK_THROW(gen::matmul_schedule::parse("rows=six"), std::invalid_argument);
  BOOST_CHECK_THROW(gen::matmul_schedule::parse("tile=4"), std::invalid_argument);
  BOOST_CHECK_THROW(gen::matmul_schedule::parse("rows"), std::invalid_argument);
}

// Non-default parameters, as a tuner would try them, give the same products: a product with
// tails in every dim, lowered and scheduled here with each parameter set, run on Halide buffers.
BOOST_AUTO_TEST_CASE(schedule_parameters_keep_results) {
  constexpr index k = 100, n = 40;
  constexpr auto Kd = dim<"K", k>;
  constexpr auto Nd = dim<"N", n>;
  const attn::ir::graph g = to_ir(project(input<"x">(T, Kd), weight<"w">(Kd, Nd)));
  std::mt19937 rng(15);
  for (const char* text : {"vectors=1 rows=1", "vectors=3 rows=5 col_block=48", "rows=4 k_block=16", "k_block=64 parallel=0",
                           "vector_width=8 vectors=2 rows=6 col_block=16", "vector_width=4 vectors=4 rows=3 k_block=7",
                           "vector_width=4 vectors=4 rows=3 col_block=20"}) {
    gen::lowered l = gen::lower(g, {});
    BOOST_TEST_REQUIRE((l.stages.size() == 1 && l.stages[0].kind == gen::lowered::stage::product));
    Halide::Func out = gen::apply_matmul_schedule(l.stages[0], gen::matmul_schedule::parse(text));
    Halide::Callable run = out.compile_to_callable({l.params[0], l.params[1]}, Halide::get_host_target());
    for (index t : {index{1}, index{7}, index{33}}) {
      const tensor<float> x = random_tensor({t, k}, rng), w = random_tensor({k, n}, rng);
      tensor<float> y({t, n});
      Halide::Buffer<float> xb(const_cast<float*>(x.data()), int(k), int(t), 1), wb(const_cast<float*>(w.data()), int(n), int(k)),
          yb(y.data(), int(n), int(t), 1);
      BOOST_TEST_REQUIRE(run(xb, wb, yb) == 0);
      expect_matches(y, 0, {t, n}, [&](index, auto acc) {
        using Acc = decltype(acc);
        return ref::matmul(item<Acc>(x, 0, 2), item<Acc>(w, 0, 2));
      }, case_name(std::string("schedule ") + text, t, 0));
    }
  }
}

// The default tile fits the target's vector registers: accumulators, b vectors and a broadcast.
BOOST_AUTO_TEST_CASE(default_schedule_fits_registers) {
  const Halide::Target avx512("x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41");
  const Halide::Target avx2("x86-64-linux-avx-avx2-f16c-fma-sse41");
  for (auto [target, registers] : {std::pair{avx512, 32}, std::pair{avx2, 16}}) {
    const gen::matmul_schedule s = gen::default_matmul_schedule({}, target);
    BOOST_TEST(s.vector_width == target.natural_vector_size<float>());
    BOOST_TEST(s.vectors * s.rows + s.vectors + 1 <= registers);
    BOOST_TEST(s.vectors * s.rows >= registers / 2);  // and uses most of them
  }
  const gen::matmul_schedule narrow = gen::default_matmul_schedule({.rows = 1, .cols = 3, .depth = 8}, avx512);
  BOOST_TEST(narrow.vectors == 1);
  BOOST_TEST(narrow.rows == 1);
  BOOST_TEST(narrow.col_block == 0);
  // b (512, 512) is 1 MiB: 128 columns at a time (256 KiB); (512, 64) fits whole.
  BOOST_TEST(gen::default_matmul_schedule({.cols = 512, .depth = 512}, avx512).col_block == 128);
  BOOST_TEST(gen::default_matmul_schedule({.cols = 64, .depth = 512}, avx512).col_block == 0);
}

}  // namespace
