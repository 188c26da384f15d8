#include "generators/lowering/nonfinite_lowering.hpp"

#include "generators/lowering/nonfinite.hpp"

namespace attn::gen {

using namespace Halide;

Expr masked_score(const Expr& keep, const Expr& score) { return Halide::select(exact_predicate(keep), score, minus_infinity()); }

Expr kept_weight(const Expr& keep, const Expr& weight) { return Halide::select(exact_predicate(keep), weight, 0.0f); }

Expr product_term(const Expr& a, const Expr& b, bool a_is_weights) { return a_is_weights ? weighted(a, b) : a * b; }

void define_safe_softmax(Func& f, const std::vector<Expr>& at, const std::vector<Expr>& at_key, const std::vector<Expr>& row,
                         const Expr& x, const Expr& x_key, stage& st) {
  Func m("row_max"), e("row_exp"), s("row_sum");
  m(row) = no_score();
  m(row) = Halide::max(m(row), kept_or_no_score(x_key));
  e(at) = kept_exp(x, m(row));
  s(row) = 0.0f;
  s(row) += e(at_key);
  f(at) = normalise(e(at), s(row));
  st.row_max = m;
  st.row_exp = e;
  st.row_sum = s;
}

}  // namespace attn::gen
