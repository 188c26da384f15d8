#include "generators/lowering/offset_tables.hpp"

namespace attn::gen {

namespace {

struct term {
  bool offset_only = true;  // reads the indices only through their difference, no score, no tensor but a gathered table
  bool varies = false;      // reads that difference
  bool costly = false;      // spends more than an FMA on it
  bool head = false;        // reads the head placeholder

  // This term with an argument's folded in.
  void add(const term& a) {
    offset_only = offset_only && a.offset_only;
    varies = varies || a.varies;
    costly = costly || a.costly;
    head = head || a.head;
  }
};

bool is_placeholder(const ir::node& n, ir::placeholder p) { return n.kind == ir::op::placeholder && n.param == static_cast<int>(p); }

bool costly_op(ir::op k) {
  using ir::op;
  return k == op::gather || k == op::log || k == op::exp || k == op::tanh || k == op::sqrt || k == op::rsqrt ||
         k == op::sigmoid || k == op::div || k == op::mod || k == op::floor_div;
}

bool predicate_op(ir::op k) {
  using ir::op;
  return k == op::lt || k == op::le || k == op::gt || k == op::ge || k == op::eq || k == op::ne || k == op::logical_and ||
         k == op::logical_or || k == op::logical_not;
}

term analyse(const ir::graph& g, int i) {
  using ir::op;
  const ir::node& n = g.at(i);
  term t;
  switch (n.kind) {
    case op::constant: case op::dim_value: return t;
    case op::placeholder:
      t.head = is_placeholder(n, ir::placeholder::head);
      t.offset_only = t.head;
      return t;
    case op::sub: {
      const ir::node& a = g.at(n.args[0]);
      const ir::node& b = g.at(n.args[1]);
      if ((is_placeholder(a, ir::placeholder::kv_idx) && is_placeholder(b, ir::placeholder::q_idx)) ||
          (is_placeholder(a, ir::placeholder::q_idx) && is_placeholder(b, ir::placeholder::kv_idx))) {
        t.varies = true;
        return t;
      }
      break;
    }
    case op::gather: {
      const ir::node& table = g.at(n.args[0]);
      if (!ir::is_terminal(table.kind) || table.batched) return {.offset_only = false};
      for (std::size_t k = 1; k < n.args.size(); ++k) t.add(analyse(g, n.args[k]));
      t.costly = t.costly || t.varies;
      return t;
    }
    default: break;
  }
  if (!ir::traits(n.kind).elementwise || n.args.empty()) return {.offset_only = false};
  for (int a : n.args) t.add(analyse(g, a));
  t.costly = t.costly || (costly_op(n.kind) && t.varies);
  return t;
}

// Is node i a truth value (a predicate, or a select between two)?
bool is_predicate(const ir::graph& g, int i) {
  const ir::node& n = g.at(i);
  if (predicate_op(n.kind)) return true;
  return n.kind == ir::op::select && is_predicate(g, n.args[1]);
}

}  // namespace

bool tabulated_by_offset(const ir::graph& g, int i) {
  if (is_predicate(g, i)) return false;
  const term t = analyse(g, i);
  return t.offset_only && t.varies && t.costly;
}

bool reads_offset_only(const ir::graph& g, int i) { return analyse(g, i).offset_only; }

bool reads_head(const ir::graph& g, int i) { return analyse(g, i).head; }

}  // namespace attn::gen
