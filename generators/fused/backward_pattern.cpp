#include "generators/fused/backward_pattern.hpp"

#include <algorithm>
#include "dsl/gradient.hpp"

namespace attn::gen {

namespace {

// A transpose of a pair node (Pᵀ): read only by column exits.
bool is_transposed_pair(const ir::graph& g, const backward_match& m, int n) {
  return g.at(n).kind == ir::op::transpose && is_pair_node(g, m, g.at(n).args[0]);
}

// Nodes a tile evaluates: elementwise ones (masks, modifiers and their bound functions
// included), stored copies, and products of two operands that are not pair nodes (dO·Vᵀ).
bool computable_in_tiles(const ir::graph& g, const backward_match& m, int i) {
  const ir::node& n = g.at(i);
  const auto pairish = [&](int a) { return is_pair_node(g, m, a) || is_transposed_pair(g, m, a); };
  if (n.kind == ir::op::matmul) return std::none_of(n.args.begin(), n.args.end(), pairish);
  if (!ir::is_elementwise(n.kind) && n.kind != ir::op::store) return false;
  return std::none_of(n.args.begin(), n.args.end(), [&](int a) { return is_transposed_pair(g, m, a); });
}

// The product n as an exit of the tiles, if it is one.
bool as_exit(const ir::graph& g, const backward_match& m, int i, pair_exit& e) {
  const ir::node& n = g.at(i);
  if (n.kind != ir::op::matmul || n.args.size() != 2) return false;
  const int x = n.args[0], y = n.args[1];
  const std::size_t rank = g.at(m.forward.weights).shape.size();
  if (n.shape.size() != rank || g.at(x).shape.size() != rank || g.at(y).shape.size() != rank) return false;
  if (n.batched != g.at(m.forward.weights).batched) return false;
  const auto plain = [&](int a) { return !is_pair_node(g, m, a) && !is_transposed_pair(g, m, a); };
  if (is_pair_node(g, m, x) && plain(y)) e = {i, x, y, true, false};
  else if (is_transposed_pair(g, m, x) && plain(y)) e = {i, g.at(x).args[0], y, false, false};
  else if (plain(x) && is_pair_node(g, m, y)) e = {i, y, x, false, true};
  else return false;
  return true;
}

// softmax's row term: sum_to(select(P == 0, 0, P·(dO·Vᵀ))) over the keys; sets output_adjoint (dO).
bool as_row_dot(const ir::graph& g, backward_match& m, int i) {
  const ir::node& n = g.at(i);
  if (n.kind != ir::op::sum_to) return false;
  const ir::node& guarded = g.at(n.args[0]);
  if (guarded.kind != ir::op::select) return false;
  const ir::node& product = g.at(guarded.args[2]);
  if (product.kind != ir::op::mul || product.args[0] != m.forward.softmax) return false;
  const ir::node& dp = g.at(product.args[1]);  // P's adjoint: dO·Vᵀ, its only one (P feeds the combine alone)
  if (dp.kind != ir::op::matmul || g.at(dp.args[1]).kind != ir::op::transpose || g.at(dp.args[1]).args[0] != m.forward.values)
    return false;
  m.output_adjoint = dp.args[0];
  m.row_dot = i;
  return true;
}

// n as a reduction of a pair node to a small table (backward_pattern.hpp), if it is one.
bool as_reduction(const ir::graph& g, const backward_match& m, int i, pair_reduction& red) {
  const ir::node& n = g.at(i);
  if ((n.kind != ir::op::scatter_add && n.kind != ir::op::sum_to) || !is_pair_node(g, m, n.args[0])) return false;
  const ir::node& c = g.at(n.args[0]);
  const std::size_t rc = c.shape.size(), rn = n.shape.size();
  red = {i, n.args[0], std::vector<int>(rn, -1), 1};
  if (n.kind == ir::op::sum_to) {
    if (rn > rc) return false;
    const std::size_t lead = rc - rn;
    for (std::size_t k = 0; k < rn; ++k) {
      const bool unit = n.shape[k].size == 1 && c.shape[k + lead].size != 1;
      if (!unit && k + lead + 2 >= rc) return false;  // a row or column of pairs: not small
      if (!unit) red.follows[k] = static_cast<int>(k + lead);
    }
    return true;
  }
  int heads = -1;
  for (std::size_t k = 0; k + 2 < rc; ++k)
    if (c.shape[k].role == ir::dim_role::heads) heads = static_cast<int>(k);
  for (std::size_t k = 0; k < rn; ++k) {
    const int index = n.args[k + 1];
    if (is_pair_node(g, m, index) || is_transposed_pair(g, m, index)) return false;
    const ir::node& x = g.at(index);
    if (heads >= 0 && x.kind == ir::op::placeholder && x.param == static_cast<int>(ir::placeholder::head)) {
      red.follows[k] = heads;
    } else {
      if (n.shape[k].size <= 0) return false;
      red.cells *= n.shape[k].size;
      if (red.cells > max_reduction_cells) return false;
    }
  }
  return true;
}

}  // namespace

bool is_pair_node(const ir::graph& g, const backward_match& m, int n) {
  const ir::node& x = g.at(n);
  const ir::node& w = g.at(m.forward.weights);
  return !ir::is_terminal(x.kind) && x.kind != ir::op::transpose && x.shape.size() == w.shape.size() && ir::spans_pair_of(x, w);
}

std::vector<backward_match> find_backward(const ir::graph& g) {
  const int dy = ir::output_gradient_position(g);
  if (dy < 0) return {};
  const int first_gradient = g.terminals[static_cast<std::size_t>(dy)];  // the first node the differentiation added
  ir::graph forward = g;
  forward.nodes.resize(static_cast<std::size_t>(first_gradient));
  forward.terminals.resize(static_cast<std::size_t>(dy));
  const std::vector<attention_match> found = find_attention(forward);
  if (found.size() != 1) return {};
  backward_match m;
  m.forward = found.front();
  for (int i = first_gradient; i < static_cast<int>(g.nodes.size()); ++i) {
    const ir::node& n = g.at(i);
    const bool reads_pair = std::any_of(n.args.begin(), n.args.end(), [&](int a) {
      return is_pair_node(g, m, a) || is_transposed_pair(g, m, a);
    });
    if (!reads_pair) continue;
    if (is_pair_node(g, m, i)) {
      if (!computable_in_tiles(g, m, i)) return {};
      continue;
    }
    if (is_transposed_pair(g, m, i)) continue;  // its readers are checked as exits
    pair_exit e;
    pair_reduction red;
    if (as_exit(g, m, i, e)) m.exits.push_back(e);
    else if (m.forward.normalised() && m.row_dot < 0 && as_row_dot(g, m, i)) continue;
    else if (as_reduction(g, m, i, red)) m.reductions.push_back(red);
    else return {};
  }
  for (int o : g.outputs())
    if (is_pair_node(g, m, o) || is_transposed_pair(g, m, o)) return {};
  if (m.exits.empty() || (m.forward.normalised() && m.row_dot < 0)) return {};
  return {m};
}

bool gpu_covers(const ir::graph& g, const backward_match& m, const std::map<std::string, std::int64_t, std::less<>>& bound) {
  const auto known = [&](const ir::dim& d) { return d.size > 0 || bound.contains(d.name); };
  return std::ranges::all_of(m.exits,
                             [&](const pair_exit& e) {
                               const std::vector<ir::dim>& shape = g.at(e.node).shape;
                               return known(shape[e.width_axis(shape.size())]);
                             }) &&
         std::ranges::all_of(m.reductions, [](const pair_reduction& r) { return r.cells <= gpu_reduction_cells; });
}

}  // namespace attn::gen
