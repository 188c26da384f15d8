#pragma once
// A product's right operand b(n, k, ...) read from a copy packed in panels one register tile of
// columns wide: panels(n % W, k, n / W, ...) = b(n, k, ...). A register tile streams over k
// reading W columns of b per step; in place those rows are b's width apart (a power of two: a
// line or two per 4 KiB page, where the hardware prefetchers do not follow, and the loads stall),
// packed they follow one another in memory. Halide has no split storage, so the consumer's
// definition is rewritten to read the packed Func (as Func::in() rewrites it to read a wrapper).
// Used by matmul_schedule (wide weights); not by the fused kernel, whose Kᵀ tiles (panels of one
// vector, packed at root) ran no faster with it.
#include <Halide.h>

namespace attn::gen {

// Makes every read of b (`read`: a call of a Func or an input in consumer's definition) a read of
// a packed copy and returns that copy, for the caller to schedule (compute it where a block of
// b's columns is known). width must divide the column index's alignment, or the reads become
// gathers. With `last_column` defined, columns past it are read at it (a tail panel; never used).
Halide::Func read_in_panels(Halide::Func consumer, const Halide::Internal::Call* read, int width,
                            const Halide::Expr& last_column = Halide::Expr());

}  // namespace attn::gen
