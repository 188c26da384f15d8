#pragma once
// The glue between the generic lowering and the fused ("flash") algorithm (flash_algorithm.hpp):
// an attention found on the IR (attention_pattern.hpp) becomes a flash_problem whose callbacks
// evaluate its score and V by the generic rules, inside the algorithm's tiles; and the few ways
// those rules read differently there (lowering_state::tile).
#include <vector>
#include <Halide.h>
#include "generators/fused/flash_algorithm.hpp"
#include "generators/fused/attention_pattern.hpp"
#include "generators/lowering/lowering_state.hpp"

namespace attn::gen {

class generic_lowering;

// softmax(chain(S))·V, or softmax-free f(S)·V, as one fused pipeline: appended to lowered::flash,
// its output the combine's Func (lowering_state::funcs).
Halide::Func lower_fused(generic_lowering& rules, lowering_state& s, const attention_match& m);

// The fused score at (lead..., q, kv), by the generic rules (its mask's predicate as `keep`), the
// per-pair nodes going to `pairwise`.
flash_problem::scored fused_score(generic_lowering& rules, lowering_state& s, const attention_match& m,
                                  const std::vector<Halide::Expr>& lead, const Halide::Expr& q, const Halide::Expr& kv,
                                  std::vector<stage>& pairwise);

// Is n, now, a node of the fused score being evaluated that is computed per tile, one fresh copy
// per use (computed_per_tile, tile_context::pairwise)?
bool in_fused_tile(const lowering_state& s, const ir::node& n);

// The fused pipeline computes whole tiles, past the last query or key: terminal i's row-major
// index with its query and key dims clamped to the tensor (their results are masked or never stored).
// In a full tile the keys are promised inside, not clamped, unless `promise_inside` is false (a Func
// that reads past the keys it serves).
std::vector<Halide::Expr> clamped_to_tensor(const lowering_state& s, int i, std::vector<Halide::Expr> idx, bool promise_inside = true);

// The key index at which a per-tile product reads its right operand (Kᵀ).
Halide::Expr key_of_tile(const lowering_state& s, const ir::node& product, const Halide::Expr& key);

// The row at which a per-tile product reads its left operand (`shape`'s second last dim).
Halide::Expr row_inside(const lowering_state& s, const ir::node& product, const std::vector<ir::dim>& shape, const Halide::Expr& row);

}  // namespace attn::gen
