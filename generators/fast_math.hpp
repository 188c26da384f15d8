#pragma once
// Elementwise functions written so that they vectorise: Halide lowers some of them (tanh) to a
// scalar libm call per lane, 8× slower than a softcap's whole score tile should cost.
#include <Halide.h>

namespace attn::gen {

// tanh through exp, with float accuracy everywhere: a Taylor polynomial near 0 (where
// 1 - 2/(e^{2x} + 1) would cancel), the exp form elsewhere, ±1 far out.
inline Halide::Expr vector_tanh(const Halide::Expr& x) {
  using namespace Halide;
  const Expr a = abs(x);
  const Expr x2 = x * x;
  // x - x³/3 + 2x⁵/15 - 17x⁷/315 + 62x⁹/2835: error below 1e-9 for |x| < 0.25.
  const Expr near = x * (1.0f + x2 * (-1.0f / 3 + x2 * (2.0f / 15 + x2 * (-17.0f / 315 + x2 * (62.0f / 2835)))));
  const Expr e = exp(-2.0f * min(a, 20.0f));  // tanh(20) is 1 in float
  const Expr far = (1.0f - e) / (1.0f + e);
  return select(a < 0.25f, near, select(x < 0, -far, far));
}

// e^x for finite x <= 0 (what the softmax needs: a score minus its row's maximum, clamped by the
// caller), NaN for NaN:
// n = round(x / ln 2), r = x - n·ln 2 (two-part ln 2, so r is exact to float), e^r by its Taylor
// polynomial to r⁷ (|r| <= ln 2 / 2: relative error below 1e-8), 2^n built in the exponent bits.
// Below x ≈ -87.7 (n = -127) the result is exactly 0, never a denormal: tiny weights would make
// P·V's products denormal, which x86 computes a hundred times slower (ALiBi far from the diagonal).
// About 16 vector instructions; Halide's exp takes about 22 (it also covers x > 0 and underflow).
inline Halide::Expr exp_nonpositive(const Halide::Expr& x) {
  using namespace Halide;
  // Adding 1.5·2^23 rounds t to an integer (to nearest) in the low bits of the sum: n as a float
  // and as an integer in 2 instructions, no round or convert. Strict, so no rewrite folds it away.
  const float magic = 12582912.0f;
  const Expr shifted = strict_float(max(x, -88.0f) * 1.44269504f + magic);
  const Expr n = strict_float(shifted - magic);
  const Expr r = (x - n * 0.693145751953125f) - n * 1.42860677e-6f;
  Expr p = 1.0f / 5040;
  for (float c : {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f}) p = p * r + c;
  // n in [-127, 0] (x is clamped above), so n + 127 fits the exponent field; -127 gives 0. Unsigned
  // arithmetic: for a NaN x the bits are garbage but defined, and p is NaN anyway.
  const Expr n_plus_bias = reinterpret<uint32_t>(shifted) - Expr(0x4B400000u - 127u);  // 0x4B400000: magic's bits
  return p * reinterpret<float>(n_plus_bias << 23);
}

// 1 / (1 + e^-x) without overflow: e = e^-|x| <= 1, then 1 / (1 + e) for x >= 0 and e / (1 + e)
// below (-inf gives 0, +inf 1, NaN NaN). Vectorises (exp_nonpositive); relative error ~1e-7.
inline Halide::Expr sigmoid(const Halide::Expr& x) {
  using namespace Halide;
  const Expr below = -abs(x);  // clamped where exp_nonpositive is exact (it needs x finite), NaN kept
  const Expr e = exp_nonpositive(strict_float(select(below < -100.0f, -100.0f, below)));
  return select(x >= 0, 1.0f / (1.0f + e), e / (1.0f + e));
}

// max(x, 0) that keeps NaN (a fast-math max may drop it): NaN stays NaN, -inf gives 0.
inline Halide::Expr relu(const Halide::Expr& x) {
  using namespace Halide;
  return strict_float(select(x < 0.0f, 0.0f, x));
}

}  // namespace attn::gen
