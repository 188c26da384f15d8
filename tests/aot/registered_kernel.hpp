#pragma once
// User-defined kernels for test_aot: ALiBi and a softcap on causal per-head attention, written
// as a researcher would, and causal attention over 16-bit keys and values; registered for the
// generator in registered_kernel.cpp.
#include "generators/aot/named_variants.hpp"

namespace aot_test {

using namespace attn::dsl;
using attn::named::H, attn::named::q, attn::named::k, attn::named::v;

inline constexpr auto causal_alibi_softcap = combine(softmax(causal(softcap(alibi(scaled_scores(q, k), H), 10.0f))), v);

// float32 queries against a bfloat16 key cache and float16 values, the output stored as bfloat16.
using attn::named::T, attn::named::Dh;
inline constexpr auto k16 = input<"k", bf16>(H, T, Dh);
inline constexpr auto v16 = input<"v", f16>(H, T, Dh);
inline constexpr auto causal_16_bit_cache = output_as<bf16>(combine(softmax(causal(scaled_scores(q, k16))), v16));

}  // namespace aot_test
