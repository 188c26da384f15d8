#include "generators/fused/fused_backward.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include "generators/fused/fused_lowering.hpp"
#include "generators/fused/mask_bounds.hpp"
#include "generators/lowering/generic_lowering.hpp"
#include "generators/lowering/lowering_state.hpp"
#include "generators/lowering/nonfinite.hpp"

namespace attn::gen {

using namespace Halide;

namespace {

class builder {
 public:
  builder(generic_lowering& rules, lowering_state& s, const backward_match& m)
      : rules_(rules), s_(s), m_(m), w_(s.g.at(m.forward.weights)) {
    const std::size_t r = w_.shape.size();
    nq_ = s.extent(w_.shape[r - 2].name, w_.shape[r - 2].size);
    nk_ = s.extent(w_.shape[r - 1].name, w_.shape[r - 1].size);
    tq_ = s.options.tiles.q_tile;
    tk_ = s.options.tiles.kv_tile;
    for (std::size_t k = 0; k + 2 < r; ++k) b_.lead.emplace_back("lead" + std::to_string(k));  // innermost first
    b_.batch = s.batch;
    b_.batched = w_.batched;
  }

  void run() {
    // The forward's fused kernel, with its log-sum-exp: O for the row term, the lse for P.
    s_.tiled_dims.insert(w_.shape[w_.shape.size() - 2].name);
    s_.tiled_dims.insert(w_.shape.back().name);
    s_.fused.emplace(m_.forward.combine, m_.forward);
    s_.lse_of.insert(m_.forward.combine);
    rules_.func(m_.forward.combine);
    lse_ = s_.out.flash.back().lse;
    define_row_dot();
    s_.tile.given[m_.forward.softmax] = [this](const std::vector<Expr>& idx) { return probability(idx); };
    define_pass(b_.by_query, true);
    define_pass(b_.by_key, false);
    s_.tile.given.erase(m_.forward.softmax);
    define_exits();
    s_.out.backward.push_back(b_);
  }

 private:
  std::vector<Expr> lead_row_major() const { return {b_.lead.rbegin(), b_.lead.rend()}; }

  // (first..., lead innermost first..., batch)
  std::vector<Expr> tile_args(std::vector<Expr> first) const {
    for (const Var& v : b_.lead) first.push_back(v);
    if (b_.batched) first.push_back(b_.batch);
    return first;
  }

  // Σ_d dO·O per query row: softmax's row term Σ_k P·dP, as P·V = O (backward_pattern.hpp).
  void define_row_dot() {
    const ir::node& n = s_.g.at(m_.row_dot);
    auto [f, vars] = s_.new_func("row_dot", n);
    const std::vector<Expr> at = as_exprs(vars);
    const ir::dim& dv = s_.g.at(m_.forward.combine).shape.back();
    const RDom c(0, s_.extent(dv.name, dv.size), "row_dot_d");
    std::vector<Expr> row(at.begin(), at.end() - 1);
    row.push_back(c.x);
    f(s_.args_of(n, at)) = 0.0f;
    f(s_.args_of(n, at)) += rules_.value(m_.output_adjoint, s_.broadcast_index(m_.output_adjoint, row), {}) *
                            rules_.value(m_.forward.combine, row, {});
    s_.funcs.emplace(m_.row_dot, f);
    s_.out.stages.push_back({f, s_.halide_vars(vars, n.batched), stage::sum, {}, {}, {}, {}, s_.static_extents(n), {}});
    b_.row_dot = f;
  }

  // P at (lead..., q, kv) inside a tile: exp(S - lse) where the masks keep the pair, else 0; one
  // Func per pass, shared by its uses.
  Expr probability(const std::vector<Expr>& idx) {
    std::map<int, Func>& cache = *s_.tile.per_tile;
    const ir::node& p = s_.g.at(m_.forward.softmax);
    auto it = cache.find(m_.forward.softmax);
    if (it == cache.end()) {
      auto [f, vars] = s_.new_func("probability", p);
      const std::vector<Expr> at = as_exprs(vars);
      const std::vector<Expr> lead(at.begin(), at.end() - 2);
      const Expr q = at[at.size() - 2], kv = at.back();
      const flash_problem::scored sc = fused_score(rules_, s_, m_.forward, lead, q, kv, *s_.tile.pairwise);
      std::vector<Expr> row{min(q, nq_ - 1)};
      row.insert(row.end(), lead.rbegin(), lead.rend());
      if (p.batched) row.push_back(s_.batch);
      const Expr lse = lse_(row);
      f(s_.args_of(p, at)) = with_strict_score(sc.score, [&](const Expr& x) {
        return select(exact_predicate(sc.keep) && is_kept_score(x), exp_below_max(x, lse), 0.0f);
      });
      s_.tile.pairwise->push_back({f, s_.halide_vars(vars, p.batched), stage::layout, {}, {}, {}, {}, s_.static_extents(p), {}});
      it = cache.emplace(m_.forward.softmax, f).first;
    }
    return it->second(s_.args_of(p, idx));
  }

  // Does the tile of queries qt and keys kt hold a pair the masks keep?
  Expr kept(const Expr& qt, const Expr& kt) {
    const Var mq("mask_q"), mk("mask_kv");
    std::vector<stage> unused;
    const Expr keep = fused_score(rules_, s_, m_.forward, lead_row_major(), mq, mk, unused).keep;
    const Expr first = qt * tq_;
    return kv_tiles_kept(keep, mq, mk, first, min(first + tq_, nq_) - 1, nk_, tk_, kt).some;
  }

  // The pair node's values over (lead..., q, kv), 0 past the last query or key (a tile's rows there).
  Func pair_values(int pair) {
    const ir::node& n = s_.g.at(pair);
    auto [f, vars] = s_.new_func("pair_values", n);
    const std::vector<Expr> at = as_exprs(vars);
    const Expr q = at[at.size() - 2], kv = at.back();
    f(s_.args_of(n, at)) = select(q < nq_ && kv < nk_, rules_.value(pair, at, {}), 0.0f);
    return f;
  }

  // The exit's other operand at the query or key `row` (clamped: tiles pass the last) and column d
  // (clamped to its width where the pass's Tuple spans a wider exit, or a width known at the call only).
  Expr other_value(const pair_exit& e, const Expr& row, const Expr& d, int pass_width) {
    const ir::node& exit = s_.g.at(e.node);
    const ir::dim& width = e.other_left ? exit.shape[exit.shape.size() - 2] : exit.shape.back();
    const bool exact = pass_width > 0 && width_known(e) == pass_width;
    const Expr column = exact ? d : min(d, s_.extent(width.name, width.size) - 1);
    const Expr at_row = min(row, (e.rows ? nk_ : nq_) - 1);
    int node = e.other;
    bool row_first = !e.other_left;
    if (e.other_left && s_.g.at(node).kind == ir::op::transpose) {  // Qᵀ: read Q, rows outer, d inner
      node = s_.g.at(node).args[0];
      row_first = true;
    }
    std::vector<Expr> at = lead_index(s_.g.at(node).shape, lead_row_major());
    if (row_first) at.insert(at.end(), {at_row, column});
    else at.insert(at.end(), {column, at_row});
    return rules_.value(node, at, {});
  }

  int width_known(const pair_exit& e) const {
    const ir::node& exit = s_.g.at(e.node);
    const std::vector<std::int64_t> extents = s_.static_extents(exit);  // Halide order
    return static_cast<int>(e.other_left ? extents[1] : extents[0]);
  }

  void define_pass(backward_pass& p, bool rows) {
    p.rows = rows;
    std::vector<const pair_exit*> exits;
    for (const pair_exit& e : m_.exits)
      if (e.rows == rows) exits.push_back(&e);
    if (exits.empty()) return;
    p.tile_rows = rows ? tq_ : tk_;
    const int other_rows = rows ? tk_ : tq_;
    p.r = RDom(0, rows ? (nk_ + tk_ - 1) / tk_ : (nq_ + tq_ - 1) / tq_, rows ? "key_tiles" : "query_tiles");
    p.r.where(rows ? kept(p.tile, p.r.x) : kept(p.r.x, p.tile));

    std::map<int, Func> per_tile;
    const auto saved = std::tuple(s_.tile.pairwise, s_.tile.weights, s_.tile.per_tile, s_.tile.keys_clamped);
    std::tie(s_.tile.pairwise, s_.tile.weights, s_.tile.per_tile, s_.tile.keys_clamped) =
        std::tuple(&p.pairwise, &w_, &per_tile, false);
    const Var t("t");
    const std::string kind = rows ? "by_query" : "by_key";
    const std::vector<Expr> acc_at = tile_args({p.d, p.i, p.tile});
    p.acc = Func("backward_" + kind + std::to_string(s_.count++));
    std::vector<Expr> zeros(exits.size(), 0.0f);
    if (zeros.size() == 1) p.acc(acc_at) = zeros.front();
    else p.acc(acc_at) = Tuple(zeros);
    std::map<int, Func> values;
    std::vector<Expr> next;
    for (const pair_exit* e : exits) p.width_known = std::max(p.width_known, width_known(*e));
    if (std::any_of(exits.begin(), exits.end(), [&](const pair_exit* e) { return width_known(*e) == 0; })) p.width_known = 0;
    for (std::size_t k = 0; k < exits.size(); ++k) {
      const pair_exit& e = *exits[k];
      if (!values.contains(e.pair)) values.emplace(e.pair, pair_values(e.pair));
      const Func& v = values.at(e.pair);
      p.values.push_back(v);
      const RDom c(0, other_rows, "contracted_" + kind);
      // Tile t of the other kind against this pass's own tile.
      const Expr q0 = (rows ? Expr(p.tile) : Expr(t)) * tq_, k0 = (rows ? Expr(t) : Expr(p.tile)) * tk_;
      const Expr q = rows ? q0 + p.i : q0 + c.x, kv = rows ? k0 + c.x : k0 + p.i;
      std::vector<Expr> pair_at = lead_row_major();
      pair_at.insert(pair_at.end(), {q, kv});
      const Expr x = v(s_.args_of(s_.g.at(e.pair), pair_at));
      const Expr y = other_value(e, rows ? kv : q, p.d, p.width_known);
      Func product("backward_product_" + kind + std::to_string(s_.count++));
      const std::vector<Expr> at = tile_args({p.d, p.i, t, p.tile});
      product(at) = 0.0f;
      Func finite;
      if (s_.g.at(e.node).param == static_cast<int>(ir::product_kind::weighted)) {
        const ir::node& o = s_.g.at(e.other);
        finite = rules_.all_finite(o.kind == ir::op::transpose ? o.args[0] : e.other);
        product(at) = accumulate_weighted(product(at), x, y, finite());
      } else {
        product(at) += x * y;
      }
      p.finite.push_back(finite);
      p.products.push_back(product);
      p.contracted.push_back(c);
      const Expr old = exits.size() == 1 ? Expr(p.acc(acc_at)) : p.acc(acc_at)[static_cast<int>(k)];
      next.push_back(old + product(tile_args({p.d, p.i, p.r.x, p.tile})));
    }
    if (next.size() == 1) p.acc(acc_at) = next.front();
    else p.acc(acc_at) = Tuple(next);
    std::tie(s_.tile.pairwise, s_.tile.weights, s_.tile.per_tile, s_.tile.keys_clamped) = saved;
  }

  // Each exit node's Func: its pass's sums, read at (d, row % tile, row / tile).
  void define_exits() {
    for (const pair_exit& e : m_.exits) {
      backward_pass& p = e.rows ? b_.by_query : b_.by_key;
      int slot = 0, count = 0;
      for (const pair_exit& other : m_.exits)
        if (other.rows == e.rows) {
          if (&other == &e) slot = count;
          ++count;
        }
      const ir::node& n = s_.g.at(e.node);
      auto [f, vars] = s_.new_func("exit", n);
      const std::vector<Expr> at = as_exprs(vars);
      const std::size_t r = at.size();
      const Expr row = e.other_left ? at[r - 1] : at[r - 2], d = e.other_left ? at[r - 2] : at[r - 1];
      std::vector<Expr> a{d, row % p.tile_rows, row / p.tile_rows};
      for (std::size_t k = r - 2; k-- > 0;) a.push_back(at[k]);
      if (b_.batched) a.push_back(s_.batch);
      f(s_.args_of(n, at)) = count == 1 ? Expr(p.acc(a)) : p.acc(a)[slot];
      s_.funcs.emplace(e.node, f);
      b_.exits.push_back(f);
    }
  }

  generic_lowering& rules_;
  lowering_state& s_;
  const backward_match& m_;
  const ir::node& w_;
  backward_funcs b_;
  Expr nq_, nk_;
  int tq_ = 0, tk_ = 0;
  Func lse_;
};

}  // namespace

void lower_fused_backward(generic_lowering& rules, lowering_state& s, const backward_match& m) { builder(rules, s, m).run(); }

}  // namespace attn::gen
