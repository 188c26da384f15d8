#include "generators/lowering/lse_lowering.hpp"

#include "generators/lowering/nonfinite.hpp"

namespace attn::gen {

using namespace Halide;

void define_lse(lowering_state& s, const ir::node& softmax, const std::vector<Var>& row, const Expr& x_key) {
  const std::vector<Expr> at = as_exprs(row);
  Func m("lse_max"), sum("lse_sum"), lse("lse");
  m(at) = no_score();
  m(at) = Halide::max(m(at), kept_or_no_score(x_key));
  sum(at) = 0.0f;
  sum(at) += kept_exp(x_key, m(at));
  lse(at) = log_sum_exp(m(at), sum(at));
  std::vector<std::int64_t> extents = s.static_extents(softmax);
  extents.erase(extents.begin());  // the key axis
  s.out.stages.push_back({lse, row, stage::row_reduction, m, {}, sum, {}, extents, {}});
  s.out.lse = lse;
  s.out.lse_batched = softmax.batched;
}

}  // namespace attn::gen
