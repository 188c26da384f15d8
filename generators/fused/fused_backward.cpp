#include "generators/fused/fused_backward.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include "dsl/gradient.hpp"
#include "generators/fused/fused_lowering.hpp"
#include "generators/fused/mask_bounds.hpp"
#include "generators/lowering/generic_lowering.hpp"
#include "generators/lowering/lowering_state.hpp"
#include "generators/lowering/nonfinite.hpp"
#include "generators/lowering/offset_tables.hpp"

namespace attn::gen {

using namespace Halide;

namespace {

int exit_width(const lowering_state& s, const pair_exit& e) {
  const ir::node& exit = s.g.at(e.node);
  const std::vector<std::int64_t> extents = s.static_extents(exit);  // Halide order: row-major reversed
  return static_cast<int>(extents[exit.shape.size() - 1 - e.width_axis(exit.shape.size())]);
}

class builder {
 public:
  builder(generic_lowering& rules, lowering_state& s, const backward_match& m)
      : rules_(rules), s_(s), m_(m), w_(s.g.at(m.forward.weights)) {
    const std::size_t r = w_.shape.size();
    nq_ = s.extent(w_.shape[r - 2].name, w_.shape[r - 2].size);
    nk_ = s.extent(w_.shape[r - 1].name, w_.shape[r - 1].size);
    if (s.options.gpu) {  // a block per tile of each pass: two passes, the forward's tiles
      tq_ = s.options.gpu->q_tile;
      tk_ = s.options.gpu->kv_tile;
    } else {
      sweep_ = s.options.tiles.backward_sweep;
      tq_ = s.options.tiles.backward_q_tile;
      tk_ = sweep_ ? tq_ : s.options.tiles.kv_tile;
    }
    b_.q_tile = tq_;
    b_.kv_tile = tk_;
    for (std::size_t k = 0; k + 2 < r; ++k) b_.lead.emplace_back("lead" + std::to_string(k));  // innermost first
    b_.batch = s.batch;
    b_.batched = w_.batched;
  }

  void run() {
    s_.tiled_dims.insert(w_.shape[w_.shape.size() - 2].name);
    s_.tiled_dims.insert(w_.shape.back().name);
    define_mask_shape();
    if (!m_.forward.normalised()) {  // f(S) and dS = dP ∘ f'(S): the tiles evaluate the graph's own nodes
      define_passes();
      define_exits();
      define_reductions();
      s_.out.backward.push_back(b_);
      return;
    }
    // What the forward saved: the lse for P, and O for the row term where the output is O itself
    // (the combine's adjoint is dY). Else the forward's fused kernel, with its log-sum-exp, runs
    // in this pipeline.
    const int saved_output = ir::saved_tensor(s_.g, ir::saved_output_name);
    saved_lse_ = ir::saved_tensor(s_.g, ir::saved_lse_name);
    output_ = saved_output >= 0 && s_.g.at(m_.output_adjoint).name == ir::output_gradient_name &&
                      ir::is_terminal(s_.g.at(m_.output_adjoint).kind)
                  ? saved_output
                  : m_.forward.combine;
    if (output_ == m_.forward.combine) {
      s_.fused.emplace(m_.forward.combine, m_.forward);
      s_.lse_of.insert(m_.forward.combine);
      rules_.func(m_.forward.combine);
      lse_ = s_.out.flash.back().lse;
    }
    define_row_dot();
    s_.tile.given[m_.forward.softmax] = [this](const std::vector<Expr>& idx) { return probability(idx); };
    define_passes();
    s_.tile.given.erase(m_.forward.softmax);
    define_exits();
    define_reductions();
    s_.out.backward.push_back(b_);
  }

 private:
  std::vector<Expr> lead_row_major() const { return {b_.lead.rbegin(), b_.lead.rend()}; }

  void define_passes() {
    if (sweep_) {
      define_sweep();
    } else {
      define_pass(backward_order::by_query);
      define_pass(backward_order::by_key);
    }
  }

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
                            rules_.value(output_, s_.broadcast_index(output_, row), {});
    s_.funcs.emplace(m_.row_dot, f);
    s_.out.materialised.push_back(m_.row_dot);
    s_.out.stages.push_back({f, s_.halide_vars(vars, n.batched), stage::sum, {}, {}, {}, {}, s_.static_extents(n), {}});
    b_.row_dot = f;
  }

  // P at (lead..., q, kv) inside a tile: exp(S - lse) where the masks keep the pair, else 0; one
  // Func per pass, shared by its uses (GPU: one per use, as every per-tile Func).
  Expr probability(const std::vector<Expr>& idx) {
    std::map<int, Func> fresh;
    std::map<int, Func>& cache = s_.tile.per_tile != nullptr ? *s_.tile.per_tile : fresh;
    const ir::node& p = s_.g.at(m_.forward.softmax);
    auto it = cache.find(m_.forward.softmax);
    if (it == cache.end()) {
      auto [f, vars] = s_.new_func("probability", p);
      const std::vector<Expr> at = as_exprs(vars);
      const std::vector<Expr> lead(at.begin(), at.end() - 2);
      const Expr q = at[at.size() - 2], kv = at.back();
      const flash_problem::scored sc = fused_score(rules_, s_, m_.forward, lead, q, kv, *s_.tile.pairwise);
      const Expr lse = log_sum_exp(lead, min(q, nq_ - 1));
      f(s_.args_of(p, at)) = with_strict_score(sc.score, [&](const Expr& x) {
        Expr kept = exact_predicate(sc.keep) && is_kept_score(x);
        if (s_.tile.stored_queries.defined()) kept = kept && q < nq_ && kv < nk_;  // as stored pair nodes
        return select(kept, exp_below_max(x, lse), 0.0f);
      });
      s_.tile.pairwise->push_back({f, s_.halide_vars(vars, p.batched), stage::layout, {}, {}, {}, {}, s_.static_extents(p), {}});
      it = cache.emplace(m_.forward.softmax, f).first;
    }
    return it->second(s_.args_of(p, idx));
  }

  // The forward's log-sum-exp of row q (lead: row-major), saved or computed in this pipeline.
  Expr log_sum_exp(const std::vector<Expr>& lead, const Expr& q) {
    if (saved_lse_ >= 0) {
      std::vector<Expr> row = lead;
      row.push_back(q);
      return rules_.value(saved_lse_, s_.broadcast_index(saved_lse_, row), {});
    }
    std::vector<Expr> row{q};
    row.insert(row.end(), lead.rbegin(), lead.rend());
    if (w_.batched) row.push_back(s_.batch);
    return lse_(row);
  }

  // The mask's shape, as the forward's tiles take it (fitted_to_mask): its band and diagonal.
  void define_mask_shape() {
    const Var mq("mask_q"), mk("mask_kv");
    std::vector<stage> unused;
    const Expr keep = fused_score(rules_, s_, m_.forward, lead_row_major(), mq, mk, unused).keep;
    b_.band = kept_band(keep, mq, mk);
    b_.diagonal = kept_edge_follows_query(keep, mq, mk);
  }

  // Does the tile of queries qt and keys kt hold a pair the masks keep?
  Expr kept(const Expr& qt, const Expr& kt) {
    const Var mq("mask_q"), mk("mask_kv");
    std::vector<stage> unused;
    const Expr keep = fused_score(rules_, s_, m_.forward, lead_row_major(), mq, mk, unused).keep;
    const Expr first = qt * tq_;
    return kv_tiles_kept(keep, mq, mk, first, min(first + tq_, nq_) - 1, nk_, tk_, kt).some;
  }

  // The pair node's values over (lead..., q, kv), 0 past the last query or key (a tile's rows
  // there): the node's own per-tile Func where that is 0 there (inline), else a copy per tile (in p.values).
  Func pair_values(backward_pass& p, int pair) {
    const ir::node& n = s_.g.at(pair);
    auto [f, vars] = s_.new_func("pair_values", n);
    const std::vector<Expr> at = as_exprs(vars);
    const Expr q = at[at.size() - 2], kv = at.back();
    const bool stored_zero_past = s_.tile.stored_queries.defined() &&
                                  ((pair == m_.forward.softmax && s_.tile.given.contains(pair)) ||  // probability()
                                   (n.kind == ir::op::store && in_fused_tile(s_, n)));
    if (stored_zero_past) {
      f(s_.args_of(n, at)) = rules_.value(pair, at, {});
    } else {
      f(s_.args_of(n, at)) = select(q < nq_ && kv < nk_, rules_.value(pair, at, {}), 0.0f);
      p.values.push_back(f);
    }
    return f;
  }

  // The exit's other operand at the query or key `row` and column d, read from its Func over
  // (column, row, lead..., batch) (p.operands), which clamps: the row past the last (tiles pass it)
  // to the last, the column to its width where the pass's Tuple spans a wider exit (or a width
  // known at the call only). Its readers then index a buffer where it is computed per tile.
  Expr other_value(backward_pass& p, const pair_exit& e, const Expr& row, const Expr& d, int pass_width) {
    const ir::node& exit = s_.g.at(e.node);
    const ir::dim& width = e.other_left ? exit.shape[exit.shape.size() - 2] : exit.shape.back();
    const bool exact = pass_width > 0 && width_known(e) == pass_width;
    const Var column("operand_column"), r("operand_row");
    int node = e.other;
    bool row_first = !e.other_left;
    if (e.other_left && s_.g.at(node).kind == ir::op::transpose) {  // Qᵀ: read Q, rows outer, d inner
      node = s_.g.at(node).args[0];
      row_first = true;
    }
    const Expr at_column = exact ? Expr(column) : min(column, s_.extent(width.name, width.size) - 1);
    const Expr at_row = min(r, (e.rows ? nk_ : nq_) - 1);
    std::vector<Expr> at = lead_index(s_.g.at(node).shape, lead_row_major());
    if (row_first) at.insert(at.end(), {at_row, at_column});
    else at.insert(at.end(), {at_column, at_row});
    Func f("operand" + std::to_string(s_.count++));
    f(tile_args({column, r})) = rules_.value(node, at, {});
    p.operands.push_back({f, !e.rows});
    return f(tile_args({d, row}));
  }

  int width_known(const pair_exit& e) const { return exit_width(s_, e); }

  // The exits' products per tile, into p (its tile context set): one Func per exit, (d, i, kt, qt,
  // lead..., batch); in a sweep one for all, (d, i, slot, kt, qt, lead..., batch), slot the exit's
  // (the sweep computes one register tile of one slot at a time, where it adds it: no tile of
  // products is stored).
  void define_products(backward_pass& p, std::map<int, Func>& values, const Var& kt, const Var& qt) {
    const auto exit = [&](int k) -> const pair_exit& { return m_.exits[static_cast<std::size_t>(k)]; };
    for (int k : p.exits) p.width_known = std::max(p.width_known, width_known(exit(k)));
    for (int k : p.exits)
      if (width_known(exit(k)) == 0) p.width_known = 0;
    const bool sweep = p.order == backward_order::sweep;
    const Var slot("slot");
    const std::vector<Expr> at = sweep ? tile_args({p.d, p.i, slot, kt, qt}) : tile_args({p.d, p.i, kt, qt});
    const auto weighted = [&](const pair_exit& e) { return s_.g.at(e.node).param == static_cast<int>(ir::product_kind::weighted); };
    const auto other_finite = [&](const pair_exit& e) {
      const ir::node& o = s_.g.at(e.other);
      return rules_.all_finite(o.kind == ir::op::transpose ? o.args[0] : e.other);
    };
    Func all, all_finite;
    std::vector<Expr> updates;  // a sweep's: each exit's update of `all`
    if (sweep) {
      all = Func("backward_products" + std::to_string(s_.count++));
      all(at) = 0.0f;
      RDom c(0, tq_, "contracted");  // square tiles
      const int exits = static_cast<int>(p.exits.size());
      if (!p.reductions.empty()) c.where(slot < exits);  // the reductions' slots add tile sums only
      p.contracted.push_back(c);
      // One specialisation for all weighted exits: every other operand finite
      Expr each;
      for (int k : p.exits)
        if (weighted(exit(k))) each = each.defined() ? each && other_finite(exit(k))() : other_finite(exit(k))();
      if (each.defined()) {
        all_finite = Func("all_finite" + std::to_string(s_.count++));
        all_finite() = each;
      }
    }
    for (int k : p.exits) {
      const pair_exit& e = exit(k);
      if (!values.contains(e.pair)) values.emplace(e.pair, pair_values(p, e.pair));
      const Func& v = values.at(e.pair);
      Func product = all;
      if (!sweep) {
        product = Func("backward_product" + std::to_string(s_.count++));
        product(at) = 0.0f;
        p.contracted.emplace_back(0, e.rows ? tk_ : tq_, "contracted");
        all_finite = weighted(e) ? other_finite(e) : Func();
      }
      const RDom& c = p.contracted.back();
      const Expr q0 = qt * tq_, k0 = kt * tk_;
      const Expr q = e.rows ? q0 + p.i : q0 + c.x, kv = e.rows ? k0 + c.x : k0 + p.i;
      std::vector<Expr> pair_at = lead_row_major();
      pair_at.insert(pair_at.end(), {q, kv});
      const Expr x = v(s_.args_of(s_.g.at(e.pair), pair_at));
      const Expr y = other_value(p, e, e.rows ? kv : q, p.d, p.width_known);
      const Expr update = weighted(e) ? accumulate_weighted(product(at), x, y, all_finite()) : product(at) + x * y;
      if (sweep) {
        updates.push_back(update);
      } else {
        product(at) = update;
        p.products.push_back(product);
        p.finite.push_back(all_finite);
      }
    }
    if (!sweep) return;
    all(at) = mux(slot, updates);
    p.products.push_back(all);
    p.finite.push_back(all_finite);
  }

  // Each reduction's sums over the pairs of tile (kt, qt): (cell, lane, kt, qt, lead..., batch),
  // summed over the lanes where read. Key kv adds to lane kv % scatter_lanes, so consecutive pairs
  // adding to one cell do not wait on each other's store, and the lanes can run apart (a GPU
  // thread each); each lane's order stays fixed (its keys in order, row by row). On a CPU, where
  // the cells follow the offset kv - q only, the tile's pairs are summed per offset first (in
  // vectors of keys), and offset o adds to lane o % scatter_lanes.
  void define_tile_sums(backward_pass& p, std::map<int, Func>& values, const Var& kt, const Var& qt) {
    for (int k : p.reductions) {
      const pair_reduction& red = m_.reductions[static_cast<std::size_t>(k)];
      const ir::node& c = s_.g.at(red.pair);
      if (!values.contains(red.pair)) values.emplace(red.pair, pair_values(p, red.pair));
      const Func& value = values.at(red.pair);
      const Var at_cell("cell"), lane("lane");
      const auto pair_at = [&](const Expr& q, const Expr& kv) {
        std::vector<Expr> at = lead_row_major();
        at.insert(at.end(), {q, kv});
        return at;
      };
      Func f("backward_tile_sum" + std::to_string(s_.count++));
      f(tile_args({at_cell, lane, kt, qt})) = 0.0f;
      if (!s_.options.gpu && cells_follow_offset(red)) {
        const int offsets = tq_ + tk_ - 1;  // kv - q from k0 - q0 - (tq - 1) on
        Func diagonals("backward_offset_sum" + std::to_string(s_.count++));
        const Var o("offset");
        diagonals(tile_args({o, kt, qt})) = 0.0f;
        const RDom t({{0, tk_}, {0, tq_}}, "tile_pairs");
        diagonals(tile_args({t.x - t.y + (tq_ - 1), kt, qt})) += value(s_.args_of(c, pair_at(qt * tq_ + t.y, kt * tk_ + t.x)));
        p.offset_sums.push_back(diagonals);
        RDom by_lane(0, (offsets + scatter_lanes - 1) / scatter_lanes, "tile_offsets");  // a lane's offsets inside
        const Expr offset = lane + scatter_lanes * by_lane.x;
        by_lane.where(offset < offsets);
        // An offset past the pairs' (its pairs all past the last query or key, 0) reads the nearest one's cell.
        const Expr kv_minus_q = clamp(kt * tk_ - qt * tq_ + offset - (tq_ - 1), 1 - nq_, nk_ - 1);
        const Expr cell = unsafe_promise_clamped(cell_of(red, pair_at(0, kv_minus_q), false), 0, static_cast<int>(red.cells) - 1);
        f(tile_args({cell, lane, kt, qt})) += diagonals(tile_args({offset, kt, qt}));
      } else {
        RDom t({{0, (tk_ + scatter_lanes - 1) / scatter_lanes}, {0, tq_}}, "tile_pairs");  // a lane's keys inside
        const Expr key = lane + scatter_lanes * t.x;
        if (tk_ % scatter_lanes != 0) t.where(key < tk_);
        const std::vector<Expr> at = pair_at(qt * tq_ + t.y, kt * tk_ + key);
        Expr cell = 0;
        if (red.cells > 1) {  // the cells of the tile's pairs, computed as the other pair values (in vectors)
          const std::vector<Var> vars = s_.new_func("backward_cells", c).second;
          Func cells(Int(32), static_cast<int>(vars.size()) + (c.batched ? 1 : 0), "backward_cells" + std::to_string(s_.count++));
          cells(s_.args_of(c, as_exprs(vars))) = cell_of(red, as_exprs(vars), true);
          p.values.push_back(cells);
          cell = unsafe_promise_clamped(cells(s_.args_of(c, at)), 0, static_cast<int>(red.cells) - 1);  // cell_of clamps
        }
        f(tile_args({cell, lane, kt, qt})) += value(s_.args_of(c, at));
      }
      p.tile_sums.push_back(f);
    }
  }

  // Does every index that picks reduction red's cells read the pair only through its offset?
  bool cells_follow_offset(const pair_reduction& red) const {
    const ir::node& n = s_.g.at(red.node);
    for (std::size_t k = 0; k < n.shape.size(); ++k)
      if (red.follows[k] < 0 && n.kind == ir::op::scatter_add && !reads_offset_only(s_.g, n.args[k + 1])) return false;
    return true;
  }

  // A tile's sum of reduction j of pass p at cell.
  Expr tile_sum(const backward_pass& p, std::size_t j, const Expr& cell, const Expr& kt, const Expr& qt) const {
    Expr sum = p.tile_sums[j](tile_args({cell, 0, kt, qt}));
    for (int lane = 1; lane < scatter_lanes; ++lane) sum += p.tile_sums[j](tile_args({cell, lane, kt, qt}));
    return sum;
  }

  // The cell the pair at (lead..., q, kv) adds to: the picked dims' indices, clamped as gather
  // clamps them, row-major. `clamped`: a pair past the last query or key adds 0, its index is the
  // last one's (else the pair is read as given: cells that follow the offset only).
  Expr cell_of(const pair_reduction& red, std::vector<Expr> at, bool clamped) {
    const ir::node& n = s_.g.at(red.node);
    if (n.kind != ir::op::scatter_add) return 0;  // sum_to: its picked dims are units
    const std::size_t r = at.size();
    if (clamped) {
      at[r - 2] = min(at[r - 2], nq_ - 1);
      at[r - 1] = min(at[r - 1], nk_ - 1);
    }
    const placeholders ph = rules_.score_placeholders(s_.g.at(red.pair), at, Expr());
    Expr cell = 0;
    for (std::size_t k = 0; k < n.shape.size(); ++k) {
      if (red.follows[k] >= 0) continue;
      const auto size = static_cast<int>(n.shape[k].size);
      cell = cell * size + clamp(cast(Int(32), rules_.value(n.args[k + 1], {}, ph)), 0, size - 1);
    }
    return cell;
  }

  int blocks(const pair_reduction& red, int rows) const { return static_cast<int>((red.cells + rows - 1) / rows); }

  // Runs define(p) with p's tile context: its pair nodes per tile, keys unclamped; one Func each
  // on a CPU, stored ones 0 past the last query and key, one per use on a GPU (each then computed
  // where its one reader needs it: flash_backward_gpu_schedule.cpp).
  template <class Define>
  void in_tiles(backward_pass& p, const Define& define) {
    std::map<int, Func> per_tile;
    const auto saved = std::tuple(s_.tile.pairwise, s_.tile.weights, s_.tile.per_tile, s_.tile.keys_clamped,
                                  s_.tile.stored_queries, s_.tile.stored_keys);
    const bool cpu = !s_.options.gpu;
    std::tie(s_.tile.pairwise, s_.tile.weights, s_.tile.per_tile, s_.tile.keys_clamped, s_.tile.stored_queries, s_.tile.stored_keys) =
        std::tuple(&p.pairwise, &w_, cpu ? &per_tile : nullptr, false, cpu ? nq_ : Expr(), cpu ? nk_ : Expr());
    define();
    std::tie(s_.tile.pairwise, s_.tile.weights, s_.tile.per_tile, s_.tile.keys_clamped, s_.tile.stored_queries, s_.tile.stored_keys) = saved;
  }

  // by_query or by_key: a Tuple of the pass's exits per own tile, summed over the other kind's tiles.
  void define_pass(backward_order order) {
    backward_pass p;
    p.order = order;
    const bool rows = order == backward_order::by_query;
    for (int k = 0; k < static_cast<int>(m_.exits.size()); ++k)
      if (m_.exits[static_cast<std::size_t>(k)].rows == rows) p.exits.push_back(k);
    if (p.exits.empty()) return;
    if (b_.passes.empty())  // the first pass sums the reductions
      for (int k = 0; k < static_cast<int>(m_.reductions.size()); ++k) p.reductions.push_back(k);
    p.tile_rows = rows ? tq_ : tk_;
    p.r = RDom(0, rows ? (nk_ + tk_ - 1) / tk_ : (nq_ + tq_ - 1) / tq_, rows ? "key_tiles" : "query_tiles");
    p.r.where(rows ? kept(p.tile, p.r.x) : kept(p.r.x, p.tile));
    const Var kt("kt"), qt("qt");
    in_tiles(p, [&] {
      std::map<int, Func> values;
      define_products(p, values, kt, qt);
      define_tile_sums(p, values, kt, qt);
    });
    const std::vector<Expr> acc_at = tile_args({p.d, p.i, p.tile});
    p.acc = Func(std::string(rows ? "backward_by_query" : "backward_by_key") + std::to_string(s_.count++));
    const Expr kt_at = rows ? Expr(p.r.x) : Expr(p.tile), qt_at = rows ? Expr(p.tile) : Expr(p.r.x);
    std::vector<Expr> terms;
    for (const Func& product : p.products) terms.push_back(product(tile_args({p.d, p.i, kt_at, qt_at})));
    for (std::size_t j = 0; j < p.reductions.size(); ++j)
      for (int b = 0; b < blocks(m_.reductions[static_cast<std::size_t>(p.reductions[j])], p.tile_rows); ++b)
        terms.push_back(tile_sum(p, j, p.i + b * p.tile_rows, kt_at, qt_at));
    const std::size_t n = terms.size();
    std::vector<Expr> zeros(n, 0.0f), next;
    if (n == 1) p.acc(acc_at) = zeros.front();
    else p.acc(acc_at) = Tuple(zeros);
    for (std::size_t k = 0; k < n; ++k) {
      const Expr old = n == 1 ? Expr(p.acc(acc_at)) : p.acc(acc_at)[static_cast<int>(k)];
      next.push_back(old + terms[k]);
    }
    if (n == 1) p.acc(acc_at) = next.front();
    else p.acc(acc_at) = Tuple(next);
    b_.passes.push_back(std::move(p));
  }

  // sweep: every (query tile, key tile) once, in order (key tiles outside: the dK and dV rows of
  // one stay in cache while its query tiles pass), its products added to each exit's rows.
  void define_sweep() {
    backward_pass p;
    p.order = backward_order::sweep;
    for (int k = 0; k < static_cast<int>(m_.exits.size()); ++k) p.exits.push_back(k);
    for (int k = 0; k < static_cast<int>(m_.reductions.size()); ++k) p.reductions.push_back(k);
    p.tile_rows = tq_;  // square tiles (tq_ == tk_)
    int slots = static_cast<int>(m_.exits.size());
    for (const pair_reduction& red : m_.reductions) slots += blocks(red, tq_);
    p.r = RDom({{0, tq_}, {0, slots}, {0, (nq_ + tq_ - 1) / tq_}, {0, (nk_ + tk_ - 1) / tk_}}, "sweep");
    const RVar row = p.r[0], exit = p.r[1], qt = p.r[2], kt = p.r[3];
    std::vector<Expr> rows_of, inside;
    for (const pair_exit& e : m_.exits) {
      rows_of.push_back(e.rows ? qt * tq_ + row : kt * tk_ + row);
      inside.push_back(e.rows ? qt * tq_ + row < nq_ : kt * tk_ + row < nk_);
    }
    for (const pair_reduction& red : m_.reductions)
      for (int b = 0; b < blocks(red, tq_); ++b) {
        rows_of.push_back(row);  // cell row + b·tq_, in its block's slot
        inside.push_back(row + b * tq_ < static_cast<int>(red.cells));
      }
    p.r.where(kept(qt, kt) && mux(exit, inside));
    const Var kv_tile("kt"), q_tile("qt");
    in_tiles(p, [&] {
      std::map<int, Func> values;
      define_products(p, values, kv_tile, q_tile);
      define_tile_sums(p, values, kv_tile, q_tile);
    });
    p.acc = Func("backward_sweep" + std::to_string(s_.count++));
    p.acc(tile_args({p.d, p.i, p.tile})) = 0.0f;
    std::vector<Expr> contributions;
    for (std::size_t k = 0; k < p.exits.size(); ++k) contributions.push_back(p.products.front()(tile_args({p.d, row, exit, kt, qt})));
    for (std::size_t j = 0; j < p.reductions.size(); ++j)
      for (int b = 0; b < blocks(m_.reductions[j], tq_); ++b)
        contributions.push_back(tile_sum(p, j, row + b * tq_, kt, qt));
    const std::vector<Expr> at = tile_args({p.d, mux(exit, rows_of), exit});
    p.acc(at) = p.acc(at) + mux(exit, contributions);
    b_.passes.push_back(std::move(p));
  }

  // Each exit node's Func: its sums, read at (d, row % tile, row / tile) (a sweep: (d, row, exit)),
  // inline: its readers read the sums in place.
  void define_exits() {
    for (int k = 0; k < static_cast<int>(m_.exits.size()); ++k) {
      const pair_exit& e = m_.exits[static_cast<std::size_t>(k)];
      const backward_pass* pass = nullptr;
      int slot = 0;
      for (const backward_pass& p : b_.passes)
        for (std::size_t j = 0; j < p.exits.size(); ++j)
          if (p.exits[j] == k) pass = &p, slot = static_cast<int>(j);
      const ir::node& n = s_.g.at(e.node);
      auto [f, vars] = s_.new_func("exit", n);
      const std::vector<Expr> at = as_exprs(vars);
      const std::size_t r = at.size();
      const Expr row = e.other_left ? at[r - 1] : at[r - 2], d = e.other_left ? at[r - 2] : at[r - 1];
      const bool sweep = pass->order == backward_order::sweep;
      const int tile = e.rows ? tq_ : tk_;
      std::vector<Expr> a = sweep ? std::vector<Expr>{d, row, slot} : std::vector<Expr>{d, row % tile, row / tile};
      for (std::size_t j = r - 2; j-- > 0;) a.push_back(at[j]);
      if (b_.batched) a.push_back(s_.batch);
      f(s_.args_of(n, at)) = sweep || pass->acc.outputs() == 1 ? Expr(pass->acc(a)) : pass->acc(a)[slot];
      s_.funcs.emplace(e.node, f);
    }
  }

  // Each reduction's node: its sums read at cell (slot cell / rows, row cell % rows), summed in a
  // fixed order over what it does not follow: the pass's tiles, lead dims, the batch.
  void define_reductions() {
    for (const backward_pass& p : b_.passes) {
      const bool sweep = p.order == backward_order::sweep;
      int slot = static_cast<int>(p.exits.size());
      for (std::size_t j = 0; j < p.reductions.size(); ++j) {
        const pair_reduction& red = m_.reductions[static_cast<std::size_t>(p.reductions[j])];
        const ir::node& n = s_.g.at(red.node);
        const ir::node& c = s_.g.at(red.pair);
        auto [f, vars] = s_.new_func("reduction", n);
        const std::vector<Expr> at = as_exprs(vars);
        Expr cell = 0;
        for (std::size_t k = 0; k < n.shape.size(); ++k)
          if (red.follows[k] < 0) cell = cell * static_cast<int>(n.shape[k].size) + at[k];
        Region summed;
        if (!sweep) summed.emplace_back(0, p.order == backward_order::by_query ? (nq_ + tq_ - 1) / tq_ : (nk_ + tk_ - 1) / tk_);
        const std::size_t lead_dims = c.shape.size() - 2;
        std::vector<int> lead_at(lead_dims, -1);  // per lead dim (row-major): n's dim it follows, or -1: summed
        for (std::size_t k = 0; k < n.shape.size(); ++k)
          if (red.follows[k] >= 0) lead_at[static_cast<std::size_t>(red.follows[k])] = static_cast<int>(k);
        for (std::size_t l = 0; l < lead_dims; ++l)
          if (lead_at[l] < 0) summed.emplace_back(0, s_.extent(c.shape[l].name, c.shape[l].size));
        const bool batch_summed = b_.batched && !n.batched;
        if (batch_summed) summed.emplace_back(0, s_.batch_extent());
        if (summed.empty()) summed.emplace_back(0, 1);
        const RDom r(summed, "reduced");
        int next = sweep ? 0 : 1;
        std::vector<Expr> a{0, cell % p.tile_rows};
        if (sweep) a.push_back(slot + cell / p.tile_rows);
        else a.push_back(r[0]);
        for (std::size_t l = lead_dims; l-- > 0;)
          a.push_back(lead_at[l] >= 0 ? at[static_cast<std::size_t>(lead_at[l])] : Expr(r[next++]));
        if (b_.batched) a.push_back(batch_summed ? Expr(r[next]) : Expr(s_.batch));
        Expr v;
        if (sweep) {
          v = p.acc(a);
        } else {
          std::vector<Expr> elements;
          for (int b = 0; b < blocks(red, p.tile_rows); ++b) elements.push_back(p.acc(a)[slot + b]);
          v = elements.size() == 1 ? elements.front() : mux(cell / p.tile_rows, elements);
        }
        slot += blocks(red, p.tile_rows);
        f(s_.args_of(n, at)) = 0.0f;
        f(s_.args_of(n, at)) += v;
        s_.funcs.emplace(red.node, f);
        s_.out.materialised.push_back(red.node);
        s_.out.stages.push_back({f, s_.halide_vars(vars, n.batched), stage::sum, {}, {}, {}, {}, s_.static_extents(n), {}});
      }
    }
  }

  generic_lowering& rules_;
  lowering_state& s_;
  const backward_match& m_;
  const ir::node& w_;
  backward_funcs b_;
  Expr nq_, nk_;
  int tq_ = 0, tk_ = 0;
  bool sweep_ = false;
  int output_ = -1;     // the node the row term reads O from: the saved output or the combine
  int saved_lse_ = -1;  // the saved lse's terminal, or -1: lse_, from the forward in this pipeline
  Func lse_;
};

}  // namespace

void lower_fused_backward(generic_lowering& rules, lowering_state& s, const backward_match& m) { builder(rules, s, m).run(); }

}  // namespace attn::gen
