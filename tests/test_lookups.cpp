// Lookups and integer inputs, against the double reference: tensors read at indices computed from
// q_idx, kv_idx, head (document masking with int32 ids per token, a bias table per distance read
// at and past its edges, a bias per pair, T5's log buckets), fused and generic, batch 1 and 3.
#define BOOST_TEST_MODULE lookups
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include "dsl/dsl.hpp"
#include "runtime/jit.hpp"
#include "support/reference.hpp"

namespace {

using namespace attn::dsl;
namespace ref = attn::ref;
using attn::tensor;
using idx_t = ref::index;
using ref::mat;

constexpr auto T = dim<"T">;
constexpr auto Dk = dim<"Dk", 8>;
constexpr auto q = input<"q">(T, Dk);
constexpr auto k = input<"k">(T, Dk);
constexpr auto v = input<"v">(T, Dk);
constexpr auto s = scaled_scores(q, k);

const std::vector<idx_t> t_sizes = {1, 5, 13, 40};
const std::vector<idx_t> batches = {0, 3};  // 0: no batch dim

// What the reference needs of one batch item: the kept pairs and the score modifier.
using keep_fn = std::function<bool(idx_t b, idx_t i, idx_t j)>;
using mod_fn = std::function<double(idx_t b, double score, idx_t i, idx_t j)>;

// Runs `e` (fused and generic) over sizes and batches; make_extra(batch, t, rng) fills the extra
// tensors, call(kernel, q, k, v) runs the kernel with them.
template <class E, class MakeExtra, class Call>
void expect_reference(const E& e, const std::string& what, const keep_fn& keep, const mod_fn& mod, MakeExtra make_extra,
                      Call call) {
  for (attn::lowering path : {attn::lowering::automatic, attn::lowering::generic}) {
    const auto kern = attn::jit(e, {.path = path});
    std::mt19937 rng(5);
    for (idx_t t : t_sizes)
      for (idx_t batch : batches) {
        const tensor<float> tq = ref::random_tensor(ref::with_batch(batch, {t, 8}), rng);
        const tensor<float> tk = ref::random_tensor(ref::with_batch(batch, {t, 8}), rng);
        const tensor<float> tv = ref::random_tensor(ref::with_batch(batch, {t, 8}), rng);
        make_extra(batch, t, rng);
        const tensor<float> got = call(kern, tq, tk, tv);
        for (idx_t b = 0; b < std::max<idx_t>(batch, 1); ++b) {
          const auto reference = [&](auto acc) {
            using Acc = decltype(acc);
            const ref::mask_pred kp = [&](idx_t i, idx_t j, idx_t) { return keep(b, i, j); };
            const ref::score_mod<Acc> md = [&](Acc x, idx_t i, idx_t j, idx_t) { return static_cast<Acc>(mod(b, x, i, j)); };
            return ref::scaled_dot_product(ref::item<Acc>(tq, b, 2), ref::item<Acc>(tk, b, 2), ref::item<Acc>(tv, b, 2),
                                           ref::inv_sqrt(8), kp, md)
                .output;
          };
          const ref::comparison c = ref::compare(got.data() + b * t * 8, t * 8, reference(double{}), reference(float{}));
          BOOST_CHECK_MESSAGE(c.ok, what << " [" << kern.compiled().describe() << "] T=" << t << " B=" << batch
                                         << " item " << b << ": " << c.describe());
        }
      }
  }
}

const mod_fn no_mod = [](idx_t, double x, idx_t, idx_t) { return x; };
const keep_fn keep_all = [](idx_t, idx_t, idx_t) { return true; };

}  // namespace

BOOST_AUTO_TEST_CASE(document_masking_with_int32_ids_per_token) {
  constexpr auto doc = int_input<"doc">(T);
  constexpr auto same_doc = gather(doc, q_idx) == gather(doc, kv_idx);
  constexpr auto packed = combine(softmax(mask(s, kv_idx <= q_idx && same_doc)), v);
  tensor<std::int32_t> ids({1});
  const auto make_ids = [&](idx_t batch, idx_t t, std::mt19937& rng) {
    ids = tensor<std::int32_t>(ref::with_batch(batch, {t}));
    for (idx_t b = 0; b < std::max<idx_t>(batch, 1); ++b) {  // packed: ids rise along the sequence
      std::int32_t id = 0;
      for (idx_t i = 0; i < t; ++i) {
        if (rng() % 4 == 0) ++id;
        ids.data()[b * t + i] = id;
      }
    }
  };
  const auto id_at = [&](idx_t b, idx_t i) { return ids.data()[b * ids.sizes().back() + i]; };
  expect_reference(packed, "document masking, causal", [&](idx_t b, idx_t i, idx_t j) { return j <= i && id_at(b, i) == id_at(b, j); },
                   no_mod, make_ids, [&](const auto& kern, const auto& a, const auto& b, const auto& c) {
                     BOOST_TEST(kern.parameters() == (std::vector<std::string>{"q", "k", "v", "doc"}), boost::test_tools::per_element());
                     return kern({{"q", a}, {"k", b}, {"v", c}, {"doc", ids}});
                   });
}

BOOST_AUTO_TEST_CASE(bias_table_by_distance_is_clamped_at_its_edges) {
  // 9 entries for distances -4..4; farther keys read the first or last entry.
  constexpr auto R = dim<"R", 9>;
  constexpr auto table = weight<"rel">(R);
  constexpr auto biased = combine(softmax(modify(s, score + gather(table, kv_idx - q_idx + 4))), v);
  tensor<float> rel({9});
  const auto make_table = [&](idx_t, idx_t, std::mt19937& rng) { rel = ref::random_tensor({9}, rng, 2.0f); };
  expect_reference(biased, "bias table", keep_all,
                   [&](idx_t, double x, idx_t i, idx_t j) { return x + rel.data()[std::clamp<idx_t>(j - i + 4, 0, 8)]; },
                   make_table, [&](const auto& kern, const auto& a, const auto& b, const auto& c) { return kern(a, b, c, rel); });
}

BOOST_AUTO_TEST_CASE(bias_per_pair_graphormer) {
  constexpr auto pair_bias = input<"pb">(T, T);
  constexpr auto biased = combine(softmax(modify(s, score + gather(pair_bias, q_idx, kv_idx))), v);
  tensor<float> pb({1});
  const auto make_bias = [&](idx_t batch, idx_t t, std::mt19937& rng) { pb = ref::random_tensor(ref::with_batch(batch, {t, t}), rng); };
  expect_reference(biased, "pair bias", keep_all,
                   [&](idx_t b, double x, idx_t i, idx_t j) {
                     const idx_t t = pb.sizes().back();
                     return x + pb.data()[(b * t + i) * t + j];
                   },
                   make_bias, [&](const auto& kern, const auto& a, const auto& b, const auto& c) {
                     // First appearance puts pb before v: by name, the order does not matter.
                     BOOST_TEST(kern.parameters() == (std::vector<std::string>{"q", "k", "pb", "v"}), boost::test_tools::per_element());
                     return kern({{"q", a}, {"k", b}, {"v", c}, {"pb", pb}});
                   });
}

BOOST_AUTO_TEST_CASE(t5_buckets_with_a_learned_table) {
  // Bidirectional, 8 buckets (4 per direction, 2 exact), log-spaced up to distance 20.
  constexpr auto B = dim<"Buckets", 8>;
  constexpr auto table = weight<"t5">(B);
  constexpr auto biased = combine(softmax(modify(s, score + gather(table, t5_bucket<true>(8, 20)))), v);
  BOOST_TEST(to_string(biased).find("gather(t5, ") != std::string::npos);
  const auto bucket = [](idx_t i, idx_t j) {  // T5's _relative_position_bucket, in double
    const idx_t rel = j - i, per_side = 4, exact = 2;
    const idx_t offset = rel > 0 ? per_side : 0;
    const idx_t n = std::abs(rel);
    if (n < exact) return offset + n;
    const double large = exact + std::log(static_cast<double>(n) / exact) / std::log(20.0 / exact) * (per_side - exact);
    return offset + std::min<idx_t>(static_cast<idx_t>(large), per_side - 1);
  };
  tensor<float> t5({8});
  const auto make_table = [&](idx_t, idx_t, std::mt19937& rng) { t5 = ref::random_tensor({8}, rng, 2.0f); };
  expect_reference(biased, "T5 buckets", keep_all, [&](idx_t, double x, idx_t i, idx_t j) { return x + t5.data()[bucket(i, j)]; },
                   make_table, [&](const auto& kern, const auto& a, const auto& b, const auto& c) { return kern(a, b, c, t5); });
}

BOOST_AUTO_TEST_CASE(relative_position_terms_are_computed_once_per_offset) {
  // T5's bucket and its table entry read the pair only through kv - q: the kernels compute it once
  // per offset (offset_tables.hpp), here with as many or far fewer queries than keys and the
  // reverse, so that the offsets reach past either end; the reference computes it per pair.
  constexpr auto NQ = dim<"NQ">;
  constexpr auto NK = dim<"NK">;
  constexpr auto B = dim<"Buckets", 8>;
  const auto cross = scaled_scores(input<"q">(NQ, Dk), input<"k">(NK, Dk));
  const auto biased = combine(softmax(modify(cross, score + gather(weight<"t5">(B), t5_bucket<true>(8, 20)))), input<"v">(NK, Dk));
  const auto bucket = [](idx_t i, idx_t j) {  // as t5_buckets_with_a_learned_table's
    const idx_t rel = j - i, n = std::abs(rel);
    const idx_t offset = rel > 0 ? 4 : 0;
    if (n < 2) return offset + n;
    return offset + std::min<idx_t>(static_cast<idx_t>(2 + std::log(static_cast<double>(n) / 2) / std::log(10.0) * 2), 3);
  };
  std::mt19937 rng(11);
  const tensor<float> t5 = ref::random_tensor({8}, rng, 2.0f);
  for (attn::lowering path : {attn::lowering::automatic, attn::lowering::generic}) {
    const auto kern = attn::jit(biased, {.path = path});
    BOOST_TEST(kern.compiled().loop_nest().find("offset_table") != std::string::npos, kern.compiled().describe());
    for (auto [nq, nk] : {std::pair<idx_t, idx_t>{3, 300}, {300, 3}, {70, 70}}) {
      const tensor<float> tq = ref::random_tensor({nq, 8}, rng), tk = ref::random_tensor({nk, 8}, rng), tv = ref::random_tensor({nk, 8}, rng);
      const tensor<float> got = kern(tq, tk, tv, t5);
      const auto reference = [&](auto acc) {
        using Acc = decltype(acc);
        const ref::score_mod<Acc> mod = [&](Acc x, idx_t i, idx_t j, idx_t) { return x + static_cast<Acc>(t5.data()[bucket(i, j)]); };
        return ref::scaled_dot_product(ref::item<Acc>(tq, 0, 2), ref::item<Acc>(tk, 0, 2), ref::item<Acc>(tv, 0, 2), ref::inv_sqrt(8),
                                       [](idx_t, idx_t, idx_t) { return true; }, mod)
            .output;
      };
      const ref::comparison c = ref::compare(got.data(), nq * 8, reference(double{}), reference(float{}));
      BOOST_CHECK_MESSAGE(c.ok, kern.compiled().describe() << " NQ=" << nq << " NK=" << nk << ": " << c.describe());
    }
  }
  // A mask's predicate stays a formula (its bounds skip tiles), however costly: never tabulated.
  const auto near = combine(softmax(mask(cross, t5_bucket<true>(8, 20) < 6)), input<"v">(NK, Dk));
  BOOST_TEST(attn::jit(near).compiled().loop_nest().find("offset_table") == std::string::npos);
}
