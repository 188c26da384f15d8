#pragma once
// What a failed call must leave behind: a typed error whose message holds the phrases that name
// what is wrong, and outputs still holding the sentinel they were filled with (a failed check
// writes nothing). Used with Boost.Test:
//   tensor<float> out(sizes, ref::sentinel);
//   BOOST_CHECK_EXCEPTION(k.into(out.view(), ...), attn::shape_error, ref::message_has<attn::shape_error>({"'x'", "axis 0"}));
//   BOOST_CHECK(ref::untouched(out));
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "runtime/tensor.hpp"

namespace attn::ref {

// A value no kernel computes from the tests' inputs.
inline constexpr float sentinel = 4242.0f;

inline bool untouched(const tensor<float>& t) {
  return std::all_of(t.values().begin(), t.values().end(), [](float v) { return v == sentinel; });
}

// A predicate for BOOST_CHECK_EXCEPTION: the message contains every one of `parts` (each missing
// one is logged). Empty `parts`: the exception's type is the whole check.
template <class E>
auto message_has(std::vector<std::string> parts) {
  return [parts = std::move(parts)](const E& e) {
    const std::string m = e.what();
    bool ok = true;
    for (const auto& p : parts)
      if (m.find(p) == std::string::npos) {
        BOOST_TEST_MESSAGE("message '" << m << "' lacks '" << p << "'");
        ok = false;
      }
    if (ok) BOOST_TEST_MESSAGE("message: " << m);
    return ok;
  };
}

}  // namespace attn::ref
