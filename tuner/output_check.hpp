#pragma once
// Is a candidate schedule's output right? It is compared, element by element, with the default
// schedule's output on the same inputs (the default is the one the test suite checks against an
// independent double-precision reference).
//
// Tolerance: both are float computations of the same sums in another order (other key tiles,
// other online-softmax rescalings), so they differ by rounding: about √n·ε·max|v| for n keys,
// 4e-6 at n = 4096, ε = 6e-8 — the default's own error against the double reference is of the same
// order (tests/support/reference.hpp's rule allows twice a naive float implementation's). The tolerance,
// 3e-5·max(1, max|reference|), leaves an 8× margin over that while still catching one key of
// 4096 dropped or counted twice (which moves an output by ~1/4096 = 2.4e-4 of the values' range).
// NaN must be NaN at the same places (the kernels' non-finite rules are part of the result).
// An output stored in a 16-bit type may round the two sums to neighbours: its spacing at
// max|reference| (2^-7 of it for bfloat16, 2^-10 for float16) is added to the tolerance.
#include <span>
#include <string>
#include "runtime/tensor.hpp"

namespace attn::tune {

struct check_result {
  bool ok = true;
  double max_error = 0, tolerance = 0;
  std::size_t worst = 0;  // index of the worst element
  std::string describe() const;
};

check_result check_output(std::span<const float> reference, std::span<const float> candidate, dtype stored = dtype::f32);

}  // namespace attn::tune
