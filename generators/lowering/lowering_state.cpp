#include "generators/lowering/lowering_state.hpp"

#include <stdexcept>

namespace attn::gen {

using namespace Halide;

Type stored_type(ir::element e) {
  return e == ir::element::bf16 ? BFloat(16) : e == ir::element::f16 ? Float(16) : Float(32);
}

Expr stored_as(Type t, const Expr& x) {
  if (!t.is_bfloat()) return cast(t, x);
  // In integers, as Halide's own cast would be emulated on most CPUs: add just under half a unit of
  // the dropped bits (half where the kept part is odd), keep the top; NaN stays a quiet NaN.
  const Expr bits = reinterpret(UInt(32), x);
  const Expr top = select(is_nan(x), (bits >> 16) | 0x40, (bits + (0x7fff + ((bits >> 16) & 1))) >> 16);
  return reinterpret(t, cast(UInt(16), top));
}

lowering_state::lowering_state(const ir::graph& g, const bound_dims& bound, const lowering_options& options)
    : g(g), bound(bound), options(options) {
  for (const attention_match& m : find_attention(g)) {
    if (!m.normalised()) softmax_free.emplace(m.combine, m);  // either lowering weighs masked keys 0
    if (!options.fused) continue;
    fused.emplace(m.combine, m);
    const auto& s = g.at(m.weights).shape;
    tiled_dims.insert(s[s.size() - 2].name);
    tiled_dims.insert(s[s.size() - 1].name);
  }
  for (int t : g.terminals) {
    const ir::node& n = g.at(t);
    const Type type = n.kind == ir::op::int_input ? Int(32) : stored_type(n.type);
    int dims = static_cast<int>(n.shape.size()) + (n.batched ? 1 : 0);
    params.emplace(t, ImageParam(type, dims, "p_" + std::string(n.name)));
    // A per-sequence scalar shared by the batch has batch stride 0: let its only dim have any stride.
    if (n.shape.empty() && n.batched) params.at(t).dim(0).set_stride(Expr());
    out.params.push_back(params.at(t));
  }
}

Expr lowering_state::read(int terminal, const std::vector<Expr>& at) const {
  const Expr x = params.at(terminal)(at);
  // bfloat16 is float32's upper half: widened by a shift, exactly (vector integer code on any CPU).
  if (x.type().is_bfloat()) return reinterpret(Float(32), cast(UInt(32), reinterpret(UInt(16), x)) << 16);
  return x.type().is_float() && x.type().bits() < 32 ? cast<float>(x) : x;
}

std::pair<Func, std::vector<Var>> lowering_state::new_func(const std::string& what, const ir::node& n, Type type) {
  std::vector<Var> vars;
  for (std::size_t k = 0; k < n.shape.size(); ++k) vars.emplace_back(what + "_" + std::string(n.shape[k].name) + std::to_string(k));
  return {Func(type, static_cast<int>(n.shape.size()) + (n.batched ? 1 : 0), what + std::to_string(count++)), vars};
}

std::vector<Var> lowering_state::halide_vars(const std::vector<Var>& row_major, bool batched) const {
  std::vector<Var> v(row_major.rbegin(), row_major.rend());
  if (batched) v.push_back(batch);
  return v;
}

std::vector<Expr> lowering_state::args_of(const ir::node& n, const std::vector<Expr>& row_major) const {
  return halide_args(row_major, batch, n.batched);
}

Expr lowering_state::extent(std::string_view name, std::int64_t size) const {
  if (size > 0) return Expr(static_cast<int>(size));
  if (auto it = bound.find(name); it != bound.end()) return Expr(static_cast<int>(it->second));
  for (int t : g.terminals) {
    const ir::node& n = g.at(t);
    for (std::size_t k = 0; k < n.shape.size(); ++k)
      if (n.shape[k].name == name) return params.at(t).dim(static_cast<int>(n.shape.size() - 1 - k)).extent();
  }
  throw std::logic_error("dim " + std::string(name) + " appears in no tensor");
}

Expr lowering_state::batch_extent() const {
  for (int t : g.terminals)
    if (g.at(t).batched) return params.at(t).dim(static_cast<int>(g.at(t).shape.size())).extent();
  throw std::logic_error("a batched node, but no batched tensor");
}

std::vector<std::int64_t> lowering_state::static_extents(const ir::node& n) const {
  std::vector<std::int64_t> e;
  for (auto d = n.shape.rbegin(); d != n.shape.rend(); ++d) {
    auto it = bound.find(d->name);
    e.push_back(d->size > 0 ? d->size : it != bound.end() ? it->second : 0);
  }
  if (n.batched) e.push_back(0);
  return e;
}

std::vector<Expr> lowering_state::broadcast_index(int child, const std::vector<Expr>& idx) const {
  const auto& s = g.at(child).shape;
  std::vector<Expr> r(idx.end() - static_cast<std::ptrdiff_t>(s.size()), idx.end());
  for (std::size_t k = 0; k < s.size(); ++k)
    if (s[k].role == ir::dim_role::unit) r[k] = 0;
  return r;
}

std::vector<Expr> lead_index(const std::vector<ir::dim>& operand, const std::vector<Expr>& lead) {
  std::size_t own = operand.size() - 2;
  std::vector<Expr> r(lead.end() - static_cast<std::ptrdiff_t>(own), lead.end());
  for (std::size_t k = 0; k < own; ++k)
    if (operand[k].role == ir::dim_role::unit) r[k] = 0;
  return r;
}

}  // namespace attn::gen
