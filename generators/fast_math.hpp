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

}  // namespace attn::gen
