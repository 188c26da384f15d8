#pragma once
// Relative-position terms of a score modifier, tabulated. A term that reads the query and key
// indices only as their offset kv_idx - q_idx (T5's bucket and its table entry: gather(table,
// t5_bucket(...), head)) takes at most N_Q + N_K - 1 values per head, where the tiles evaluate it
// once per pair: generic_lowering computes it once per offset (and head) into a Func of its own
// and the pairs read it there, a vector load per vector of keys instead of a log and a gather.
// Halide-free.
#include "dsl/ir.hpp"

namespace attn::gen {

// Is node i, inside a modifier, worth a table per offset: it reads no score, no tensor but an
// unbatched table through gather, the query and key indices only through their difference (either
// sign), and spends more than an FMA per pair on that difference (a gather at it, or a log, exp,
// tanh, sqrt, sigmoid, division or remainder of it)? Truth values never are (nor is anything in a
// mask's predicate, whose formula the tiles' bounds read: generic_lowering's placeholders).
bool tabulated_by_offset(const ir::graph& g, int i);

// Does node i read the pair only through its offset: no score, no tensor but an unbatched table
// through gather, the query and key indices only through their difference (or not at all)?
bool reads_offset_only(const ir::graph& g, int i);

// Does node i read the `head` placeholder?
bool reads_head(const ir::graph& g, int i);

}  // namespace attn::gen
