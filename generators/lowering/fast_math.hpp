#pragma once
// Elementwise functions written so that they vectorise: Halide lowers some of them (tanh) to a
// scalar libm call per lane, 8× slower than a softcap's whole score tile should cost.
#include <map>
#include <string>
#include <Halide.h>

namespace attn::gen {

// use(v) with v a variable bound to `value` (a Let): `value` is computed once, and strict_float
// inside use() covers use's own arithmetic, not value's.
template <class Use>
Halide::Expr let_bound(const Halide::Expr& value, const Use& use, const std::string& name = Halide::Internal::unique_name('t')) {
  using namespace Halide::Internal;
  return Let::make(name, value, use(Variable::make(value.type(), name)));
}

// use(v) with v bound to `value` computed with Halide's fast-math flags even where strict() covers
// the expression around it: for arithmetic on operands finite by construction (a polynomial on a
// reduced argument), where contracting each multiply and add into one FMA is what makes it fast.
// Under fast math a NaN operand leaves the result undefined: the caller combines v with the same
// argument in its own (strict) arithmetic, which carries a NaN argument to the result.
// (Halide's strict_float makes every operation inside it strict, Let values included: a softcap's
// tanh inside a strict score was a chain of ~45 unfused operations per vector.)
inline const std::string fast_let_prefix = "attn_fast";
template <class Use>
Halide::Expr fast_bound(const Halide::Expr& value, const Use& use) {
  return let_bound(value, use, Halide::Internal::unique_name(fast_let_prefix));
}

// Halide::strict_float(e) but for fast_bound()'s values, which stay as they are.
inline Halide::Expr strict(const Halide::Expr& e) {
  using namespace Halide::Internal;
  // Each fast value is swapped for a placeholder while Halide makes the rest strict, then put back.
  struct hide_fast_values : IRMutator {
    using IRMutator::visit;
    std::map<std::string, Halide::Expr> values;
    Halide::Expr visit(const Let* op) override {
      if (op->name.rfind(fast_let_prefix, 0) != 0) return IRMutator::visit(op);
      const std::string placeholder = op->name + ".fast_value";
      values[placeholder] = op->value;
      return Let::make(op->name, Variable::make(op->value.type(), placeholder), mutate(op->body));
    }
  } hide;
  const Halide::Expr hidden = hide.mutate(e);
  return substitute(hide.values, Halide::strict_float(hidden));
}

// x = n·ln 2 + r with n = round(x_n / ln 2), and 2^n built in the exponent bits, for x_n in [-87.3, 0]
// (below, n + 127 < 0 and the bits are garbage, never a trap): x_n is x, or x clamped by a caller
// that needs 2^n = 0 below (n = -127 gives 0 bits, never a denormal). r comes from x itself, so a
// NaN x gives a NaN r. Passed to use() so that both parts share one rounding.
struct reduced_exponent {
  Halide::Expr r, two_to_n;
};
template <class Use>
Halide::Expr with_reduced_exponent(const Halide::Expr& x, const Halide::Expr& x_n, const Use& use) {
  using namespace Halide;
  // Adding 1.5·2^23 rounds x / ln 2 to an integer (to nearest) in the low bits of the sum, and the
  // + 127 biases it as the exponent field wants: shifted left by 23 those bits are 2^n, the magic's
  // own bits fall off the top. The sum is fast, an FMA (one rounding) even inside strict(); n is
  // taken back strictly, so no rewrite folds (y + magic) - magic into y.
  const float magic = 12582912.0f + 127.0f;
  return fast_bound(x_n * 1.44269504f + magic, [&](const Expr& shifted) {
    const Expr n = strict_float(shifted - magic);
    // ln 2 in two parts; bound, so that a fast_bound() polynomial of r reads this r, not its own copy.
    return let_bound((x - n * 0.693145751953125f) - n * 1.42860677e-6f, [&](const Expr& r) {
      return use(reduced_exponent{r, reinterpret<float>(reinterpret<uint32_t>(shifted) << 23)});
    });
  });
}

// (e^r - 1) / r for |r| <= ln 2 / 2: a degree-5 polynomial fitted for the relative error of e^r - 1
// (2.2·2^-24 at most) and of e^r = 1 + r·q (1.1·2^-24 with float rounding; Taylor's to r⁷ is 1.1,
// one FMA more).
inline Halide::Expr expm1_quotient(const Halide::Expr& r) {
  Halide::Expr q = 1.38888718e-3f;
  for (float c : {8.36906862e-3f, 4.16671373e-2f, 1.66665062e-1f, 4.99999970e-1f, 1.0f}) q = q * r + c;
  return q;
}

// e^x from x = n·ln 2 + r with n rounded from x_n (with_reduced_exponent); the polynomial fast
// (FMAs) even inside strict(), the rest as the caller's context says (r carries a NaN x there).
inline Halide::Expr exp_reduced(const Halide::Expr& x, const Halide::Expr& x_n) {
  return with_reduced_exponent(x, x_n, [](const reduced_exponent& e) {
    return fast_bound(expm1_quotient(e.r), [&](const Halide::Expr& q) { return (q * e.r + 1.0f) * e.two_to_n; });
  });
}

// e^x for x in [-87.3, 0]; below, unspecified (garbage, never a trap): for callers that replace
// those lanes anyway (a softmax's negligible weights), one clamp less. NaN for NaN.
inline Halide::Expr exp_nonpositive_unclamped(const Halide::Expr& x) {
  return let_bound(x, [](const Halide::Expr& v) { return exp_reduced(v, v); });
}

// e^x for finite x <= 0 (what the softmax needs: a score minus its row's maximum, clamped by the
// caller), NaN for NaN; exactly 0 below x ≈ -87.3 (n = -127 gives 0 bits, never a denormal: tiny
// weights would make P·V's products denormal, which x86 computes a hundred times slower). About
// 14 vector instructions; Halide's exp takes about 22 (it also covers x > 0 and underflow).
inline Halide::Expr exp_nonpositive(const Halide::Expr& x) {
  return let_bound(x, [](const Halide::Expr& v) { return exp_reduced(v, Halide::max(v, -88.0f)); });
}

// e^x - 1 for finite x <= 0, NaN for NaN, accurate near 0 (where e^x - 1 would cancel):
// (e^r - 1)·2^n + (2^n - 1), both terms exact or of one sign; -1 below x ≈ -87.3.
inline Halide::Expr expm1_nonpositive(const Halide::Expr& x) {
  return let_bound(x, [](const Halide::Expr& v) {
    return with_reduced_exponent(v, Halide::max(v, -88.0f), [](const reduced_exponent& e) {
      // The quotient fast (FMAs); the sum strict where the caller is: reassociated, it would cancel.
      return fast_bound(expm1_quotient(e.r), [&](const Halide::Expr& q) { return q * e.r * e.two_to_n + (e.two_to_n - 1.0f); });
    });
  });
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
    return strict(select(v < 0, -t, t));
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
