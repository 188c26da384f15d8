#pragma once
// The rules for non-finite scores, shared by the generic and the fused softmax, and the few
// expressions that keep them under Halide's fast-math flags (which assume no inf and no NaN):
//   a score of -inf (a mask, or a modifier's minus_infinity) has weight 0; a row with no
//   finite score gives weights 0 and output 0; a NaN or +inf score among a row's kept keys
//   makes that row NaN. Comparisons that may see inf or NaN are strict_float.
#include <cstdint>
#include <limits>
#include <Halide.h>
#include "generators/lowering/fast_math.hpp"

namespace attn::gen {

// The masked score, as the lowering writes it.
inline Halide::Expr minus_infinity() {
  return Halide::Internal::make_const(Halide::Float(32), -std::numeric_limits<double>::infinity());
}

// "No kept key" in running maxima: finite, so no inf arithmetic is needed.
inline Halide::Expr no_score() { return Halide::Expr(std::numeric_limits<float>::lowest()); }

// Is this score kept (not -inf)? NaN and +inf count as kept, so they reach the row.
inline Halide::Expr is_kept_score(const Halide::Expr& s) { return Halide::strict_float(s != minus_infinity()); }

// use(s) for the score computed once, strictly: a -inf from a modifier (score + minus_infinity)
// must reach is_kept_score, and under fast math (no infinities) the compiler may assume it never
// occurs. Strict inside a comparison only, the score would be computed twice: strictly for the
// comparison, fast for its value (a softcap's tanh twice: 1.13x slower).
template <class Use>
Halide::Expr with_strict_score(const Halide::Expr& score, const Use& use) {
  return let_bound(strict(score), use);
}

// Weight w times value x, where a weight of exactly 0 (a masked key) never touches x, so a NaN or
// inf there has no influence; a NaN weight still gives NaN.
inline Halide::Expr weighted(const Halide::Expr& w, const Halide::Expr& x) {
  return Halide::select(Halide::strict_float(w == 0.0f), 0.0f, w * x);
}

// acc + w·x, where a weight of exactly 0 never touches x (weighted()'s rule as an update): x is
// replaced by 0 there. Where x is known finite (`finite` true, a specialisation) no guard is
// needed, 0·x being 0: a plain FMA, with the same rounding as the guarded one (the same form).
inline Halide::Expr accumulate_weighted(const Halide::Expr& acc, const Halide::Expr& w, const Halide::Expr& x,
                                        const Halide::Expr& finite) {
  return acc + w * Halide::select(finite || Halide::strict_float(w != 0.0f), x, 0.0f);
}

// A float's exponent field (its bits & exponent_of_nonfinite): all ones for NaN and ±inf only.
// Integer arithmetic, so no fast-math rewrite can assume the value finite.
constexpr std::uint32_t exponent_of_nonfinite = 0x7f800000u;
inline Halide::Expr exponent_field(const Halide::Expr& x) {
  return Halide::reinterpret<std::uint32_t>(x) & exponent_of_nonfinite;
}

// A mask's predicate, evaluated without fast-math rewrites: index arithmetic in floats (q_idx / 6,
// a reciprocal fused into a subtraction) must keep the same keys in every lowering and schedule.
// Wholly strict, fast_bound() values included: an FMA formed in one lowering and not in another
// would round differently there.
inline Halide::Expr exact_predicate(const Halide::Expr& keep) { return Halide::strict_float(keep); }

// The score where kept, no_score() where not (a row's running maximum ignores masked keys).
inline Halide::Expr kept_or_no_score(const Halide::Expr& score) {
  return with_strict_score(score, [](const Halide::Expr& s) { return Halide::select(is_kept_score(s), s, no_score()); });
}

// Is s the "no kept key" marker? Strict, so a NaN score is never taken for it.
inline Halide::Expr is_no_score(const Halide::Expr& s) { return Halide::strict_float(s == no_score()); }

// Weights below e^-64 (1.6e-28) of the largest are exactly 0: float sums cannot see them (their
// share of a row is below 1e-25 at a million keys), and kept they made P·V slow, not wrong: a tiny
// weight times a value is a denormal where the accumulator is still near 0 (a tile's first keys),
// and x86 computes denormals about a hundred times slower (ALiBi + causal at T = 2048 was 1.33x
// slower than causal on an Intel Xeon; 1.0x with denormals flushed).
constexpr float smallest_weight_exponent = -64.0f;

// exp(s - max) for s <= max, 0 where s - max < smallest_weight_exponent (so also for a masked
// score, -inf or no_score, below a finite max); NaN when s - max is NaN (a NaN score, or +inf - +inf): added as x - x,
// which is 0 for every finite x, so no fast-math rewrite of the exp can lose it.
inline Halide::Expr exp_below_max(const Halide::Expr& s, const Halide::Expr& max) {
  // s - max strictly: it is -inf or NaN for masked or non-finite scores, which fast math assumes away.
  return let_bound(Halide::strict_float(s - max), [](const Halide::Expr& x) {
    const Halide::Expr negligible = Halide::strict_float(x < smallest_weight_exponent);
    // Unclamped: the lanes the clamp would matter for (x < -87.3) are negligible, replaced by 0.
    const Halide::Expr e = exp_nonpositive_unclamped(x) + Halide::strict_float(x - x);
    return Halide::select(negligible, 0.0f, e);
  });
}

// e^(score - max) for a kept score, 0 for a masked one (-inf): a softmax's numerator.
inline Halide::Expr kept_exp(const Halide::Expr& score, const Halide::Expr& max) {
  return with_strict_score(score, [&](const Halide::Expr& s) {
    return Halide::select(is_kept_score(s), exp_below_max(s, max), 0.0f);
  });
}

// numerator / sum, 0 when the sum is 0 (no kept key), NaN when the sum is NaN.
inline Halide::Expr normalise(const Halide::Expr& numerator, const Halide::Expr& sum) {
  return Halide::strict_float(Halide::select(sum == 0.0f, 0.0f, numerator / sum));
}

// The log-sum-exp of a row from its running max and its sum of exp(score - max): max + log(sum);
// -inf when the sum is 0 (no kept key: every key masked), NaN when the sum is NaN.
inline Halide::Expr log_sum_exp(const Halide::Expr& max, const Halide::Expr& sum) {
  return Halide::strict_float(Halide::select(sum == 0.0f, minus_infinity(), max + Halide::log(sum)));
}

// The same as a factor: 1 / sum, 0 when the sum is 0, NaN when it is NaN. One division per row
// instead of one per element (a vector division costs about 16 cycles).
inline Halide::Expr reciprocal_or_zero(const Halide::Expr& sum) {
  return Halide::strict_float(Halide::select(sum == 0.0f, 0.0f, 1.0f / sum));
}

}  // namespace attn::gen
