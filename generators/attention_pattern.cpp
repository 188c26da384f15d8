#include "attention_pattern.hpp"

namespace attn::gen {

namespace {

int consumers(const ir::graph& g, int node) {
  int n = 0;
  for (const ir::node& other : g.nodes)
    for (int a : other.args) n += a == node;
  return n;
}

}  // namespace

std::vector<attention_match> find_attention(const ir::graph& g) {
  std::vector<attention_match> found;
  for (int i = 0; i < static_cast<int>(g.nodes.size()); ++i) {
    const ir::node& c = g.at(i);
    if (c.kind != ir::op::matmul || c.args.size() != 2) continue;
    const int w = c.args[0], v = c.args[1];
    if (g.at(w).kind != ir::op::softmax || consumers(g, w) != 1) continue;
    // V may not broadcast against the weights: both carry the combine's leading dims.
    if (g.at(v).shape.size() != c.shape.size() || g.at(w).shape.size() != c.shape.size()) continue;
    attention_match m{i, w, v, {}, g.at(w).args[0]};
    while (g.at(m.score).kind == ir::op::mask || g.at(m.score).kind == ir::op::modify) {
      m.chain.push_back(m.score);
      m.score = g.at(m.score).args[0];
    }
    found.push_back(m);
  }
  return found;
}

std::string to_string(const ir::graph& g, const attention_match& m) {
  std::string s = "score";
  for (auto it = m.chain.rbegin(); it != m.chain.rend(); ++it) s = std::string(ir::op_name(g.at(*it).kind)) + "(" + s + ")";
  return "softmax(" + s + ")·V";
}

}  // namespace attn::gen
