#pragma once
// A 16-bit row's blocks of `block` elements read as vectors of 32-bit words: each word's low half
// is an even element, its high half the next odd one, so a block splits in registers into its even
// elements (a shift) and its odd ones (a mask), one instruction each. Code that takes a block in
// that order reads its position `slot` from the row's element split_halves(slot, block), and finds
// element d at position split_halves_slot(d, block).
#include <Halide.h>

namespace attn::gen {

inline Halide::Expr split_halves(const Halide::Expr& slot, int block) {
  const int half = block / 2;
  return slot / block * block + slot % half * 2 + slot / half % 2;
}

inline Halide::Expr split_halves_slot(const Halide::Expr& d, int block) {
  const int half = block / 2;
  return d / block * block + d % 2 * half + d % block / 2;
}

}  // namespace attn::gen
