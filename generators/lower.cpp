#include "lower.hpp"

#include <utility>
#include "generic_lowering.hpp"
#include "lowering_state.hpp"

namespace attn::gen {

using namespace Halide;

std::vector<Expr> halide_args(const std::vector<Expr>& row_major, const Expr& batch, bool batched) {
  std::vector<Expr> args(row_major.rbegin(), row_major.rend());
  if (batched) args.push_back(batch);
  return args;
}

// The pipeline's outputs: the root, computed in place (a materialised root is its own Func), and
// for the generic lowering the attention weights (ir::weights_softmax). What lies between them
// comes from the rules as the outputs reach it: generic_lowering.hpp, fused_lowering.hpp.
lowered lower(const ir::graph& g, const bound_dims& bound, const lowering_options& options) {
  lowering_state s(g, bound, options);
  generic_lowering rules(s);
  const ir::node& root = g.output();
  s.out.output_batched = root.batched;
  if (ir::is_materialised(root.kind)) {
    s.out.output = rules.func(g.root);
  } else {
    auto [f, vars] = s.new_func("output", root);
    f(s.args_of(root, as_exprs(vars))) = rules.value(g.root, as_exprs(vars), {});
    s.out.stages.push_back({f, s.halide_vars(vars, root.batched), stage::layout, {}, {}, {}, {}, s.static_extents(root), {}});
    s.out.output = f;
  }
  if (const int w = ir::weights_softmax(g); w >= 0 && !options.fused) {
    s.out.weights = rules.func(w);
    s.out.weights_batched = g.at(w).batched;
  }
  return std::move(s.out);
}

}  // namespace attn::gen
