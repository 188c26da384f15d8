#pragma once
// Elementwise functions written so that they vectorise: Halide lowers some of them (tanh) to a
// scalar libm call per lane, 8× slower than a softcap's whole score tile should cost.
#include <Halide.h>

namespace attn::gen {

// use(v) with v a variable bound to `value` (a Let): `value` is computed once, and strict_float
// inside use() covers use's own arithmetic, not value's.
template <class Use>
Halide::Expr let_bound(const Halide::Expr& value, const Use& use) {
  using namespace Halide::Internal;
  const std::string name = unique_name('t');
  return Let::make(name, value, use(Variable::make(value.type(), name)));
}

// x = n·ln 2 + r for x <= 0: n = round(x / ln 2), r = x - n·ln 2 (two-part ln 2, so r is exact to
// float, |r| <= ln 2 / 2), 2^n built in the exponent bits. Below x ≈ -87.7 (n = -127) 2^n is exactly
// 0, never a denormal: tiny weights would make P·V's products denormal, which x86 computes a
// hundred times slower (ALiBi far from the diagonal).
struct reduced_exponent {
  Halide::Expr r, two_to_n;
};
inline reduced_exponent reduce_nonpositive(const Halide::Expr& x) {
  using namespace Halide;
  // Adding 1.5·2^23 rounds t to an integer (to nearest) in the low bits of the sum: n as a float
  // and as an integer in 2 instructions, no round or convert. Strict, so no rewrite folds it away.
  const float magic = 12582912.0f;
  const Expr shifted = strict_float(max(x, -88.0f) * 1.44269504f + magic);
  const Expr n = strict_float(shifted - magic);
  const Expr r = (x - n * 0.693145751953125f) - n * 1.42860677e-6f;
  // n in [-127, 0] (x is clamped above), so n + 127 fits the exponent field; -127 gives 0. Unsigned
  // arithmetic: for a NaN x the bits are garbage but defined, and r is NaN anyway.
  const Expr n_plus_bias = reinterpret<uint32_t>(shifted) - Expr(0x4B400000u - 127u);  // 0x4B400000: magic's bits
  return {r, reinterpret<float>(n_plus_bias << 23)};
}

// e^r - 1 for |r| <= ln 2 / 2 by its Taylor polynomial to r⁷ (relative error below 1e-8).
inline Halide::Expr taylor_expm1(const Halide::Expr& r) {
  Halide::Expr p = 1.0f / 5040;
  for (float c : {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f}) p = p * r + c;
  return p * r;
}

// e^x for finite x <= 0 (what the softmax needs: a score minus its row's maximum, clamped by the
// caller), NaN for NaN; exactly 0 below x ≈ -87.7. About 16 vector instructions; Halide's exp
// takes about 22 (it also covers x > 0 and underflow).
inline Halide::Expr exp_nonpositive(const Halide::Expr& x) {
  const reduced_exponent e = reduce_nonpositive(x);
  return (taylor_expm1(e.r) + 1.0f) * e.two_to_n;
}

// e^x - 1 for finite x <= 0, NaN for NaN, accurate near 0 (where e^x - 1 would cancel):
// (e^r - 1)·2^n + (2^n - 1), both terms exact or of one sign; -1 below x ≈ -87.7.
inline Halide::Expr expm1_nonpositive(const Halide::Expr& x) {
  const reduced_exponent e = reduce_nonpositive(x);
  return taylor_expm1(e.r) * e.two_to_n + (e.two_to_n - 1.0f);
}

// tanh(x) = -m / (2 + m) with m = e^{-2|x|} - 1, signed as x: float accuracy everywhere (no
// cancellation near 0), one exp and one division; ±1 from |x| = 20 on (tanh(20) is 1 in float).
// Strict (fast-math reassociation would cancel m's two terms near 0), x itself computed as its
// context says (bound outside the strict part).
inline Halide::Expr vector_tanh(const Halide::Expr& x) {
  using namespace Halide;
  return let_bound(x, [](const Expr& v) {
    const Expr a = abs(v);
    // A NaN passes the clamp (a select, not min) and gives NaN.
    const Expr m = expm1_nonpositive(-2.0f * select(a > 20.0f, 20.0f, a));
    const Expr t = -m / (2.0f + m);
    return strict_float(select(v < 0, -t, t));
  });
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
