#pragma once
// A user-defined kernel for test_aot: ALiBi and a softcap on causal per-head attention, written
// as a researcher would, and registered for the generator in registered_kernel.cpp.
#include "generators/aot/named_variants.hpp"

namespace aot_test {

using namespace attn::dsl;
using attn::named::H, attn::named::q, attn::named::k, attn::named::v;

inline constexpr auto causal_alibi_softcap = combine(softmax(causal(softcap(alibi(scaled_scores(q, k), H), 10.0f))), v);

}  // namespace aot_test
