#include "generators/fused/flash_algorithm.hpp"

#include <limits>
#include <stdexcept>
#include <string>
#include "generators/fused/mask_bounds.hpp"
#include "generators/lowering/nonfinite.hpp"
#include "generators/lowering/split_halves.hpp"

namespace attn::gen {

using namespace Halide;

namespace {

const Expr none = no_score();

// max(at(0), ..., at(n - 1)) as a tree of halves: max(at(i), at(i + ⌈n/2⌉)), then the same over
// those ⌈n/2⌉. Each level is one operation across vector lanes (a vector max of two halves); strict,
// so that no reassociation turns it back into a chain of n - 1 dependent maxes.
template <class At>
Expr max_of_halves(int n, const At& at) {
  std::vector<Expr> m;
  for (int i = 0; i < n; ++i) m.push_back(at(i));
  for (; n > 1; n = (n + 1) / 2)
    for (int i = 0; i < n / 2; ++i) m[i] = max(m[i], m[i + (n + 1) / 2]);
  return strict_float(m.front());
}

class builder {
 public:
  builder(const flash_problem& p, int q_tile, int kv_tile, int partial_tile, int vector, int state_lanes,
          bool tiles_from_band, bool blocked_state)
      : p_(p) {
    f_.q_tile = q_tile;
    f_.kv_tile = kv_tile;
    f_.full.tile = kv_tile;
    f_.partial.tile = partial_tile > 0 ? partial_tile : kv_tile;
    if (kv_tile % vector != 0 || kv_tile % f_.partial.tile != 0 || f_.partial.tile % vector != 0)
      throw std::invalid_argument("fused attention: key tiles of " + std::to_string(kv_tile) + " and partial tiles of " +
                                  std::to_string(f_.partial.tile) + " keys do not fit vectors of " + std::to_string(vector) +
                                  " (partial_tile must divide kv_tile, both multiples of vector)");
    f_.vector = vector;
    f_.batch = p.batch;
    f_.batched = p.batched;
    f_.dv_size = p.dv;
    f_.dv_known = p.dv_known;
    f_.nk = p.nk;
    f_.dv_extent = p.dv_extent;
    f_.few_queries = p.few_queries;
    // Few queries: one tile of exactly N_Q rows (its register tiles guard the rows past N_Q: one
    // query computed as few_rows = 6 rows was 1.2-1.35x slower, 6 queries as 6 guarded rows 1.07x).
    f_.q_rows = p.few_queries.defined() ? simplify(select(p.few_queries, clamp(p.nq, 1, p.few_rows), q_tile)) : Expr(q_tile);
    // V's width known when compiling, static or bound (a bound width packs as a static one does).
    const bool packs = p.normalised && p.dv_known > 0 && state_lanes > 0 && p.dv_known % state_lanes == 0;
    f_.state_lanes = packs ? state_lanes : 0;
    f_.blocked_state = packs && blocked_state;
    f_.dv = Var("dv");
    f_.q = Var("q");
    f_.qi = Var("qi");
    f_.qt = Var("qt");
    f_.kvi = Var("kvi");
    f_.lane = Var("lane");
    f_.t = Var("t");
    for (int k = 0; k < p.lead; ++k) f_.lead.emplace_back("lead" + std::to_string(k));  // innermost first
    // Without a mask the only partial tile is the last (keys past the end): no pass over V for it.
    if (p.value_exponents.defined() && !keeps_every_key()) {
      f_.value_exponents = p.value_exponents;
      f_.values_finite = Func("flash_values_finite" + p.suffix);
      const RDom d(0, p.dv_extent, "value_columns" + p.suffix);
      f_.values_finite() = maximum(p.value_exponents(d)) < Expr(exponent_of_nonfinite);
    }
    // Where the query tile's key tiles start: its first kept key, a whole vector (0 for causal,
    // key padding, no mask; a window's band start). Solved once, read by every tile's definition.
    if (tiles_from_band)
      origin_ = first_kept_key(keep_at(mask_q, mask_kv), mask_q, mask_kv, first_query(), last_query(), p_.nk, f_.vector);
  }

  flash_funcs run() {
    const int pt = f_.partial.tile;
    const Expr tiles = (p_.nk + (pt - 1)) / pt;
    define_step(f_.full, "full", false);
    define_step(f_.partial, "partial", true);

    // Full tiles: every key kept. Partial tiles: some kept. Halide turns the predicates into
    // loop bounds where it can and guards each tile's work with them otherwise, so a skipped
    // tile costs a comparison.
    // Full tiles lie inside the keys: bounds inference sees no key past the last (T bound to 9).
    f_.full.r = RDom(0, p_.nk / f_.kv_tile, "full_tile" + p_.suffix);
    const kv_tile_ranges full = tile_ranges(f_.full.r.x, f_.kv_tile);
    f_.full.r.where(full.lo <= f_.full.r.x && f_.full.r.x < full.hi && full.all);
    // Partial tiles: those with a kept key inside a full-size tile that is not a full tile.
    f_.partial.r = RDom(0, tiles, "partial_tile" + p_.suffix);
    const RVar& tp = f_.partial.r.x;
    const kv_tile_ranges partial = tile_ranges(tp, pt);
    const Expr enclosing_full = tile_ranges(tp / (f_.kv_tile / pt), f_.kv_tile).all;
    f_.partial.r.where(partial.lo <= tp && tp < partial.hi && partial.some && !enclosing_full);
    f_.band = band();
    f_.diagonal = diagonal();

    f_.state = Func("flash_state" + p_.suffix);
    if (p_.normalised) {
      std::vector<Expr> start{none, 0.0f};
      start.resize(2 + acc_elements(), 0.0f);
      f_.state(state_args()) = Tuple(start);
    } else {
      f_.state(state_args()) = 0.0f;
    }
    fold(f_.full, f_.full.r.x, 1);
    fold(f_.partial, tp, 2);

    // The result per query tile, `tiles` (dv, qi, qt, lead..., batch), and the output read off it.
    // The CPU schedule inlines `tiles`; a GPU schedule computes it (its blocks then match the
    // state's query tiles whatever the output's min) and copies it out.
    f_.tiles = Func("flash_tiles" + p_.suffix);
    f_.output = Func("flash_output" + p_.suffix);
    std::vector<Expr> out{f_.dv, f_.q};
    for (const Var& v : f_.lead) out.push_back(v);
    if (f_.batched) out.push_back(f_.batch);
    std::vector<Expr> at{f_.dv, f_.q % f_.q_rows, f_.q / f_.q_rows};
    for (const Var& v : f_.lead) at.push_back(v);
    if (f_.batched) at.push_back(f_.batch);
    const std::vector<Expr> result = row_args(f_.dv);
    const auto stored = [&](const Expr& x) { return p_.stored ? p_.stored(x) : x; };
    if (!p_.normalised) {  // Σ f(S)·V as it is: no normalisation (a row without a kept key gives 0)
      f_.tiles(result) = f_.state(row_args(slot_of(f_.dv)));
      f_.output(out) = stored(f_.tiles(at));
      return f_;
    }
    // The running max and sum are the same in every column: the row's sum is read once, at column 0.
    std::vector<Expr> row0 = state_args();
    row0.front() = 0;
    const Expr row_sum = f_.state(row0)[1];
    // A row with no kept key has sum 0 and gives 0; a NaN sum stays NaN.
    const Expr value = accumulated(slot_of(f_.dv)) * reciprocal_or_zero(row_sum);
    if (!p_.with_lse) {
      f_.tiles(result) = value;
      f_.output(out) = stored(f_.tiles(at));
      return f_;
    }
    f_.tiles(result) = Tuple(value, log_sum_exp(f_.state(row0)[0], row_sum));
    f_.rows = Func("flash_rows" + p_.suffix);
    f_.rows(out) = f_.tiles(at);
    f_.output(out) = stored(f_.rows(out)[0]);
    std::vector<Expr> row(out.begin() + 1, out.end());
    f_.lse = Func("flash_lse" + p_.suffix);
    std::vector<Expr> at_row = row;
    at_row.insert(at_row.begin(), 0);
    f_.lse(row) = f_.rows(at_row)[1];
    return f_;
  }

 private:
  std::vector<Expr> lead_row_major() const { return {f_.lead.rbegin(), f_.lead.rend()}; }

  // (first..., qi, t, qt, lead..., batch) with t given.
  std::vector<Expr> tile_args(std::vector<Expr> first, const Expr& t) const {
    first.push_back(f_.qi);
    first.push_back(t);
    first.push_back(f_.qt);
    for (const Var& v : f_.lead) first.push_back(v);
    if (f_.batched) first.push_back(f_.batch);
    return first;
  }

  // (column, qi, qt, lead..., batch)
  std::vector<Expr> row_args(const Expr& column) const {
    std::vector<Expr> a{column, f_.qi, f_.qt};
    for (const Var& v : f_.lead) a.push_back(v);
    if (f_.batched) a.push_back(f_.batch);
    return a;
  }
  std::vector<Expr> state_args() const { return row_args(f_.state_column()); }

  // V's column that the state's column `slot` holds, and the slot of column d (flash_problem::split_columns).
  Expr column_of(const Expr& slot) const { return p_.split_columns == 0 ? slot : split_halves(slot, p_.split_columns); }
  Expr slot_of(const Expr& d) const { return p_.split_columns == 0 ? d : split_halves_slot(d, p_.split_columns); }

  // Accumulator elements of the state: one, or V's width in lane vectors (packed).
  int acc_elements() const { return f_.state_lanes > 0 ? p_.dv_known / f_.state_lanes : 1; }

  // The state's accumulator at V's column d (of the row at state_args' qi, qt, ...).
  Expr accumulated(const Expr& d) const {
    const int lanes = f_.state_lanes;
    if (lanes == 0) return f_.state(row_args(d))[2];
    // Interleaved: where d's vector of lanes is aligned (the output's, from column 0), d / lanes is
    // one element. Blocked: a lane's columns are adjacent.
    const int per_lane = acc_elements();
    const Expr lane = f_.blocked_state ? d / per_lane : d % lanes, element = f_.blocked_state ? d % per_lane : d / lanes;
    std::vector<Expr> elements;
    for (int j = 0; j < per_lane; ++j) elements.push_back(f_.state(row_args(lane))[2 + j]);
    const Expr packed = mux(element, elements);
    // A width bound (not static) leaves the output unbounded: a column past it is an error, as an
    // unpacked state bounded to that width makes it, not a column of another vector (mux clamps).
    // Blocked (a GPU's): the schedule bounds the result to the width, checked on the host.
    if (p_.dv > 0 || f_.blocked_state) return packed;
    return require(d < p_.dv_known, packed, "fused attention: the output has more columns than V's width,",
                   p_.dv_known, "bound when the kernel was built");
  }

  // The mask's predicate at query q and key kv (the query's lead dims as the tile's).
  Expr keep_at(const Var& q, const Var& kv) const {
    std::vector<stage> unused;
    return p_.score(lead_row_major(), q, kv, unused).keep;
  }
  Expr first_query() const { return f_.qt * f_.q_rows; }
  Expr last_query() const { return min(first_query() + f_.q_rows, p_.nq) - 1; }
  kv_tile_ranges tile_ranges(const Expr& t, int tile) const {
    return kv_tiles_kept(keep_at(mask_q, mask_kv), mask_q, mask_kv, first_query(), last_query(), p_.nk, tile, t, origin_);
  }
  bool keeps_every_key() const { return is_const_one(simplify(keep_at(mask_q, mask_kv))); }
  bool diagonal() const { return kept_edge_follows_query(keep_at(mask_q, mask_kv), mask_q, mask_kv); }
  std::int64_t band() const { return kept_band(keep_at(mask_q, mask_kv), mask_q, mask_kv); }

  // A tile's first key: origin + t·tile. A partial tile that would pass the last key is moved back
  // to end at it (its keys before its own first are masked, own_key): the per-tile Funcs then have
  // a static size and read no key past the last, so the products' inner loops carry no guards
  // (2-3x faster than reading each key clamped). Keys fewer than a tile: known when compiling, keys
  // past the last are read at the last one (read_key); known at the call only, the tile starts
  // at key 0 and reads past the last key (inputs are read clamped, fused_lowering.cpp; Kᵀ's storage is
  // padded, flash_cpu_schedule), the scores there masked. Full tiles lie inside the keys; from an
  // origin the same clamp (a no-op there) keeps bounds inference near them.
  Expr own_first_key(const flash_step& st) const { return origin_ + f_.t * st.tile; }
  Expr first_key(const flash_step& st, bool partial) const {
    const Expr own = own_first_key(st);
    const bool clamped = partial ? !clamps_keys(st) : !is_const_zero(origin_);
    return clamped ? max(min(own, p_.nk - st.tile), 0) : own;
  }
  bool clamps_keys(const flash_step& st) const {
    const auto keys = Internal::as_const_int(p_.nk);
    return keys && *keys < st.tile;
  }
  Expr read_key(const flash_step& st, bool partial, const Expr& kv) const {
    return partial && clamps_keys(st) ? min(kv, p_.nk - 1) : kv;
  }

  void define_step(flash_step& st, const std::string& step, bool partial) {
    const std::string kind = step + p_.suffix;
    const int v = f_.vector;
    // Whole tiles, past the last row. Rows past the last query are computed from the last row
    // (the per-tile products read their left operand inside it, fused_lowering.cpp) and never stored.
    // Full tiles lie inside the keys (mask_bounds.hpp); partial ones see first_key.
    const Expr q = f_.qt * f_.q_rows + f_.qi;
    const Expr kv = first_key(st, partial) + f_.kvi;
    const flash_problem::scored sc = p_.score(lead_row_major(), q, read_key(st, partial, kv), st.pairwise);
    const Expr own_key = own_first_key(st) <= kv && kv < p_.nk;  // partial tiles: the tile's keys that exist
    st.score = Func(kind + "_score");
    st.keys = RDom(0, st.tile, kind + "_keys");
    if (!p_.normalised) {
      // The weights f(S) themselves: 0 for keys the masks remove (and past the last key).
      const Expr w = partial ? select(exact_predicate(sc.keep) && own_key, sc.score, 0.0f) : sc.score;
      st.score(tile_args({f_.kvi}, f_.t)) = w;
      define_pv(st, kind, st.score, partial);
      return;
    }
    st.score(tile_args({f_.kvi}, f_.t)) = with_strict_score(sc.score, [&](const Expr& score) {
      const Expr keep = is_kept_score(score);
      return select(partial ? exact_predicate(sc.keep) && own_key && keep : keep, score, none);
    });

    st.in_lane = RDom(0, st.tile / v, kind + "_in_lane");
    st.lanes = RDom(0, v, kind + "_lanes");
    const Expr along_lane = st.in_lane.x * v + f_.lane;

    st.max_lanes = Func(kind + "_max_lanes");
    st.max_lanes(tile_args({f_.lane}, f_.t)) = none;
    st.max_lanes(tile_args({f_.lane}, f_.t)) = max(st.max_lanes(tile_args({f_.lane}, f_.t)), st.score(tile_args({along_lane}, f_.t)));
    // Across the lanes as a tree of halves, not a chain of v dependent maxes (on a CPU: 16 scalar
    // maxes a row and tile, 7.6% of a sliding window's time; 1.03-1.06x for it as this tree).
    st.max = Func(kind + "_max");
    st.max(tile_args({}, f_.t)) = max_of_halves(v, [&](int lane) { return st.max_lanes(tile_args({lane}, f_.t)); });

    const Expr s = st.score(tile_args({f_.kvi}, f_.t));
    st.prob = Func(kind + "_prob");
    // A masked score (no_score) weighs 0: below its row's max by more than exp_below_max keeps, or,
    // in a row of the tile without a kept key (max no_score), less the largest float (-inf).
    const Expr row_max = st.max(tile_args({}, f_.t));
    st.prob(tile_args({f_.kvi}, f_.t)) = exp_below_max(s, select(is_no_score(row_max), -no_score(), row_max));

    st.sum_lanes = Func(kind + "_sum_lanes");
    st.sum_lanes(tile_args({f_.lane}, f_.t)) = 0.0f;
    st.sum_lanes(tile_args({f_.lane}, f_.t)) += st.prob(tile_args({along_lane}, f_.t));
    st.sum = Func(kind + "_sum");
    st.sum(tile_args({}, f_.t)) = 0.0f;
    st.sum(tile_args({}, f_.t)) += st.sum_lanes(tile_args({st.lanes.x}, f_.t));

    define_pv(st, kind, st.prob, partial);
  }

  // P·V of one tile, P the probabilities (or softmax-free weights). In partial tiles a masked
  // key's value is never multiplied (0·NaN would be NaN).
  void define_pv(flash_step& st, const std::string& kind, const Func& weights, bool partial) {
    st.pv = Func(kind + "_pv");
    if (!on_pairs(partial)) return define_float_pv(st, st.pv, weights, partial);
    define_paired_pv(st, kind, weights);
    const std::vector<Expr> pv_at = tile_args({f_.dv}, f_.t);
    if (!partial) {
      st.pv(pv_at) = st.paired_pv(pv_at);
      return;
    }
    // A masked key weighs exactly 0: times a finite value, 0 on the pairs too; otherwise guarded.
    st.guarded_pv = Func(kind + "_guarded_pv");
    define_float_pv(st, st.guarded_pv, weights, partial);
    st.pairs_fit = f_.values_finite() && p_.nk % st.tile == 0;
    st.pv(pv_at) = select(st.pairs_fit, st.paired_pv(pv_at), st.guarded_pv(pv_at));
  }

  void define_float_pv(const flash_step& st, Func& pv, const Func& weights, bool partial) {
    const Expr p = weights(tile_args({st.keys.x}, f_.t));
    const Expr value = p_.value(lead_row_major(), read_key(st, partial, first_key(st, partial) + st.keys.x), column_of(f_.dv), !partial);
    const std::vector<Expr> pv_at = tile_args({f_.dv}, f_.t);
    pv(pv_at) = 0.0f;
    if (partial) {
      const Expr finite = f_.values_finite.defined() ? Expr(f_.values_finite()) : Internal::const_false();
      pv(pv_at) = accumulate_weighted(pv(pv_at), p, value, finite);
    } else {
      pv(pv_at) += p * value;
    }
  }

  // P·V on bfloat16 pairs of keys (flash_problem::value_pairs): full tiles, and partial ones where
  // V's finiteness is checked (values_finite; flash_step::pairs_fit). A tile on pairs starts at an
  // even key: its origin a whole vector, its size a multiple of one, and no partial tile moved back
  // to end at the last key (the keys a whole number of them).
  bool on_pairs(bool partial) const {
    return p_.normalised && p_.value_pairs && (!partial || f_.values_finite.defined());
  }

  // P rounded to bfloat16 once per tile, times V's pairs.
  void define_paired_pv(flash_step& st, const std::string& kind, const Func& prob) {
    st.rounded_prob = Func(kind + "_rounded_prob");
    st.rounded_prob(tile_args({f_.kvi}, f_.t)) = cast(BFloat(16), prob(tile_args({f_.kvi}, f_.t)));
    st.key_pairs = RDom({{0, 2}, {0, st.tile / 2}}, kind + "_key_pairs");
    const Expr pair = own_first_key(st) / 2 + st.key_pairs.y;
    const Expr p = st.rounded_prob(tile_args({2 * st.key_pairs.y + st.key_pairs.x}, f_.t));
    st.paired_pv = Func(kind + "_paired_pv");
    const std::vector<Expr> pv_at = tile_args({f_.dv}, f_.t);
    st.paired_pv(pv_at) = 0.0f;
    st.paired_pv(pv_at) += cast<float>(p) * cast<float>(p_.value_pairs(lead_row_major(), pair, f_.dv, st.key_pairs.x));
  }

  // state <- state ⊕ tile t: rescale both sides to the larger max (one exp: one factor is 1).
  void fold(flash_step& st, const Expr& t, int update) {
    st.update = update;
    if (!p_.normalised) {  // a plain sum over the key tiles
      f_.state(state_args()) = f_.state(state_args()) + st.pv(tile_args({f_.dv}, t));
      return;
    }
    const FuncRef old = f_.state(state_args());
    const Expr m = old[0], l = old[1];
    const Expr tile_max = st.max(tile_args({}, t));
    // The same factor rescales the sum and the accumulator, so its rounding cancels in acc / sum:
    // the fast exp is exact enough. A NaN here needs no care: the tile's sum is NaN already.
    const Expr e = fast_exp(-min(abs(tile_max - m), 80.0f));
    const Expr tile_wins = tile_max > m;
    const Expr scale_old = select(tile_wins, e, 1.0f), scale_tile = select(tile_wins, 1.0f, e);
    std::vector<Expr> next{max(m, tile_max), l * scale_old + st.sum(tile_args({}, t)) * scale_tile};
    for (int j = 0; j < acc_elements(); ++j) {
      const Expr column = f_.state_lanes > 0 ? f_.state_column(f_.lane, j) : Expr(f_.dv);
      next.push_back(old[2 + j] * scale_old + st.pv(tile_args({column}, t)) * scale_tile);
    }
    f_.state(state_args()) = Tuple(next);
  }

  const flash_problem& p_;
  flash_funcs f_;
  const Var mask_q{"mask_q"}, mask_kv{"mask_kv"};  // the query and key a mask's predicate is analysed at
  Expr origin_ = 0;  // the query tile's first key tile starts here (flash_attention's tiles_from_band)
};

}  // namespace

Expr flash_funcs::state_column(const Expr& lane, int j) const {
  if (!blocked_state) return lane + j * state_lanes;
  return lane * (dv_known / state_lanes) + j;
}

flash_funcs flash_attention(const flash_problem& p, int q_tile, int kv_tile, int partial_tile, int vector,
                            int state_lanes, bool tiles_from_band, bool blocked_state) {
  return builder(p, q_tile, kv_tile, partial_tile, vector, state_lanes, tiles_from_band, blocked_state).run();
}

}  // namespace attn::gen
