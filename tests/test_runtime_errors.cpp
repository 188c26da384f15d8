// Every run-time check throws its typed exception, names what is wrong, and writes nothing:
// the output (and weights) buffers are filled with a sentinel before the failing call and must
// still hold it afterwards.
#define BOOST_TEST_MODULE runtime_errors
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "runtime/jit.hpp"
#include "support/error_checks.hpp"
#include "support/reference.hpp"

namespace {

using namespace attn::dsl;
namespace ref = attn::ref;
using attn::tensor;
using ref::index;
using ref::message_has;
using ref::sentinel;
using ref::untouched;

constexpr auto NQ = dim<"NQ">;
constexpr auto NX = dim<"NX">;
constexpr auto T = dim<"T">;
constexpr auto Dm = dim<"Dm", 8>;
constexpr auto Dv = dim<"Dv", 3>;

// softmax(key_padding(queries·keysᵀ/√8, lens))·values. Call order (inputs, then weights, then
// lengths): queries, keys, values, lens.
constexpr auto queries = input<"queries">(NQ, Dm);
constexpr auto keys = input<"keys">(NX, Dm);
constexpr auto values = input<"values">(NX, Dv);
constexpr auto padded = combine(softmax(key_padding(scaled_scores(queries, keys), lengths<"lens">)), values);

// A valid call: batch 2, N_Q = 4, N_X = 6; and an output filled with the sentinel.
struct fixture {
  attn::kernel<std::remove_cvref_t<decltype(padded)>> k = attn::jit(padded);
  std::mt19937 rng{7};
  tensor<float> q = ref::random_tensor({2, 4, 8}, rng);
  tensor<float> kk = ref::random_tensor({2, 6, 8}, rng);
  tensor<std::int32_t> lens = make_lens({6, 2});
  tensor<float> v = ref::random_tensor({2, 6, 3}, rng);
  tensor<float> out = tensor<float>({2, 4, 3}, sentinel);

  static tensor<std::int32_t> make_lens(std::initializer_list<std::int32_t> l) {
    tensor<std::int32_t> t({static_cast<index>(l.size())});
    std::copy(l.begin(), l.end(), t.data());
    return t;
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(runtime_checks, fixture)

BOOST_AUTO_TEST_CASE(valid_call_writes_the_output) {
  // The baseline the other cases perturb: it passes every check and writes every element.
  BOOST_REQUIRE(k.parameters() == (std::vector<std::string>{"queries", "keys", "values", "lens"}));
  k.into(out.view(), q, kk, v, lens);
  BOOST_CHECK(std::none_of(out.values().begin(), out.values().end(), [](float x) { return x == sentinel; }));
  BOOST_CHECK(ref::all_finite(out));
}

BOOST_AUTO_TEST_CASE(named_call_in_any_order_equals_the_positional_one) {
  const tensor<float> positional = k(q, kk, v, lens);
  const tensor<float> named = k({{"lens", lens}, {"values", v}, {"queries", q}, {"keys", kk}});
  BOOST_TEST(named.values() == positional.values(), boost::test_tools::per_element());
  k.into(out.view(), {{"values", v}, {"keys", kk}, {"lens", lens}, {"queries", q}});
  BOOST_TEST(out.values() == positional.values(), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(named_call_mistakes_name_the_tensor) {
  using named = std::initializer_list<attn::named_tensor>;
  const named no_lens = {{"queries", q}, {"keys", kk}, {"values", v}};
  const named misspelt = {{"queries", q}, {"key", kk}, {"values", v}, {"lens", lens}};
  const named twice = {{"queries", q}, {"keys", kk}, {"keys", kk}, {"values", v}, {"lens", lens}};
  const named swapped = {{"queries", kk}, {"keys", q}, {"values", v}, {"lens", lens}};
  BOOST_CHECK_EXCEPTION(k.into(out.view(), no_lens), attn::argument_error, message_has<attn::argument_error>({"missing", "lens"}));
  BOOST_CHECK_EXCEPTION(k.into(out.view(), misspelt), attn::argument_error,
                        message_has<attn::argument_error>({"'key'", "queries, keys, values, lens"}));
  BOOST_CHECK_EXCEPTION(k.into(out.view(), twice), attn::argument_error, message_has<attn::argument_error>({"'keys'", "twice"}));
  BOOST_CHECK_EXCEPTION(k.into(out.view(), named{}), attn::argument_error,
                        message_has<attn::argument_error>({"missing", "queries, keys, values, lens"}));
  // A tensor under the wrong name still meets the shape checks.
  BOOST_CHECK_EXCEPTION(k.into(out.view(), swapped), attn::shape_error, message_has<attn::shape_error>({}));
  BOOST_CHECK(untouched(out));
}

BOOST_AUTO_TEST_CASE(wrong_rank) {
  const tensor<float> flat({2 * 6 * 8});  // rank 1: neither (NX, Dm) nor (batch, NX, Dm)
  BOOST_CHECK_EXCEPTION(k.into(out.view(), q, flat, v, lens), attn::shape_error,
                        message_has<attn::shape_error>({"keys", "rank"}));
  BOOST_CHECK(untouched(out));
  const tensor<float> rank4({1, 2, 6, 8});
  BOOST_CHECK_EXCEPTION(k.into(out.view(), q, rank4, v, lens), attn::shape_error,
                        message_has<attn::shape_error>({"keys", "rank"}));
  BOOST_CHECK(untouched(out));
  const tensor<std::int32_t> lens2d({2, 1});  // lengths are one number per batch item
  BOOST_CHECK_EXCEPTION(k.into(out.view(), q, kk, v, lens2d), attn::shape_error,
                        message_has<attn::shape_error>({"lens"}));
  BOOST_CHECK(untouched(out));
}

BOOST_AUTO_TEST_CASE(wrong_static_size) {
  const tensor<float> narrow({2, 6, 7});  // Dm is 8
  BOOST_CHECK_EXCEPTION(k.into(out.view(), q, narrow, v, lens), attn::shape_error,
                        message_has<attn::shape_error>({"keys", "Dm", "8", "7"}));
  BOOST_CHECK(untouched(out));
  const tensor<float> wide_values({2, 6, 5});  // Dv is 3
  BOOST_CHECK_EXCEPTION(k.into(out.view(), q, kk, wide_values, lens), attn::shape_error,
                        message_has<attn::shape_error>({"values", "Dv", "3", "5"}));
  BOOST_CHECK(untouched(out));
  // Also through run(), which allocates its own output: it must throw the same way.
  BOOST_CHECK_THROW(k.run(q, narrow, v, lens), attn::shape_error);
}

BOOST_AUTO_TEST_CASE(tensors_disagree_on_a_run_time_dim) {
  const tensor<float> short_values({2, 5, 3});  // keys have N_X = 6
  BOOST_CHECK_EXCEPTION(k.into(out.view(), q, kk, short_values, lens), attn::shape_error,
                        message_has<attn::shape_error>({"values", "keys", "NX", "6", "5"}));
  BOOST_CHECK(untouched(out));
}

BOOST_AUTO_TEST_CASE(wrong_dtype) {
  const tensor<std::int32_t> int_keys({2, 6, 8});
  BOOST_CHECK_EXCEPTION(k.into(out.view(), q, int_keys, v, lens), attn::dtype_error,
                        message_has<attn::dtype_error>({"keys", "float32", "int32"}));
  BOOST_CHECK(untouched(out));
  const tensor<float> float_lens({2});
  BOOST_CHECK_EXCEPTION(k.into(out.view(), q, kk, v, float_lens), attn::dtype_error,
                        message_has<attn::dtype_error>({"lens", "int32", "float32"}));
  BOOST_CHECK(untouched(out));
}

BOOST_AUTO_TEST_CASE(wrong_output_shape) {
  tensor<float> wide({2, 4, 4}, sentinel);
  BOOST_CHECK_EXCEPTION(k.into(wide.view(), q, kk, v, lens), attn::shape_error,
                        message_has<attn::shape_error>({"output", "(2, 4, 3)", "(2, 4, 4)"}));
  BOOST_CHECK(untouched(wide));
  tensor<float> no_batch({4, 3}, sentinel);  // the call has a batch of 2
  BOOST_CHECK_THROW(k.into(no_batch.view(), q, kk, v, lens), attn::shape_error);
  BOOST_CHECK(untouched(no_batch));
  tensor<float> long_rows({2, 5, 3}, sentinel);
  BOOST_CHECK_THROW(k.into(long_rows.view(), q, kk, v, lens), attn::shape_error);
  BOOST_CHECK(untouched(long_rows));
  tensor<std::int32_t> int_out({2, 4, 3});
  BOOST_CHECK_THROW(k.into(int_out.view(), q, kk, v, lens), attn::dtype_error);
}

BOOST_AUTO_TEST_CASE(batch_disagreement) {
  const tensor<float> three_keys({3, 6, 8});
  BOOST_CHECK_EXCEPTION(k.into(out.view(), q, three_keys, v, lens), attn::shape_error,
                        message_has<attn::shape_error>({"keys", "queries", "3", "2"}));
  BOOST_CHECK(untouched(out));
  const tensor<std::int32_t> three_lens = make_lens({6, 6, 6});
  BOOST_CHECK_EXCEPTION(k.into(out.view(), q, kk, v, three_lens), attn::shape_error,
                        message_has<attn::shape_error>({"lens", "3", "2"}));
  BOOST_CHECK(untouched(out));
}

BOOST_AUTO_TEST_CASE(null_data_pointer) {
  const float* none = nullptr;
  BOOST_CHECK_EXCEPTION(k.into(out.view(), attn::view(none, {2, 4, 8}), kk, v, lens), attn::argument_error,
                        message_has<attn::argument_error>({"queries"}));
  BOOST_CHECK(untouched(out));
  float* no_output = nullptr;
  BOOST_CHECK_THROW(k.into(attn::view(no_output, {2, 4, 3}), q, kk, v, lens), attn::argument_error);
}

BOOST_AUTO_TEST_CASE(weights_buffer_checked_too) {
  const auto kw = attn::jit(padded, {.with_weights = true});
  tensor<float> weights({2, 4, 6}, sentinel);
  tensor<float> bad_weights({2, 4, 5}, sentinel);
  BOOST_CHECK_EXCEPTION(kw.into_with_weights(out.view(), bad_weights.view(), q, kk, v, lens), attn::shape_error,
                        message_has<attn::shape_error>({"weights", "(2, 4, 6)", "(2, 4, 5)"}));
  BOOST_CHECK(untouched(out));
  BOOST_CHECK(untouched(bad_weights));
  // A bad input with good output buffers: neither output nor weights written.
  const tensor<float> narrow({2, 6, 7});
  BOOST_CHECK_THROW(kw.into_with_weights(out.view(), weights.view(), q, narrow, v, lens), attn::shape_error);
  BOOST_CHECK(untouched(out));
  BOOST_CHECK(untouched(weights));
  // Asking a kernel compiled without weights for them is an argument error.
  BOOST_CHECK_THROW(k.into_with_weights(out.view(), weights.view(), q, kk, v, lens), attn::argument_error);
  BOOST_CHECK(untouched(out));
  BOOST_CHECK(untouched(weights));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(bound_dim_rejects_other_sizes) {
  // Self-attention without projections over x (T, 8), compiled with T bound to 4.
  constexpr auto xs = input<"x">(T, Dm);
  const auto k = attn::jit(variants::simplified(xs, xs), {.bind = {T = 4}});
  BOOST_REQUIRE(k.parameters() == (std::vector<std::string>{"x"}));
  std::mt19937 rng(8);
  const tensor<float> x4 = ref::random_tensor({4, 8}, rng);
  const tensor<float> y = k(x4);  // the bound size works and is right
  BOOST_REQUIRE(y.sizes() == (std::vector<ref::index>{4, 8}));
  const ref::comparison c = ref::compare_simplified_self(y, x4);
  BOOST_CHECK_MESSAGE(c.ok, c.describe());

  const tensor<float> x5 = ref::random_tensor({5, 8}, rng);
  tensor<float> out({5, 8}, sentinel);
  BOOST_CHECK_EXCEPTION(k.into(out.view(), x5), attn::shape_error, message_has<attn::shape_error>({"x", "T", "4", "5"}));
  BOOST_CHECK(untouched(out));
  BOOST_CHECK_THROW(k(x5), attn::shape_error);
}

BOOST_AUTO_TEST_CASE(unknown_target_is_a_compile_error) {
  BOOST_CHECK_THROW(attn::jit(padded, {.target = "no-such-target"}), attn::compile_error);
}
