#include "generators/fused/attention_pattern.hpp"

namespace attn::gen {

namespace {

int consumers(const ir::graph& g, int node) {
  int n = 0;
  for (const ir::node& other : g.nodes)
    for (int a : other.args) n += a == node;
  return n;
}

// f(S) for softmax-free attention: below `i`, through elementwise nodes only (a mask or modifier's
// function excepted: it is evaluated per score), some product spans (Nq, Nk), and no softmax does.
// `found`: a pairwise product was reached.
bool elementwise_over_pairwise(const ir::graph& g, int i, const ir::node& w, bool& found) {
  const ir::node& n = g.at(i);
  if (n.kind == ir::op::softmax) return false;
  if (n.kind == ir::op::matmul) {
    found = found || ir::spans_pair_of(n, w);
    return true;
  }
  if (!ir::is_elementwise(n.kind)) return true;  // leaves, layout (split heads, unsqueeze), transposes
  if (n.kind == ir::op::mask || n.kind == ir::op::modify) return elementwise_over_pairwise(g, n.args[0], w, found);
  for (int a : n.args)
    if (!elementwise_over_pairwise(g, a, w, found)) return false;
  return true;
}

// The masks on the score's own path through f: from the weights down, at each elementwise node
// the one operand spanning (Nq, Nk) (a mask's or modifier's scores); stops where there are none or several.
std::vector<int> masks_on_the_score_path(const ir::graph& g, int weights) {
  const ir::node& w = g.at(weights);
  std::vector<int> masks;
  for (int i = weights; ir::is_elementwise(g.at(i).kind);) {
    const ir::node& n = g.at(i);
    if (n.kind == ir::op::mask) masks.push_back(i);
    if (n.kind == ir::op::mask || n.kind == ir::op::modify) {
      i = n.args[0];
      continue;
    }
    int next = -1, count = 0;
    for (int a : n.args)
      if (ir::spans_pair_of(g.at(a), w)) next = a, ++count;
    if (count != 1) break;
    i = next;
  }
  return masks;
}

}  // namespace

std::vector<attention_match> find_attention(const ir::graph& g) {
  std::vector<attention_match> found;
  for (int i = 0; i < static_cast<int>(g.nodes.size()); ++i) {
    const ir::node& c = g.at(i);
    if (c.kind != ir::op::matmul || c.args.size() != 2) continue;
    const int w = c.args[0], v = c.args[1];
    // V may not broadcast against the weights: both carry the combine's leading dims.
    if (g.at(v).shape.size() != c.shape.size() || g.at(w).shape.size() != c.shape.size() || c.shape.size() < 2) continue;
    if (consumers(g, w) != 1) continue;
    if (g.at(w).kind == ir::op::softmax) {
      attention_match m{i, w, w, v, {}, g.at(w).args[0]};
      while (g.at(m.score).kind == ir::op::mask || g.at(m.score).kind == ir::op::modify) {
        m.chain.push_back(m.score);
        m.score = g.at(m.score).args[0];
      }
      found.push_back(m);
      continue;
    }
    // Softmax-free: the user combined weights f(S) with values, f elementwise over a pairwise score.
    bool pairwise = false;
    if (c.param != static_cast<int>(ir::product_kind::combine) || !ir::is_elementwise(g.at(w).kind) ||
        !elementwise_over_pairwise(g, w, g.at(w), pairwise) || !pairwise)
      continue;
    found.push_back(attention_match{i, -1, w, v, masks_on_the_score_path(g, w), w});
  }
  return found;
}

bool computed_per_tile(const ir::node& n, const ir::node& weights) {
  return ir::is_materialised(n.kind) && ir::spans_pair_of(n, weights);
}

std::string to_string(const ir::graph& g, const attention_match& m) {
  std::string s = "score";
  for (auto it = m.chain.rbegin(); it != m.chain.rend(); ++it) s = std::string(ir::op_name(g.at(*it).kind)) + "(" + s + ")";
  return (m.normalised() ? "softmax(" : "f(") + s + ")·V";
}

}  // namespace attn::gen
