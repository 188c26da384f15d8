#include "generators/lowering/lower.hpp"

#include <algorithm>
#include <set>
#include <utility>
#include "dsl/gradient.hpp"
#include "generators/fused/backward_pattern.hpp"
#include "generators/fused/fused_backward.hpp"
#include "generators/lowering/generic_lowering.hpp"
#include "generators/lowering/lowering_state.hpp"

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
  if (options.fused)
    for (const backward_match& m : find_backward(g))
      if (!options.gpu || gpu_covers(g, m, bound)) lower_fused_backward(rules, s, m);
  s.out.output_batched = g.output().batched;
  std::set<int> taken;  // a node that is two outputs is copied for the second
  const std::vector<int> outputs = g.outputs();
  const std::vector<ir::element> types = ir::result_types(g);
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    const int o = outputs[k];
    const ir::node& n = g.at(o);
    Func result;
    // A sum (or a scatter) is copied into its output: as the output itself, its vectorised update
    // read the caller's buffer with aligned vector loads, which fault on a tensor aligned to 16 bytes.
    const bool sum = n.kind == ir::op::sum_to || n.kind == ir::op::sum_groups || n.kind == ir::op::scatter_add;
    // A result stored in a 16-bit type is rounded as it is copied into the caller's buffer.
    const Type type = stored_type(types[k]);
    // In place where the rules compute the node into a buffer of its own, of the stored type (a
    // fused attention writes its result in it: flash_problem::stored); a fused backward's exit is
    // read from its pass's sums, so copied too.
    const auto own_buffer = [&] {
      const Func f = rules.func(o);
      return std::ranges::find(s.out.materialised, o) != s.out.materialised.end() && f.type() == type;
    };
    if (ir::is_materialised(n.kind) && !sum && own_buffer() && taken.insert(o).second) {
      result = rules.func(o);
      std::erase(s.out.materialised, o);  // in place
    } else {
      auto [f, vars] = s.new_func("output", n, type);
      f(s.args_of(n, as_exprs(vars))) = stored_as(type, rules.value(o, as_exprs(vars), {}));
      s.out.stages.push_back({f, s.halide_vars(vars, n.batched), stage::layout, {}, {}, {}, {}, s.static_extents(n), {}});
      result = f;
    }
    if (k == 0) s.out.output = result;
    else s.out.more_outputs.push_back(result);
  }
  if (const int w = ir::weights_softmax(g); w >= 0 && !options.fused) {
    s.out.weights = rules.func(w);
    s.out.weights_batched = g.at(w).batched;
  }
  return std::move(s.out);
}

void replace_output(lowered& l, const Func& old, const Func& now) {
  if (l.output.name() == old.name()) l.output = now;
  for (Func& f : l.more_outputs)
    if (f.name() == old.name()) f = now;
}

}  // namespace attn::gen
