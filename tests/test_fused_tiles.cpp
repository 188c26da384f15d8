// The fused pipeline from the inside (generators/, with Halide): which key tiles it computes, and
// how much memory it asks for. Timing-free evidence that masks skip work and that the Nq × Nk
// score matrix is never stored.
//   - Tiles: every per-tile score Func is traced; each production is one tile computed. The
//     counts must equal a brute-force classification of every (query tile, key tile) pair:
//     skipped (no kept key), full (every key kept: no predicate), partial (the rest), a partial
//     key tile split into smaller partial tiles of which those with a kept key are computed.
//   - Memory: Halide's allocations go through a counting allocator; at T = 16384, H = 8, Dh = 64
//     the peak must stay O(T·d), far below one H·T² buffer (8 GiB): key padding, a sliding window.
#define BOOST_TEST_MODULE fused_tiles
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>
#include <unistd.h>

#include <Halide.h>
#include "dsl/dsl.hpp"
#include "dsl/gradient.hpp"
#include "generators/lowering/fast_math.hpp"
#include "generators/fused/mask_bounds.hpp"
#include "generators/lowering/nonfinite.hpp"
#include "generators/pipeline.hpp"

namespace {

using namespace attn::dsl;
using idx_t = std::int64_t;  // (not `index`: <strings.h> has one)

constexpr auto T = dim<"T">;
constexpr auto H = head_dim<"H", 2>;
constexpr auto Dh = dim<"Dh", 16>;
constexpr auto q = input<"q">(H, T, Dh);
constexpr auto k = input<"k">(H, T, Dh);
constexpr auto v = input<"v">(H, T, Dh);
constexpr auto s = scaled_scores(q, k);

template <class S>
constexpr auto attention(const S& scores) { return combine(softmax(scores), v); }

// Calls a compiled pipeline; Halide's errors become test failures with their text.
int call(const Halide::Callable& c, Halide::JITUserContext* ctx, std::vector<halide_buffer_t*> b) {
  try {
    if (b.size() == 4) return c(ctx, b[0], b[1], b[2], b[3]);
    return c(ctx, b[0], b[1], b[2], b[3], b[4]);
  } catch (const Halide::Error& e) {
    BOOST_FAIL("Halide: " << e.what());
  }
  return -1;
}

// Counts productions (tiles computed) of the per-tile score Funcs, by name: a tile the mask
// skips may still be allocated, but it is never produced.
struct tile_counter : Halide::JITUserContext {
  std::mutex mutex;
  std::map<std::string, int> realized;
  tile_counter() {
    handlers.custom_trace = [](Halide::JITUserContext* ctx, const halide_trace_event_t* e) -> int32_t {
      auto* self = static_cast<tile_counter*>(ctx);
      if (e->event == halide_trace_produce) {
        std::lock_guard lock(self->mutex);
        ++self->realized[e->func];
      }
      return 0;
    };
  }
};

struct tiles_seen {
  int full = 0, partial = 0;
};

// Compiles the fused pipeline of `e` with the given tiles, traces its score tiles and runs it on
// (batch, H, t, Dh) inputs (and an int input after them, if any: lengths, document ids).
template <class E>
tiles_seen run_traced(const E& e, idx_t t, idx_t batch, int q_tile, int kv_tile, int partial_tile, Halide::Buffer<int> ints = {}) {
  const attn::ir::graph g = to_ir(e);
  attn::gen::lowering_options o;
  o.fused = true;
  o.tiles.q_tile = q_tile;
  o.tiles.kv_tile = kv_tile;
  o.tiles.partial_tile = partial_tile;
  o.tiles.vector = 16;
  const Halide::Target target = Halide::get_host_target();
  attn::gen::lowered l = attn::gen::lower_and_schedule(g, {}, o, target);
  BOOST_REQUIRE_EQUAL(l.flash.size(), 1u);
  l.flash[0].full.score.trace_realizations();
  l.flash[0].partial.score.trace_realizations();
  std::vector<Halide::Argument> args(l.params.begin(), l.params.end());
  Halide::Callable run = Halide::Pipeline(l.output).compile_to_callable(args, target);

  Halide::Buffer<float> bq(16, t, 2, batch), bk(16, t, 2, batch), bv(16, t, 2, batch), out(16, t, 2, batch);
  for (auto* b : {&bq, &bk, &bv}) b->fill(0.5f);
  tile_counter counter;
  int rc = 0;
  if (!ints.defined()) rc = call(run, &counter, {bq.raw_buffer(), bk.raw_buffer(), bv.raw_buffer(), out.raw_buffer()});
  else rc = call(run, &counter, {bq.raw_buffer(), bk.raw_buffer(), bv.raw_buffer(), ints.raw_buffer(), out.raw_buffer()});
  BOOST_REQUIRE_EQUAL(rc, 0);
  return {counter.realized[l.flash[0].full.score.name()], counter.realized[l.flash[0].partial.score.name()]};
}

// The brute-force classification: for every batch item, head, query tile and key tile. A query
// tile's key tiles start at its first kept key, rounded down to a vector of 16 (a window's band);
// at key 0 with banded = false.
tiles_seen expected_tiles(idx_t t, idx_t batch, int q_tile, int kv_tile, int partial_tile,
                          const std::function<bool(idx_t, idx_t, idx_t)>& keep, bool banded = true) {
  tiles_seen n;
  for (idx_t b = 0; b < batch; ++b)
    for (idx_t qt = 0; qt * q_tile < t; ++qt) {
      idx_t origin = banded ? t : 0;
      for (idx_t i = qt * q_tile; i < std::min(t, (qt + 1) * q_tile); ++i)
        for (idx_t j = 0; j < origin; ++j)
          if (keep(b, i, j)) origin = j;
      origin = origin == t ? 0 : origin / 16 * 16;
      // Keys [k0, k0 + size): does the query tile keep any of them, all of them?
      const auto kept = [&](idx_t k0, idx_t size) {
        bool any = false, all = true;
        for (idx_t i = qt * q_tile; i < std::min(t, (qt + 1) * q_tile); ++i)
          for (idx_t j = k0; j < k0 + size; ++j) {
            const bool kept = j < t && keep(b, i, j);
            any = any || kept;
            all = all && kept;
          }
        return std::pair{any, all};
      };
      for (idx_t k0 = origin; k0 < t; k0 += kv_tile) {
        if (kept(k0, kv_tile).second) {
          n.full += 2;  // both heads
          continue;
        }
        for (idx_t pt = k0; pt < std::min(t, k0 + kv_tile); pt += partial_tile)
          n.partial += kept(pt, partial_tile).first ? 2 : 0;
      }
    }
  return n;
}

template <class E>
void expect_tiles(const std::string& what, const E& e, idx_t t, idx_t batch, int q_tile, int kv_tile,
                  const std::function<bool(idx_t, idx_t, idx_t)>& keep, const Halide::Buffer<int>& ints = {}, int partial_tile = 0) {
  const tiles_seen got = run_traced(e, t, batch, q_tile, kv_tile, partial_tile > 0 ? partial_tile : kv_tile, ints);
  const tiles_seen want = expected_tiles(t, batch, q_tile, kv_tile, partial_tile > 0 ? partial_tile : kv_tile, keep);
  BOOST_TEST(got.full == want.full, what << " T=" << t << ": full tiles " << got.full << ", expected " << want.full);
  BOOST_TEST(got.partial == want.partial, what << " T=" << t << ": partial tiles " << got.partial << ", expected " << want.partial);
  const idx_t all = 2 * batch * ((t + q_tile - 1) / q_tile) * ((t + kv_tile - 1) / kv_tile);
  BOOST_TEST_MESSAGE(what << " T=" << t << ": " << got.full << " full + " << got.partial << " partial of " << all << " tiles");
}

}  // namespace

BOOST_AUTO_TEST_CASE(no_mask_computes_every_tile_without_predicate) {
  for (idx_t t : {64, 1000})
    expect_tiles("full", attention(s), t, 1, 32, 64, [](idx_t, idx_t, idx_t) { return true; });
}

BOOST_AUTO_TEST_CASE(causal_skips_the_upper_triangle) {
  for (idx_t t : {7, 64, 1000})
    expect_tiles("causal", attention(causal(s)), t, 1, 32, 64, [](idx_t, idx_t i, idx_t j) { return j <= i; });
  // Query and key tiles of different sizes, neither dividing the other.
  expect_tiles("causal", attention(causal(s)), 1000, 1, 48, 80, [](idx_t, idx_t i, idx_t j) { return j <= i; });
  // Partial tiles of 16 keys in key tiles of 64 / 80: only those left of the diagonal are computed.
  for (idx_t t : {7, 64, 1000})
    expect_tiles("causal, partial tiles of 16", attention(causal(s)), t, 1, 32, 64, [](idx_t, idx_t i, idx_t j) { return j <= i; }, {}, 16);
  expect_tiles("causal, partial tiles of 16", attention(causal(s)), 1000, 1, 48, 80, [](idx_t, idx_t i, idx_t j) { return j <= i; }, {}, 16);
}

BOOST_AUTO_TEST_CASE(softmax_free_attention_skips_the_same_tiles) {
  // Sigmoid attention, causal: the mask on the score's path is the tiles' `keep` as under softmax.
  for (idx_t t : {7, 1000})
    expect_tiles("sigmoid causal", combine(sigmoid(causal(s) - 3.0f), v), t, 1, 32, 64, [](idx_t, idx_t i, idx_t j) { return j <= i; });
  expect_tiles("ReLU sliding window 256", variants::relu_attention(sliding_window(s, 256), v), 2000, 1, 32, 64,
               [](idx_t, idx_t i, idx_t j) { return j <= i && i - j < 256; });
}

BOOST_AUTO_TEST_CASE(sliding_window_visits_a_band) {
  const auto window = [](idx_t, idx_t i, idx_t j) { return j <= i && i - j < 256; };
  expect_tiles("sliding window 256", attention(sliding_window(s, 256)), 2000, 1, 32, 64, window);
  expect_tiles("sliding window 256, partial tiles of 32", attention(sliding_window(s, 256)), 2000, 1, 32, 128, window, {}, 32);
  // Query tiles of 24 rows (the window's default), whose bands start between multiples of the key
  // tile: tiles from each band's start compute fewer keys than tiles from key 0 would.
  expect_tiles("sliding window 256, query tiles of 24", attention(sliding_window(s, 256)), 2000, 1, 24, 64, window, {}, 32);
  const tiles_seen banded = expected_tiles(2000, 1, 24, 64, 32, window);
  const tiles_seen from_key_0 = expected_tiles(2000, 1, 24, 64, 32, window, false);
  const auto keys = [](const tiles_seen& n) { return 64 * n.full + 32 * n.partial; };
  BOOST_TEST_MESSAGE("window, keys computed: " << keys(banded) << " from each band's start, " << keys(from_key_0) << " from key 0");
  BOOST_TEST(keys(banded) < keys(from_key_0));
}

// A mask keeping a bounded band of keys per query is recognised from its predicate (indices reach
// it as floats), and the default tiles shrink to the band; masks whose kept keys grow with the
// length are no band, and tiles given by the user are never changed.
BOOST_AUTO_TEST_CASE(banded_masks_get_smaller_default_tiles) {
  using attn::gen::kept_band;
  const Halide::Var qi("q"), kvi("kv");
  const auto f = [](const Halide::Expr& e) { return Halide::cast<float>(e); };
  BOOST_TEST(kept_band(kvi <= qi && f(qi - kvi) < 256.0f, qi, kvi) == 256);
  BOOST_TEST(kept_band(f(kvi) <= f(qi) + 3.0f && f(kvi) >= f(qi) - 3.0f, qi, kvi) == 7);
  BOOST_TEST(kept_band(kvi <= qi, qi, kvi) == 0);
  BOOST_TEST(kept_band(f(qi - kvi) < 255.5f && kvi <= qi, qi, kvi) == 0);  // a bound that is no integer: not read
  BOOST_TEST(kept_band(Halide::Internal::const_true(), qi, kvi) == 0);

  // An edge of the kept keys that moves with the query: causal, a window, prefix-LM; not key padding.
  using attn::gen::kept_edge_follows_query;
  const Halide::Var len("len");
  BOOST_TEST(kept_edge_follows_query(kvi <= qi, qi, kvi));
  BOOST_TEST(kept_edge_follows_query(f(kvi) <= f(qi) + 3.0f && f(kvi) >= f(qi) - 3.0f, qi, kvi));
  BOOST_TEST(kept_edge_follows_query(kvi <= qi || kvi < 16, qi, kvi));
  BOOST_TEST(!kept_edge_follows_query(kvi < len, qi, kvi));
  BOOST_TEST(!kept_edge_follows_query(Halide::Internal::const_true(), qi, kvi));

  const Halide::Target target = Halide::get_host_target();
  attn::gen::lowering_options o;
  o.fused = true;
  o.tiles = attn::gen::default_flash_schedule(4096, 4096, 16, 16);
  o.default_tiles = true;
  const attn::gen::lowered window = attn::gen::lower_and_schedule(to_ir(attention(sliding_window(s, 256))), {}, o, target);
  BOOST_TEST(window.tiles.kv_tile == 64);
  BOOST_TEST(window.tiles.partial_tile == 32);  // half a key tile at the band's edges
  BOOST_TEST(window.tiles.q_tile == 24);
  BOOST_TEST(window.tiles.backward_q_tile == 64);  // the backward's square tiles as the key tiles
  BOOST_TEST(window.flash.at(0).kv_tile == 64);
  const attn::gen::lowered causal_tiles = attn::gen::lower_and_schedule(to_ir(attention(causal(s))), {}, o, target);
  BOOST_TEST(causal_tiles.tiles.kv_tile == o.tiles.kv_tile);
  BOOST_TEST(causal_tiles.tiles.q_tile == 24);  // along_diagonal
  BOOST_TEST(attn::gen::lower_and_schedule(to_ir(attention(s)), {}, o, target).tiles.q_tile == o.tiles.q_tile);
  o.default_tiles = false;
  const attn::gen::lowered given = attn::gen::lower_and_schedule(to_ir(attention(sliding_window(s, 256))), {}, o, target);
  BOOST_TEST(given.tiles.kv_tile == o.tiles.kv_tile);
  // Parameters given as text replace the fitted default's; the others keep it.
  o.given_tiles = "partial_tile=16 q_unroll=4";
  const attn::gen::lowered some = attn::gen::lower_and_schedule(to_ir(attention(sliding_window(s, 256))), {}, o, target);
  BOOST_TEST(some.tiles.partial_tile == 16);
  BOOST_TEST(some.tiles.q_unroll == 4);
  BOOST_TEST(some.tiles.kv_tile == 64);
  BOOST_TEST(some.tiles.q_tile == 24);
  BOOST_TEST(some.flash.at(0).kv_tile == 64);
  o.given_tiles = "partial_tile=128";  // valid over the unfitted default's 256 keys, not over the window's 64
  BOOST_CHECK_EXCEPTION(attn::gen::lower_and_schedule(to_ir(attention(sliding_window(s, 256))), {}, o, target),
                        std::invalid_argument, [](const std::invalid_argument& e) {
                          return std::string(e.what()).find("over this kernel's default") != std::string::npos;
                        });
}

// The online softmax's exp (generators/lowering/fast_math.hpp), vectorised as in the kernels, against
// std::exp over [-87, 0]: within 6 float ulps (measured 5; Halide's own exp: 5.7, and it turns NaN
// into 0). NaN stays NaN; far below (ALiBi far from the diagonal) it is 0, never a denormal.
BOOST_AUTO_TEST_CASE(softmax_exp_is_float_accurate) {
  constexpr int n = 1 << 16;
  const std::vector<float> far = {-88.0f, -100.0f, -1e4f};
  Halide::Buffer<float> x(n + 1 + static_cast<int>(far.size()));
  for (int i = 0; i < n; ++i) x(i) = -87.0f * static_cast<float>(i) / (n - 1);
  x(n) = std::numeric_limits<float>::quiet_NaN();
  for (std::size_t j = 0; j < far.size(); ++j) x(n + 1 + static_cast<int>(j)) = far[j];
  Halide::Var i("i");
  Halide::Func e("e");
  e(i) = attn::gen::exp_nonpositive(x(i));
  e.vectorize(i, 16, Halide::TailStrategy::GuardWithIf);
  const Halide::Buffer<float> got = e.realize({x.width()});
  double worst = 0;
  for (int j = 0; j < n; ++j) {
    const double want = std::exp(static_cast<double>(x(j)));
    worst = std::max(worst, std::abs(got(j) - want) / want);
  }
  BOOST_TEST(worst < 6 * 5.96e-8, "worst relative error " << worst);
  BOOST_TEST(std::isnan(got(n)));
  for (std::size_t j = 0; j < far.size(); ++j) BOOST_TEST(got(n + 1 + static_cast<int>(j)) == 0.0f, "exp(" << far[j] << ")");
}

// The softmax's weight exp(s - max) (nonfinite.hpp): e^(s - max) down to
// smallest_weight_exponent, exactly 0 below (never a denormal, whatever the scores: ALiBi far
// from the diagonal made P·V 2x slower on an Intel Xeon), NaN for a NaN score.
BOOST_AUTO_TEST_CASE(softmax_weights_below_the_smallest_are_zero) {
  const float lowest = attn::gen::smallest_weight_exponent;
  const std::vector<float> xs = {0.0f, -1.0f, -30.0f, lowest + 0.01f, lowest, lowest - 0.01f, -70.0f, -87.5f, -100.0f, -1e30f,
                                 std::numeric_limits<float>::quiet_NaN()};
  Halide::Buffer<float> s(static_cast<int>(xs.size()));
  std::copy(xs.begin(), xs.end(), s.begin());
  Halide::Var i("i");
  Halide::Func w("w");
  w(i) = attn::gen::exp_below_max(s(i) + 3.0f, 3.0f);
  w.vectorize(i, 16, Halide::TailStrategy::GuardWithIf);
  const Halide::Buffer<float> got = w.realize({s.width()});
  for (int j = 0; j + 1 < s.width(); ++j) {
    const float x = xs[static_cast<std::size_t>(j)];
    if (x >= lowest) {
      const double want = std::exp(static_cast<double>(x));
      BOOST_TEST(std::abs(got(j) - want) <= 1e-6 * want, "exp(" << x << ") = " << got(j));
      BOOST_TEST(std::fpclassify(got(j)) == FP_NORMAL);
    } else {
      BOOST_TEST(got(j) == 0.0f, "exp(" << x << ") = " << got(j) << ", not 0");
    }
  }
  BOOST_TEST(std::isnan(got(s.width() - 1)));
}

// A score modifier's tanh (softcap; fast_math.hpp), vectorised, against std::tanh: within a few
// float ulps from tiny |x| (no cancellation near 0) to ±1, both as the fused kernel's scores
// compute it (strict) and fast; NaN stays NaN, ±inf gives ±1.
BOOST_AUTO_TEST_CASE(tanh_is_float_accurate) {
  std::vector<float> xs;
  for (int i = -200000; i <= 200000; ++i) xs.push_back(static_cast<float>(i) * 1.25e-4f);  // [-25, 25]
  for (float t = 1e-30f; t < 1.0f; t *= 1.01f) xs.insert(xs.end(), {t, -t});
  const std::vector<float> special = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                                      -std::numeric_limits<float>::infinity(), 0.0f, -0.0f};
  const int n = static_cast<int>(xs.size());
  xs.insert(xs.end(), special.begin(), special.end());
  Halide::Buffer<float> x(static_cast<int>(xs.size()));
  std::copy(xs.begin(), xs.end(), x.begin());
  for (const bool strict : {true, false}) {
    Halide::Var i("i");
    Halide::Func t("t");
    const Halide::Expr y = attn::gen::vector_tanh(x(i));
    t(i) = strict ? attn::gen::strict(y) : y;
    t.vectorize(i, 16, Halide::TailStrategy::GuardWithIf);
    const Halide::Buffer<float> got = t.realize({x.width()});
    double worst = 0;
    for (int j = 0; j < n; ++j) {
      const double want = std::tanh(static_cast<double>(x(j)));
      if (want != 0) worst = std::max(worst, std::abs(got(j) - want) / std::abs(want));
    }
    BOOST_TEST_MESSAGE((strict ? "strict" : "fast") << ": worst relative error " << worst);
    BOOST_TEST(worst < 4 * 5.96e-8, (strict ? "strict" : "fast") << ": worst relative error " << worst);
    BOOST_TEST(std::isnan(got(n)));
    BOOST_TEST(got(n + 1) == 1.0f);
    BOOST_TEST(got(n + 2) == -1.0f);
    BOOST_TEST(got(n + 3) == 0.0f);
    BOOST_TEST(got(n + 4) == 0.0f);
  }
}

// strict() (fast_math.hpp) makes an expression strict as Halide's strict_float does, but leaves
// fast_bound() values fast: a softcap's tanh polynomial keeps its FMAs inside the strict score,
// applied once or again around it (a score that holds a strict tanh).
BOOST_AUTO_TEST_CASE(strict_leaves_fast_bound_values_fast) {
  using namespace Halide::Internal;
  struct float_ops : IRVisitor {
    using IRVisitor::visit;
    int strict = 0, fast = 0;
    void visit(const Call* op) override {
      strict += op->is_strict_float_intrinsic();
      IRVisitor::visit(op);
    }
    void visit(const Add* op) override { fast += op->type.is_float(); IRVisitor::visit(op); }
    void visit(const Mul* op) override { fast += op->type.is_float(); IRVisitor::visit(op); }
  };
  auto count = [](const Halide::Expr& e) {
    float_ops ops;
    e.accept(&ops);
    return ops;
  };
  const Halide::Expr a = Variable::make(Halide::Float(32), "a"), b = Variable::make(Halide::Float(32), "b");
  const Halide::Expr fast = attn::gen::fast_bound(a * b + a, [&](const Halide::Expr& v) { return v * b + a; });
  for (const Halide::Expr& e : {attn::gen::strict(fast), attn::gen::strict(attn::gen::strict(fast) + b)}) {
    const Let* let = e.as<Let>();
    if (let == nullptr) let = e.as<Call>() ? e.as<Call>()->args[0].as<Let>() : nullptr;
    BOOST_REQUIRE(let != nullptr);
    BOOST_TEST(let->name.rfind(attn::gen::fast_let_prefix, 0) == 0u);
    BOOST_TEST(count(let->value).fast == 2);    // a * b + a, as written
    BOOST_TEST(count(let->value).strict == 0);
    BOOST_TEST(count(let->body).fast == 0);     // v * b + a, strict
    BOOST_TEST(count(let->body).strict >= 2);
  }
  // Halide's strict_float alone makes the value strict too: what strict() is for.
  const Halide::Expr all_strict = Halide::strict_float(fast);
  const Let* all = all_strict.as<Let>();
  BOOST_REQUIRE(all != nullptr);
  BOOST_TEST(count(all->value).fast == 0);
}

BOOST_AUTO_TEST_CASE(prefix_lm_and_key_padding) {
  expect_tiles("prefix-LM", attention(mask(s, kv_idx < 100 || kv_idx <= q_idx)), 1000, 1, 32, 64,
               [](idx_t, idx_t i, idx_t j) { return j < 100 || j <= i; });
}

BOOST_AUTO_TEST_CASE(document_masking_skips_the_upper_triangle) {
  // kv <= q && doc[q] == doc[kv]: the document ids are reads at q and kv, unbounded for the
  // analysis, so no tile is full; the causal part still skips the tiles above the diagonal.
  constexpr auto doc = int_input<"doc">(T);
  for (const idx_t t : {64, 1000}) {
    Halide::Buffer<int> ids(static_cast<int>(t), 1);  // one document
    ids.fill(0);
    const tiles_seen got = run_traced(attention(document_causal(s, doc)), t, 1, 32, 64, 64, ids);
    int causal = 0;
    for (idx_t q0 = 0; q0 < t; q0 += 32)
      for (idx_t k0 = 0; k0 < t; k0 += 64) causal += k0 <= std::min(t - 1, q0 + 31) ? 2 : 0;
    BOOST_TEST(got.full == 0, "T=" << t);
    BOOST_TEST(got.partial == causal, "T=" << t << ": partial tiles " << got.partial << ", expected " << causal);
  }
}

BOOST_AUTO_TEST_CASE(key_padding_guards_each_tile_with_the_length) {
  // The tiles of a length read from a tensor are not loop bounds Halide can trace: tracing a Func
  // makes Halide produce it unconditionally. The evidence is the lowered statement instead: the
  // per-tile score of each kind is produced only under a condition that reads the length.
  const attn::ir::graph g = to_ir(attention(key_padding(s, lengths<"len">)));
  attn::gen::lowering_options o;
  o.fused = true;
  const Halide::Target target = Halide::get_host_target();
  attn::gen::lowered l = attn::gen::lower_and_schedule(g, {}, o, target);
  const std::string path = (std::filesystem::temp_directory_path() / ("attn_key_padding_" + std::to_string(::getpid()) + ".stmt")).string();
  Halide::Pipeline(l.output).compile_to_lowered_stmt(path, std::vector<Halide::Argument>(l.params.begin(), l.params.end()),
                                                     Halide::StmtOutputFormat::Text, target);
  std::ifstream in(path);
  const std::string stmt((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(path);
  for (const attn::gen::flash_step* step : {&l.flash[0].full, &l.flash[0].partial}) {
    const std::string score = step->score.name();
    const std::string kind = step == &l.flash[0].full ? "full" : "partial";
    // "let <max>.used_1 = ... p_len ...", "let <score>.loaded_1 = <max>.used_1 || ...", then
    // "if (<score>.loaded_1) { produce <score>": the score tile is produced only where it is used.
    const auto used = stmt.find("let " + step->max.name() + ".used");
    BOOST_REQUIRE_MESSAGE(used != std::string::npos, kind << ": no use condition for " << step->max.name());
    const std::string line = stmt.substr(used, stmt.find('\n', used) - used);
    BOOST_TEST(line.find("p_len") != std::string::npos, line);
    const auto guard = stmt.find("if (" + score + ".loaded", used);
    BOOST_TEST(guard != std::string::npos);
    BOOST_TEST(guard < stmt.find("produce " + score, used));
  }
}

// ---------------------------------------------------------------- memory

namespace {

// Halide's heap allocations, counted: current and peak bytes.
struct memory_meter : Halide::JITUserContext {
  std::atomic<std::int64_t> now{0}, peak{0}, largest{0};
  memory_meter() {
    handlers.custom_malloc = [](Halide::JITUserContext* ctx, size_t bytes) -> void* {
      auto* self = static_cast<memory_meter*>(ctx);
      // Room for the size in front, and 64-byte alignment for Halide's vector loads.
      auto* base = static_cast<char*>(std::aligned_alloc(64, ((bytes + 64 + 63) / 64) * 64));
      if (base == nullptr) return nullptr;
      *reinterpret_cast<std::size_t*>(base) = bytes;
      const std::int64_t n = self->now += static_cast<std::int64_t>(bytes);
      for (std::int64_t p = self->peak; n > p && !self->peak.compare_exchange_weak(p, n);) {
      }
      const auto size = static_cast<std::int64_t>(bytes);
      for (std::int64_t l = self->largest; size > l && !self->largest.compare_exchange_weak(l, size);) {
      }
      return base + 64;
    };
    handlers.custom_free = [](Halide::JITUserContext* ctx, void* p) {
      if (p == nullptr) return;
      char* base = static_cast<char*>(p) - 64;
      static_cast<memory_meter*>(ctx)->now -= static_cast<std::int64_t>(*reinterpret_cast<std::size_t*>(base));
      std::free(base);
    };
  }
};

// The peak of Halide's allocations for one call at T = 16384, H = 8, Dh = 64 (inputs filled with
// 0.25, so that the output is 0.25 wherever a row keeps a key), and the padding of the copy of Kᵀ;
// `lengths`: pass a length of 300.
template <class E>
void check_extra_memory_is_linear_in_t(const E& e, bool lengths) {
  const attn::ir::graph g = to_ir(e);
  attn::gen::lowering_options o;
  o.fused = true;
  const Halide::Target target = Halide::get_host_target();
  attn::gen::lowered l = attn::gen::lower_and_schedule(g, {}, o, target);
  std::vector<Halide::Argument> args(l.params.begin(), l.params.end());
  Halide::Callable run = Halide::Pipeline(l.output).compile_to_callable(args, target);

  const int t = 16384;
  Halide::Buffer<float> bq(64, t, 8, 1), bk(64, t, 8, 1), bv(64, t, 8, 1), out(64, t, 8, 1);
  for (auto* b : {&bq, &bk, &bv}) b->fill(0.25f);
  Halide::Buffer<int> len(1);
  len(0) = 300;
  std::vector<halide_buffer_t*> buffers{bq.raw_buffer(), bk.raw_buffer(), bv.raw_buffer()};
  if (lengths) buffers.push_back(len.raw_buffer());
  buffers.push_back(out.raw_buffer());
  memory_meter meter;
  BOOST_REQUIRE_EQUAL(call(run, &meter, buffers), 0);
  const double one_input = 8.0 * t * 64 * 4, scores = 8.0 * t * t * 4;  // bytes
  BOOST_TEST_MESSAGE("peak Halide allocation " << meter.peak / 1048576.0 << " MiB; one input " << one_input / 1048576.0
                                               << " MiB; one H·T² buffer " << scores / 1048576.0 << " MiB");
  BOOST_TEST(meter.peak > 0);  // the meter sees the allocations (the transposed keys at least)
  BOOST_TEST(meter.peak <= 2 * one_input + 16.0 * 1048576);
  BOOST_TEST(meter.peak < scores / 100);
  // The largest allocation is the copy of Kᵀ the query tiles share: a row of keys per head and
  // column, padded to an odd number of cache lines (rows a power of two apart share an L1 set).
  const std::int64_t row = meter.largest / (8 * 64) / 4;  // floats
  BOOST_TEST_MESSAGE("largest Halide allocation " << meter.largest << " bytes: rows of " << row << " floats");
  BOOST_TEST(row >= t);
  BOOST_TEST(row < t + 64);
  BOOST_TEST(row % 16 == 0);
  BOOST_TEST((row / 16) % 2 == 1);
  BOOST_TEST(out(0, 0, 0, 0) == 0.25f);  // attention over equal values returns the value
  BOOST_TEST(out(63, t - 1, 7, 0) == 0.25f);
}

constexpr auto H8 = head_dim<"H", 8>;
constexpr auto D64 = dim<"Dh", 64>;
constexpr auto q16k = input<"q">(H8, T, D64);
constexpr auto k16k = input<"k">(H8, T, D64);
constexpr auto v16k = input<"v">(H8, T, D64);

}  // namespace

// Key padding to 300 keys: the pipeline (and its buffers) is the one of full attention over
// T keys; the lengths only keep the run short.
BOOST_AUTO_TEST_CASE(extra_memory_is_linear_in_t_at_t_16384) {
  check_extra_memory_is_linear_in_t(combine(softmax(key_padding(scaled_scores(q16k, k16k), lengths<"len">)), v16k), true);
}

// A sliding window: its key tiles start at each query tile's band (the copy of K the query tiles
// share is bounded by fused_lowering.cpp's key_of_tile promise, and padded).
BOOST_AUTO_TEST_CASE(a_sliding_window_s_extra_memory_is_linear_in_t_at_t_16384) {
  check_extra_memory_is_linear_in_t(combine(softmax(sliding_window(scaled_scores(q16k, k16k), 256)), v16k), false);
}

// Decoding (one query, keys known at the call): each key tile is transposed where the products
// read it, so no copy of K is made (a transposed copy shared by the query tiles pays off only when
// a head has many). Two query tiles' worth of queries do share one.
BOOST_AUTO_TEST_CASE(decoding_makes_no_copy_of_the_keys) {
  constexpr auto S = dim<"S">;
  const auto e = combine(softmax(scaled_scores(input<"q">(H8, T, D64), input<"k">(H8, S, D64))), input<"v">(H8, S, D64));
  attn::gen::lowering_options o;
  o.fused = true;
  const Halide::Target target = Halide::get_host_target();
  attn::gen::lowered l = attn::gen::lower_and_schedule(to_ir(e), {}, o, target);
  std::vector<Halide::Argument> args(l.params.begin(), l.params.end());
  Halide::Callable run = Halide::Pipeline(l.output).compile_to_callable(args, target);

  const int keys = 16384;
  const double one_input = 8.0 * keys * 64 * 4;  // bytes of K
  Halide::Buffer<float> bk(64, keys, 8, 1), bv(64, keys, 8, 1);
  bk.fill(0.25f);
  bv.fill(0.5f);
  for (const int queries : {1, 2 * l.tiles.q_tile + 1}) {
    Halide::Buffer<float> bq(64, queries, 8, 1), out(64, queries, 8, 1);
    bq.fill(0.25f);
    memory_meter meter;
    BOOST_REQUIRE_EQUAL(call(run, &meter, {bq.raw_buffer(), bk.raw_buffer(), bv.raw_buffer(), out.raw_buffer()}), 0);
    BOOST_TEST_MESSAGE(queries << " queries: peak Halide allocation " << meter.peak / 1048576.0 << " MiB; K " << one_input / 1048576.0 << " MiB");
    if (queries == 1) BOOST_TEST(meter.peak < one_input / 16);
    else BOOST_TEST(meter.peak >= one_input);  // the meter sees the shared copy
    BOOST_TEST(out(0, 0, 0, 0) == 0.5f);
    BOOST_TEST(out(63, queries - 1, 7, 0) == 0.5f);
  }
}

// ---------------------------------------------------------------- the fused backward

namespace {

// memory_meter's allocator, and parallel loops run one task at a time in order (a thread count
// of 1) when `serial`.
struct backward_context : memory_meter {
  explicit backward_context(bool serial) {
    if (!serial) return;
    handlers.custom_do_par_for = [](Halide::JITUserContext* ctx, int (*f)(Halide::JITUserContext*, int, uint8_t*), int min,
                                    int size, uint8_t* closure) -> int {
      for (int i = min; i < min + size; ++i)
        if (const int e = f(ctx, i, closure); e != 0) return e;
      return 0;
    };
  }
};

// Key-padded attention (T = 16384, H = 8, Dh = 64, keys cut to `length`): its fused forward with
// the log-sum-exp (output, lse), and the gradient pipeline with the fused backward (q, k, v, len,
// dy, output, lse -> dq, dk, dv).
struct padded_backward {
  Halide::Callable forward, run;
  padded_backward() try {
    const attn::ir::graph f = to_ir(combine(softmax(key_padding(scaled_scores(q16k, k16k), lengths<"len">)), v16k));
    const attn::ir::graph g = attn::ir::gradient(f);
    attn::gen::lowering_options o;
    o.fused = true;
    const Halide::Target target = Halide::get_host_target();
    attn::gen::lowered l = attn::gen::lower_and_schedule(g, {}, o, target);
    BOOST_REQUIRE_EQUAL(l.backward.size(), 1u);
    BOOST_REQUIRE(l.flash.empty());  // O and the lse are read, not recomputed
    std::vector<Halide::Func> outputs{l.output};
    outputs.insert(outputs.end(), l.more_outputs.begin(), l.more_outputs.end());
    run = Halide::Pipeline(outputs).compile_to_callable(std::vector<Halide::Argument>(l.params.begin(), l.params.end()), target);
    o.with_lse = true;
    attn::gen::lowered lf = attn::gen::lower_and_schedule(f, {}, o, target);
    forward = Halide::Pipeline({lf.output, lf.lse}).compile_to_callable(std::vector<Halide::Argument>(lf.params.begin(), lf.params.end()), target);
  } catch (const Halide::Error& e) {
    BOOST_FAIL("Halide: " << e.what());
  }
};

}  // namespace

// Forward and backward of one call, the T × T matrix never stored: extra memory O(T·d) (what the
// forward saves, its output and log-sum-exp, then the larger of the two kernels' own allocations:
// the passes' sums, copies of K and V transposed, each one input's size), under 256 MiB at
// T = 16384, H = 8, Dh = 64 (one H·T² buffer: 8 GiB). And the same bits with one thread as with
// the pool: each sum runs in a fixed order.
BOOST_AUTO_TEST_CASE(the_fused_backward_s_extra_memory_is_linear_in_t_and_its_bits_do_not_depend_on_threads) {
  const padded_backward k;
  const int t = 16384;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Halide::Buffer<float> bq(64, t, 8, 1), bk(64, t, 8, 1), bv(64, t, 8, 1), dy(64, t, 8, 1);
  for (auto* b : {&bq, &bk, &bv, &dy}) b->for_each_value([&](float& x) { x = u(rng); });
  Halide::Buffer<int> len(1);
  len(0) = 300;
  Halide::Buffer<float> out(64, t, 8, 1), lse(t, 8, 1);
  memory_meter forward;
  BOOST_REQUIRE_EQUAL(k.forward(static_cast<Halide::JITUserContext*>(&forward), bq.raw_buffer(), bk.raw_buffer(), bv.raw_buffer(),
                                len.raw_buffer(), out.raw_buffer(), lse.raw_buffer()),
                      0);
  const double saved = static_cast<double>(out.size_in_bytes() + lse.size_in_bytes());
  std::vector<Halide::Buffer<float>> grads[2];
  for (int serial : {0, 1}) {
    for (int i = 0; i < 3; ++i) grads[serial].emplace_back(64, t, 8, 1);
    backward_context ctx(serial == 1);
    int status = -1;
    try {
      status = k.run(static_cast<Halide::JITUserContext*>(&ctx), bq.raw_buffer(), bk.raw_buffer(), bv.raw_buffer(), len.raw_buffer(),
                     dy.raw_buffer(), out.raw_buffer(), lse.raw_buffer(), grads[serial][0].raw_buffer(), grads[serial][1].raw_buffer(),
                     grads[serial][2].raw_buffer());
    } catch (const Halide::Error& e) {
      BOOST_FAIL("Halide: " << e.what());
    }
    BOOST_REQUIRE_EQUAL(status, 0);
    const double extra = saved + std::max<double>(forward.peak, ctx.peak);
    BOOST_TEST_MESSAGE((serial ? "one thread" : "the pool")
                       << ": saved " << saved / 1048576.0 << " MiB, peak Halide allocation forward " << forward.peak / 1048576.0
                       << " MiB, backward " << ctx.peak / 1048576.0 << " MiB; extra " << extra / 1048576.0 << " MiB");
    BOOST_TEST(ctx.peak > 0);
    BOOST_TEST(extra < 256.0 * 1048576);
  }
  for (int i = 0; i < 3; ++i)
    BOOST_TEST(std::memcmp(grads[0][i].data(), grads[1][i].data(), grads[0][i].size_in_bytes()) == 0, "gradient " << i);
  // Keys past the length get exactly 0 in dk and dv; a query's gradient is not 0.
  BOOST_TEST(grads[0][1](5, 300, 3, 0) == 0.0f);
  BOOST_TEST(grads[0][2](5, t - 1, 7, 0) == 0.0f);
  BOOST_TEST(grads[0][0](5, t - 1, 7, 0) != 0.0f);
}
