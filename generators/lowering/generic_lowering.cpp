#include "generators/lowering/generic_lowering.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <utility>
#include "generators/lowering/fast_math.hpp"
#include "generators/fused/fused_lowering.hpp"
#include "generators/lowering/lse_lowering.hpp"
#include "generators/lowering/nonfinite.hpp"
#include "generators/lowering/offset_tables.hpp"
#include "generators/lowering/split_halves.hpp"
#include "generators/lowering/nonfinite_lowering.hpp"

namespace attn::gen {

using namespace Halide;

namespace {

// a mod b as the DSL defines it, a - b·floor(a/b) (Halide's % on floats), but never through
// Halide's float %: its simplifier rewrites x - x % c to x (Halide 21), which turned
// block_causal's (kv - kv % 4) / 4 <= (q - q % 4) / 4 into causal. Integers (indices, and
// integral constants, which reach here as floats) use integer %, where that rewrite is exact.
Expr remainder(Expr a, Expr b) {
  const std::optional<double> c = Internal::as_const_float(b);
  if (a.type().is_int() && c && *c == std::floor(*c) && *c != 0 && std::abs(*c) < 2147483647.0)
    b = Internal::make_const(a.type(), static_cast<std::int64_t>(*c));
  if (a.type().is_int() && b.type().is_int()) return a % b;
  a = cast(Float(32), a);
  b = cast(Float(32), b);
  return a - b * Halide::floor(a / b);
}

// floor(a / b). For integers (indices, and integral constants) Halide's integer division,
// which is exact: a float a / b may become a·(1/b) fused into a neighbouring subtraction, and
// 18 / 6 then compares as 3.0000001 (NATTEN's rows lost a neighbour that way).
Expr floor_div(Expr a, Expr b) {
  const std::optional<double> c = Internal::as_const_float(b);
  if (a.type().is_int() && c && *c == std::floor(*c) && *c != 0 && std::abs(*c) < 2147483647.0)
    b = Internal::make_const(a.type(), static_cast<std::int64_t>(*c));
  if (a.type().is_int() && b.type().is_int()) return a / b;
  return Halide::floor(cast(Float(32), a) / cast(Float(32), b));
}

}  // namespace

Expr generic_lowering::arg(const ir::node& n, std::size_t k, const std::vector<Expr>& idx, const placeholders& ph) {
  return value(n.args[k], s_.broadcast_index(n.args[k], idx), ph);
}

// Does node i read a tensor's values or the score (not only indices, dims and constants)?
bool generic_lowering::reads_float_data(int i) const {
  const ir::node& n = s_.g.at(i);
  switch (n.kind) {
    case ir::op::input: case ir::op::weight: return true;
    case ir::op::int_input: case ir::op::constant: case ir::op::dim_value: return false;
    case ir::op::placeholder: return n.param == static_cast<int>(ir::placeholder::score);
    default: return std::any_of(n.args.begin(), n.args.end(), [&](int a) { return reads_float_data(a); });
  }
}

// x / y. Data (a score, a tensor's values) divided by a constant is a product with its
// reciprocal, within an ulp of the quotient and alike for ±inf, NaN and 0 (softcap's score / cap:
// a vector division per score made softcap + causal 1.04-1.06x slower). Index arithmetic keeps
// its exact division (q_idx / 6 in a predicate must keep the same keys as the user's formula).
Expr generic_lowering::divided(const ir::node& n, const Expr& x, const Expr& y) const {
  const ir::node& divisor = s_.g.at(n.args[1]);
  if (divisor.kind == ir::op::constant && reads_float_data(n.args[0])) {
    const float c = static_cast<float>(divisor.value), r = 1.0f / c;
    if (std::isnormal(c) && std::isnormal(r)) return x * r;
  }
  return x / y;
}

// A fused backward's tiles run past the last query and key (their pair values there are
// discarded); a node outside the tiles that they read there is read at its last row instead when
// its size is fixed when compiling (a product's Func is bounded to it; one sized at the call is
// computed for the rows read). A transpose is computed for the rows read, whatever its size, and
// reads its own operands so (define_transpose): the tiles read it in vectors of keys, which a
// clamp would make gathers (2x slower).
std::vector<Expr> generic_lowering::past_the_end_clamped(const ir::node& n, std::vector<Expr> idx) const {
  if (s_.tile.keys_clamped || in_fused_tile(s_, n) || n.kind == ir::op::transpose) return idx;
  for (std::size_t k = 0; k < n.shape.size() && k < idx.size(); ++k) {
    const ir::dim& d = n.shape[k];
    if (s_.tiled_dims.contains(d.name) && (d.size > 0 || s_.bound.contains(d.name))) idx[k] = clamp(idx[k], 0, s_.extent(d.name, d.size) - 1);
  }
  return idx;
}

Expr generic_lowering::value(int i, const std::vector<Expr>& idx, const placeholders& ph) {
  using ir::op;
  const ir::node& n = s_.g.at(i);
  if (auto given = s_.tile.given.find(i); given != s_.tile.given.end()) return given->second(idx);
  if (ir::is_materialised(n.kind)) return func(i)(s_.args_of(n, past_the_end_clamped(n, idx)));
  if (!tabulating_ && ph.scores != nullptr && tabulated_by_offset(s_.g, i)) return offset_table_value(i, ph);
  auto a = [&](std::size_t k) { return arg(n, k, idx, ph); };
  switch (n.kind) {
    case op::input: case op::weight: case op::int_input:
      return s_.read(i, s_.args_of(n, clamped_to_tensor(s_, i, idx)));
    case op::constant: return Internal::make_const(Float(32), n.value);
    case op::dim_value: return cast<float>(s_.extent(n.name, static_cast<std::int64_t>(n.value)));
    case op::placeholder: {
      const Expr* which[] = {&ph.score, &ph.q_idx, &ph.kv_idx, &ph.head};
      return *which[n.param];
    }
    case op::matmul: case op::softmax: case op::transpose: break;  // materialised: read from func(i) above
    case op::neg: return -a(0);
    case op::tanh: return vector_tanh(a(0));
    case op::exp: return Halide::exp(a(0));
    case op::log: return Halide::log(a(0));
    case op::abs: return cast(Float(32), Halide::abs(a(0)));
    case op::sqrt: return Halide::sqrt(a(0));
    case op::rsqrt: return 1.0f / Halide::sqrt(a(0));
    case op::sigmoid: return gen::sigmoid(a(0));
    case op::relu: return gen::relu(a(0));
    case op::logical_not: return !a(0);
    case op::add: return a(0) + a(1);
    case op::sub: return a(0) - a(1);
    case op::mul: return a(0) * a(1);
    case op::div: return divided(n, a(0), a(1));
    case op::mod: return remainder(a(0), a(1));
    case op::floor_div: return floor_div(a(0), a(1));
    case op::minimum: return Halide::min(a(0), a(1));
    case op::maximum: return Halide::max(a(0), a(1));
    case op::lt: return a(0) < a(1);
    case op::le: return a(0) <= a(1);
    case op::gt: return a(0) > a(1);
    case op::ge: return a(0) >= a(1);
    case op::eq: return a(0) == a(1);
    case op::ne: return a(0) != a(1);
    case op::logical_and: return a(0) && a(1);
    case op::logical_or: return a(0) || a(1);
    case op::select: return Halide::select(a(0), a(1), a(2));
    case op::mask: {
      Expr s = a(0);
      if (s_.tile.transparent.contains(i)) return s;  // applied as the fused score's `keep` instead
      return masked_score(arg(n, 1, idx, score_placeholders(n, idx, s)), s);
    }
    case op::modify: {
      // modify(mask(S, p), f) runs as mask(modify(S, f), p): masked scores stay masked,
      // whatever order the two were written in.
      std::vector<int> masks;
      int inner = n.args[0];
      while (s_.g.at(inner).kind == op::mask) masks.push_back(inner), inner = s_.g.at(inner).args[0];
      Expr s = value(inner, idx, ph);
      Expr f = cast(Float(32), arg(n, 1, idx, score_placeholders(n, idx, s)));
      for (int m : masks)
        if (!s_.tile.transparent.contains(m)) f = masked_score(arg(s_.g.at(m), 1, idx, score_placeholders(s_.g.at(m), idx, s)), f);
      return f;
    }
    case op::split_heads: {  // (.., h, t, dh) reads (.., t, h*Dh + dh)
      std::size_t r = idx.size();
      Expr width = static_cast<int>(n.shape.back().size);
      std::vector<Expr> c(idx.begin(), idx.end() - 3);
      c.push_back(idx[r - 2]);
      c.push_back(idx[r - 3] * width + idx[r - 1]);
      return value(n.args[0], c, ph);
    }
    case op::concat_heads: {  // (.., t, d) reads (.., d / Dh, t, d % Dh)
      std::size_t r = idx.size();
      Expr width = static_cast<int>(s_.g.at(n.args[0]).shape.back().size);
      std::vector<Expr> c(idx.begin(), idx.end() - 2);
      c.push_back(idx[r - 1] / width);
      c.push_back(idx[r - 2]);
      c.push_back(idx[r - 1] % width);
      return value(n.args[0], c, ph);
    }
    case op::gather: {  // the tensor at integer indices, each clamped to [0, extent - 1]
      const ir::node& table = s_.g.at(n.args[0]);
      std::vector<Expr> at;
      for (std::size_t k = 0; k < table.shape.size(); ++k) {
        const Expr last = s_.extent(table.shape[k].name, table.shape[k].size) - 1;
        at.push_back(clamp(cast(Int(32), a(k + 1)), 0, last));
      }
      return s_.read(n.args[0], s_.args_of(table, at));
    }
    case op::repeat_heads: {  // (.., h, t, d) reads (.., h / (H / G), t, d)
      const std::size_t r = idx.size();
      const auto per_group = static_cast<int>(n.shape[r - 3].size / s_.g.at(n.args[0]).shape[r - 3].size);
      std::vector<Expr> c = idx;
      c[r - 3] = idx[r - 3] / per_group;
      return value(n.args[0], c, ph);
    }
    case op::unsqueeze: {
      std::vector<Expr> c = idx;
      c.erase(c.begin() + n.param);
      return value(n.args[0], c, ph);
    }
    case op::squeeze: {
      std::vector<Expr> c = idx;
      c.insert(c.begin() + n.param, 0);
      return value(n.args[0], c, ph);
    }
    case op::bind: {  // f at idx, with the placeholders of the scores at idx (`score`: unmasked, as modify reads it)
      int inner = n.args[0];
      while (s_.g.at(inner).kind == op::mask) inner = s_.g.at(inner).args[0];
      return arg(n, 1, idx, score_placeholders(n, idx, value(inner, s_.broadcast_index(inner, idx), {})));
    }
    case op::sum_to: case op::sum_groups: case op::scatter_add: case op::store: break;  // materialised
  }
  throw std::logic_error("lower: no rule for op " + std::string(ir::op_name(n.kind)));
}

// Node i at the placeholders' pair, read from its table per offset kv_idx - q_idx (and head),
// made on first use: the node evaluated at q_idx = 0, kv_idx = the offset clamped to those of the
// scores' pairs, so that tiles past the last query or key read a valid pair's value. Its offsets
// are what the pairs read, as Halide infers them: about N_Q + N_K per head.
Expr generic_lowering::offset_table_value(int i, const placeholders& ph) {
  const bool per_head = reads_head(s_.g, i);
  const ir::node& scores = *ph.scores;
  const std::size_t r = scores.shape.size();
  const auto key = std::tuple(i, scores.shape[r - 2].name, scores.shape[r - 1].name);
  auto it = s_.offset_tables.find(key);
  if (it == s_.offset_tables.end()) {
    const Expr nq = s_.extent(scores.shape[r - 2].name, scores.shape[r - 2].size);
    const Expr nk = s_.extent(scores.shape[r - 1].name, scores.shape[r - 1].size);
    const Var offset("offset"), head("offset_head");
    const std::vector<Expr> unused(s_.g.at(i).shape.size(), 0);
    tabulating_ = true;
    const Expr v = value(i, unused, {Expr(), 0, clamp(offset, 1 - nq, nk - 1), head, ph.scores});
    tabulating_ = false;
    Func f("offset_table" + std::to_string(s_.count++));
    std::vector<Var> vars{offset};
    if (per_head) vars.push_back(head);
    f(vars) = v;
    s_.out.stages.push_back({f, vars, stage::layout, {}, {}, {}, {}, std::vector<std::int64_t>(vars.size(), 0), {}});
    it = s_.offset_tables.emplace(key, f).first;
  }
  const Expr offset = ph.kv_idx - ph.q_idx;
  return per_head ? it->second(offset, ph.head) : it->second(offset);
}

placeholders generic_lowering::score_placeholders(const ir::node& n, const std::vector<Expr>& idx, Expr s) const {
  std::size_t r = idx.size();
  Expr head = 0;
  for (std::size_t k = 0; k < r; ++k)
    if (n.shape[k].role == ir::dim_role::heads) head = idx[k];
  return {std::move(s), idx[r - 2], idx[r - 1], head, n.kind == ir::op::mask ? nullptr : &n};
}

Func generic_lowering::func(int i) {
  const bool fresh = in_fused_tile(s_, s_.g.at(i));
  if (auto it = s_.funcs.find(i); !fresh && it != s_.funcs.end()) return it->second;
  if (fresh && s_.tile.per_tile != nullptr)
    if (auto it = s_.tile.per_tile->find(i); it != s_.tile.per_tile->end()) return it->second;
  if (auto a = s_.fused.find(i); a != s_.fused.end()) return lower_fused(*this, s_, a->second);
  const ir::node& n = s_.g.at(i);
  auto [f, vars] = s_.new_func(std::string(ir::op_name(n.kind)), n);
  std::vector<Expr> idx = as_exprs(vars);
  stage st{f, s_.halide_vars(vars, n.batched), stage::layout, {}, {}, {}, {}, s_.static_extents(n), {}};
  switch (n.kind) {
    case ir::op::transpose:
      define_transpose(n, f, idx);
      break;
    case ir::op::matmul:
      st.reduction = define_product(n, f, idx, st);
      st.kind = stage::product;
      if (auto it = s_.funcs.find(n.args[1]); !st.paired && s_.g.at(n.args[1]).shape.size() >= 2 && it != s_.funcs.end())
        st.right_operand = it->second;
      break;
    case ir::op::softmax:
      define_softmax(n, f, vars, st);
      st.kind = stage::softmax_row;
      break;
    case ir::op::sum_to:
      define_sum_to(n, f, idx);
      st.kind = stage::sum;
      break;
    case ir::op::sum_groups:
      define_sum_groups(n, f, idx);
      st.kind = stage::sum;
      break;
    case ir::op::scatter_add: {  // f reads its compensated sums (a stage of their own)
      stage sums = st;
      sums.func = define_scatter_add(n, f, idx);
      sums.kind = stage::scatter;
      s_.out.stages.push_back(sums);
      break;
    }
    case ir::op::store: {
      Expr v = value(n.args[0], idx, {});
      const std::size_t r = idx.size();
      if (fresh && s_.tile.stored_queries.defined())
        v = select(idx[r - 2] < s_.tile.stored_queries && idx[r - 1] < s_.tile.stored_keys, v, 0.0f);
      f(s_.args_of(n, idx)) = v;
      break;
    }
    default: throw std::logic_error("lower: no rule for materialised op " + std::string(ir::op_name(n.kind)));
  }
  if (fresh) {
    s_.tile.pairwise->push_back(st);
    if (s_.tile.per_tile != nullptr) s_.tile.per_tile->emplace(i, f);
  } else {
    s_.funcs.emplace(i, f);
    s_.out.stages.push_back(st);
    s_.out.materialised.push_back(i);
  }
  return f;
}

// Does the subtree at i read the placeholder `score`?
bool generic_lowering::uses_score(int i) const {
  const ir::node& n = s_.g.at(i);
  if (n.kind == ir::op::placeholder) return n.param == static_cast<int>(ir::placeholder::score);
  for (int a : n.args)
    if (uses_score(a)) return true;
  return false;
}

Expr generic_lowering::kept_by_chain(const attention_match& m, const std::vector<Expr>& idx) {
  Expr keep = Internal::const_true();
  for (int mask : m.chain) {
    const ir::node& link = s_.g.at(mask);
    const std::vector<Expr> at = s_.broadcast_index(mask, idx);
    const Expr s = uses_score(link.args[1]) ? value(link.args[0], at, {}) : Expr();
    keep = keep && arg(link, 1, at, score_placeholders(link, at, s));
  }
  return keep;
}

void generic_lowering::define_transpose(const ir::node& n, Func& f, const std::vector<Expr>& idx) {
  std::vector<Expr> c = idx;
  std::swap(c[c.size() - 1], c[c.size() - 2]);
  // Computed wherever a fused backward's tiles read it, past the last row too: what it reads, as
  // they would (past_the_end_clamped).
  const bool keys_clamped = std::exchange(s_.tile.keys_clamped, false);
  f(s_.args_of(n, idx)) = value(n.args[0], c, {});
  s_.tile.keys_clamped = keys_clamped;
}

// The right operand of product n at ib. A materialised transpose (Kᵀ) is computed once and
// shared by every query tile; where few queries share it (tile_context::few_queries: decoding,
// one small query tile per head), a per-tile product reads a copy transposed per key tile instead
// (stage::tile_transpose), and the pass over K, a round trip through memory, is not made.
Expr generic_lowering::right_operand(const ir::node& n, const std::vector<Expr>& ib, stage& st) {
  const Expr shared = value(n.args[1], ib, {});
  const ir::node& t = s_.g.at(n.args[1]);
  const bool per_tile = in_fused_tile(s_, n) && t.kind == ir::op::transpose && t.shape.size() >= 2;
  const Expr& few_queries = s_.tile.few_queries;
  if (!per_tile || !few_queries.defined() || is_const_zero(few_queries) || st.dots.defined()) return shared;
  auto [f, vars] = s_.new_func("tile_transpose", t);
  define_transpose(t, f, as_exprs(vars));
  st.tile_transpose = f;
  return select(few_queries, f(s_.args_of(t, ib)), shared);
}

// Few queries against a tile of keys (tile_context::few_queries: decoding), a plain Q·Kᵀ with its
// contracted dim known when compiling, a whole number of vectors: the lanes (a vector's) of
// few_query_dots, else 0 (the transposed copy of K per tile, right_operand's).
int generic_lowering::few_query_lanes(const ir::node& n) const {
  const Expr& few_queries = s_.tile.few_queries;
  const ir::node& a = s_.g.at(n.args[0]);
  const ir::node& b = s_.g.at(n.args[1]);
  const int lanes = s_.options.tiles.vector;
  const std::int64_t k = a.shape.empty() ? 0 : s_.static_extents(a).front();  // static or bound
  const bool applies = few_queries.defined() && !is_const_zero(few_queries) && in_fused_tile(s_, n) && b.kind == ir::op::transpose &&
                       b.shape.size() >= 2 && a.shape.size() >= 2 && n.param != static_cast<int>(ir::product_kind::weighted) &&
                       !ir::normalises(a.kind) && !s_.softmax_free.contains(static_cast<int>(&n - s_.g.nodes.data())) && lanes > 1 &&
                       k > 0 && k % lanes == 0;
  return applies ? lanes : 0;
}

// The left operand (the queries) of product n in a fused tile at ia: a 16-bit tensor's rows
// widened to float32 once (stage::widened_rows, a schedule computes them per query tile), not once per
// key they meet (a load, a shift and a broadcast from a general register per element, where a
// float32 broadcast is a load: 1.25 uops per FMA of the register tile on ports the FMAs share).
Expr generic_lowering::left_operand(const ir::node& n, const std::vector<Expr>& ia, stage& st) {
  const ir::node& a = s_.g.at(n.args[0]);
  if (!in_fused_tile(s_, n) || (a.kind != ir::op::input && a.kind != ir::op::weight) || a.type == ir::element::f32)
    return value(n.args[0], ia, {});
  if (!st.widened_rows.defined()) {
    auto [rows, vars] = s_.new_func("widened_rows", a);
    rows(s_.args_of(a, as_exprs(vars))) = value(n.args[0], as_exprs(vars), {});
    st.widened_rows = rows;
  }
  return st.widened_rows(s_.args_of(a, ia));
}

// The left operand of product n at ia, its last dim in blocks of 2·lanes, each block's even
// elements first, then its odd ones (stage::split_rows, a schedule computes them per query tile).
Expr generic_lowering::split_rows(const ir::node& n, const std::vector<Expr>& ia, int lanes, stage& st) {
  if (!st.split_rows.defined()) {
    const ir::node& a = s_.g.at(n.args[0]);
    auto [rows, vars] = s_.new_func("split_rows", a);
    std::vector<Expr> from = as_exprs(vars);
    from.back() = split_halves(from.back(), 2 * lanes);
    rows(s_.args_of(a, as_exprs(vars))) = left_operand(n, from, st);
    st.split_rows = rows;
  }
  return st.split_rows(s_.args_of(s_.g.at(n.args[0]), ia));
}

// Each (key, query) of the tile as `lanes` partial dot products (stage::dots): the query's row and
// the key's row read in vectors along the contracted dim, K's rows whole as the cache holds them,
// where a vector of keys read across them (Kᵀ) is a transposing copy of every element. Returns
// their sum (stage::dot_sums), one per (key, query).
Expr generic_lowering::few_query_dots(const ir::node& n, const std::vector<Expr>& idx, std::vector<Expr> ia, const std::vector<Expr>& ib,
                                      int lanes, stage& st) {
  const int contracted = static_cast<int>(s_.static_extents(s_.g.at(n.args[0])).front());
  const int k = s_.g.at(n.args[1]).args[0];
  const Var lane("lane");
  std::vector<Expr> row = ib;  // Kᵀ's (lead..., k, key) as K's (lead..., key, d)
  row[row.size() - 2] = ib.back();
  Expr queries;
  if (bf16_tensor(tensor_behind_repeats(k)) && contracted % (2 * lanes) == 0) {
    // A bfloat16 key row's block of 2·lanes elements, loaded as one vector of lanes 32-bit words,
    // is its even elements (each word shifted up by 16) and its odd ones (the low 16 bits
    // cleared): one instruction a vector, where widening each half apart takes two. The lanes then
    // take the contracted dim in that order, the queries' rows read split alike (stage::split_rows).
    const RDom blocks({{0, 2}, {0, contracted / (2 * lanes)}}, "k_blocks");
    row.back() = blocks.y * (2 * lanes) + 2 * lane + blocks.x;
    ia.back() = blocks.y * (2 * lanes) + blocks.x * lanes + lane;
    queries = split_rows(n, ia, lanes, st);
  } else {
    const RDom blocks(0, contracted / lanes, "k_blocks");
    row.back() = ia.back() = blocks.x * lanes + lane;
    queries = left_operand(n, ia, st);
  }
  std::vector<Expr> at = s_.args_of(n, idx);
  at.insert(at.begin(), lane);
  Func dots("few_query_dots" + std::to_string(s_.count++));
  dots(at) = 0.0f;
  dots(at) += queries * value(k, row, {});
  // The lanes summed by halves, each half the two halves of the one before (a key's lanes a
  // vector): summed across a vector of keys, every lane of every key is read apart (a
  // transposition), 2.7x as long a sum.
  Func last = dots;
  int left = lanes;
  for (; left > 2 && left % 2 == 0; left /= 2) {
    Func half("few_query_halves" + std::to_string(s_.count++));
    std::vector<Expr> upper = at;
    upper.front() = lane + left / 2;
    half(at) = last(at) + last(upper);
    st.dot_halves.push_back(half);
    last = half;
  }
  Expr sum;
  for (int j = 0; j < left; ++j) {
    at.front() = j;
    sum = j == 0 ? last(at) : sum + last(at);
  }
  at.erase(at.begin());
  Func sums("few_query_sums" + std::to_string(s_.count++));
  sums(at) = sum;
  st.dots = dots;
  st.dot_sums = sums;
  return sums(at);
}

// Up to this many queries a paired product runs as few_query_dots, beyond it on the pairs: one
// query against 8192 keys (Dh 128, 2 threads, AVX512-BF16) 1.3 ms against 2.3, equal at 4, 3.7
// against 3.2 at 8 (the pairs copied per key tile serve every query).
constexpr int paired_dots_rows = 4;

// A product of bfloat16 pairs (lowering_options::bf16_dot_products): in a fused tile, a plain
// (unweighted) product of a bfloat16 tensor by a transposed one (Q·Kᵀ), the contracted dim even
// and fixed when compiling. Each pair's two products f32(a)·f32(b) are exact; their sum with the
// accumulator rounds as an FMA's would (vdpbf16ps flushes denormal inputs to zero).
bool generic_lowering::runs_paired(const ir::node& n) const {
  if (!s_.options.bf16_dot_products || !in_fused_tile(s_, n) || n.param == static_cast<int>(ir::product_kind::weighted)) return false;
  const ir::node& a = s_.g.at(n.args[0]);
  const ir::node& b = s_.g.at(n.args[1]);
  const std::int64_t k = a.shape.empty() ? 0 : a.shape.back().size;
  return bf16_tensor(n.args[0]) && b.kind == ir::op::transpose && bf16_tensor(tensor_behind_repeats(b.args[0])) && k > 0 &&
         k % 2 == 0 && a.shape.size() >= 2 && n.shape.size() >= 2;
}

bool generic_lowering::bf16_tensor(int i) const {
  const ir::node& t = s_.g.at(i);
  return (t.kind == ir::op::input || t.kind == ir::op::weight) && t.type == ir::element::bf16 && t.shape.size() >= 2;
}

int generic_lowering::tensor_behind_repeats(int i, std::vector<Expr>* lead) const {
  while (s_.g.at(i).kind == ir::op::repeat_heads) {
    const ir::node& n = s_.g.at(i);
    const ir::node& groups = s_.g.at(n.args[0]);
    const std::size_t heads = n.shape.size() - 3;  // (.., h, t, d): the repeated dim, as value() reads it
    if (lead != nullptr) lead->back() = lead->back() / static_cast<int>(n.shape[heads].size / groups.shape[heads].size);
    i = n.args[0];
  }
  return i;
}

// a·bᵀ over pairs: r.x the pair's two (innermost, vectorised with the keys), r.y the pairs; b read
// from its copy in pairs, one vector of keys × 2 per load: the copy shared by the query tiles
// (pairs_of), or where few queries share it (tile_context::few_queries: decoding), a copy per key
// tile (stage::tile_transpose), as right_operand's Kᵀ: K is read once, not copied through memory
// and read again (one query against 8192 keys: 2x slower).
RDom generic_lowering::define_paired_product(const ir::node& n, Func& f, const std::vector<Expr>& idx, stage& st) {
  const int left = n.args[0], transposed = s_.g.at(n.args[1]).args[0];
  const ir::node& a = s_.g.at(left);
  // At most paired_dots_rows queries: few_query_dots, the pairs' contraction empty (the schedule
  // gives that case a version of its own, flash_funcs::paired_dots: a contraction of run-time
  // length keeps the pairs' register tiles in memory, 3x slower).
  const int lanes = few_query_lanes(n);
  const Expr dots = lanes > 0 ? simplify(s_.tile.few_queries && s_.tile.queries <= paired_dots_rows) : Internal::const_false();
  const int pairs = static_cast<int>(a.shape.back().size / 2);
  const RDom r({{0, 2}, {0, is_const(dots) ? Expr(is_const_one(dots) ? 0 : pairs) : select(dots, 0, pairs)}}, "k");
  const std::vector<Expr> lead(idx.begin(), idx.end() - 2);
  std::vector<Expr> ia = lead_index(a.shape, lead);
  ia.push_back(row_inside(s_, n, a.shape, idx[idx.size() - 2]));
  ia.push_back(2 * r.y + r.x);
  // K, or the tensor of groups that repeat_heads reads (GQA): its pairs copied once, read by each
  // query head of a group.
  std::vector<Expr> ib = lead_index(s_.g.at(transposed).shape, lead);
  const int right = tensor_behind_repeats(transposed, &ib);
  const ir::node& b = s_.g.at(right);
  ib.push_back(r.y);
  ib.push_back(key_of_tile(s_, n, idx.back()));
  ib.push_back(r.x);
  const Expr x = s_.params.at(left)(s_.args_of(a, clamped_to_tensor(s_, left, ia)));
  const Expr shared = pairs_of(right, b.shape.size() - 1)(halide_args(ib, s_.batch, b.batched));
  const Expr& few_queries = s_.tile.few_queries;
  Expr y = shared;
  if (few_queries.defined() && !is_const_zero(few_queries)) {
    st.tile_transpose = Func(BFloat(16), static_cast<int>(ib.size()) + (b.batched ? 1 : 0), "tile_pairs" + std::to_string(s_.count++));
    st.tile_source = define_pairs(right, b.shape.size() - 1, st.tile_transpose);
    // The key as the tile has it (the promise of key_of_tile is for the shared copy's bounds): an
    // index the two branches shared would be one variable, which vectorising the pairs with the
    // keys widens to a gather.
    std::vector<Expr> in_tile = ib;
    in_tile[in_tile.size() - 2] = idx.back();
    y = select(few_queries, st.tile_transpose(halide_args(in_tile, s_.batch, b.batched)), shared);
  }
  if (is_const_zero(dots)) {
    f(s_.args_of(n, idx)) = 0.0f;
  } else {
    s_.tile.paired_dots = dots;
    std::vector<Expr> ib_rows = lead_index(s_.g.at(n.args[1]).shape, lead);  // Kᵀ's (lead..., k, key)
    ib_rows.insert(ib_rows.end(), {0, key_of_tile(s_, n, idx.back())});
    f(s_.args_of(n, idx)) = select(dots, few_query_dots(n, idx, ia, ib_rows, lanes, st), 0.0f);
  }
  f(s_.args_of(n, idx)) += cast<float>(x) * cast<float>(y);
  if (!is_const_one(dots)) s_.out.bf16_dot_products.scores = true;
  if (!is_const(dots)) s_.out.bf16_dot_products.scores_beyond = paired_dots_rows;
  return r;
}

// The bfloat16 tensor t with the pairs of its dim `paired` (row-major; the last or the one before)
// side by side: (.., N, K) paired along K as (.., K/2, N, 2), along N as (.., N/2, K, 2). Computed
// once per call, like Kᵀ.
Func generic_lowering::pairs_of(int t, std::size_t paired) {
  if (auto it = s_.pairs.find({t, paired}); it != s_.pairs.end()) return it->second;
  const ir::node& n = s_.g.at(t);
  Func f(BFloat(16), static_cast<int>(n.shape.size()) + 1 + (n.batched ? 1 : 0), "pairs" + std::to_string(s_.count++));
  const Func source = define_pairs(t, paired, f);
  std::vector<std::int64_t> extents(f.args().size(), 0);  // (pair, row, pair index, ...)
  extents[0] = 2;
  extents[2] = n.shape[paired].size / 2;  // 0: known at the call only
  s_.out.stages.push_back({f, f.args(), stage::pairs, {}, {}, {}, {}, extents, {}});
  s_.out.stages.back().source = source;
  s_.pairs.emplace(std::pair{t, paired}, f);
  return f;
}

// f(lead..., pair index, the other dim, pair) = tensor t's element; where the pairs are of t's last
// dim (a block of t's rows then holds f's pairs), returns the Func f reads t through, else undefined.
Func generic_lowering::define_pairs(int t, std::size_t paired, Func f) {
  const ir::node& n = s_.g.at(t);
  const std::size_t rank = n.shape.size();
  if (rank < 2 || paired + 2 < rank) throw std::logic_error("pairs_of: pairs of a matrix's last two dims only");
  std::vector<Var> vars;  // row-major: lead..., pair index, the other dim, pair
  for (std::size_t k = 0; k + 2 < rank; ++k) vars.emplace_back("pairs_lead" + std::to_string(k));
  vars.emplace_back("pair_index");
  vars.emplace_back("pairs_row");
  vars.emplace_back("pair");
  const std::vector<Expr> at = as_exprs(vars);
  const Expr pair_index = at[rank - 2], other = at[rank - 1], pair = at.back();
  const auto element = [&](const Expr& in_pairs) {
    std::vector<Expr> e(at.begin(), at.end() - 3);
    e.push_back(paired + 1 == rank ? other : in_pairs);
    e.push_back(paired + 1 == rank ? in_pairs : other);
    return s_.params.at(t)(s_.args_of(n, clamped_to_tensor(s_, t, e)));
  };
  const std::vector<Expr> args = halide_args(at, s_.batch, n.batched);
  if (paired + 1 == rank) {
    // t read through a Func that clamps its own rows: the copy's blocks of rows may then run
    // whole past the last row (split_pair_copy).
    auto [source, own] = s_.new_func("pairs_source", n, BFloat(16));
    const std::vector<Expr> at_own = as_exprs(own);
    source(s_.args_of(n, at_own)) = s_.params.at(t)(s_.args_of(n, clamped_to_tensor(s_, t, at_own, false)));
    std::vector<Expr> e(at.begin(), at.end() - 3);
    e.push_back(other);
    e.push_back(2 * pair_index + pair);
    f(args) = source(s_.args_of(n, e));
    return source;
  }
  // Pairs of rows: each row read at an index free of `pair`, so that vectorised with the row's
  // elements it is a dense load, the pair's two interleaved in registers (an index of pair and
  // element vectorised together is a gather).
  f(args) = select(pair == 0, element(2 * pair_index), element(2 * pair_index + 1));
  return Func();
}

RDom generic_lowering::define_product(const ir::node& n, Func& f, const std::vector<Expr>& idx, stage& st) {
  if (runs_paired(n)) {
    st.paired = true;
    return define_paired_product(n, f, idx, st);
  }
  const auto& sa = s_.g.at(n.args[0]).shape;
  const auto& sb = s_.g.at(n.args[1]).shape;
  const Expr contracted = s_.extent(sa.back().name, sa.back().size);
  // Few queries (few_query_dots): the product is the dots' lanes summed, the contraction empty.
  const int lanes = few_query_lanes(n);
  RDom k(0, lanes > 0 ? select(s_.tile.few_queries, 0, contracted) : contracted, "k");
  std::vector<Expr> ia, ib;
  if (sb.size() == 1) {  // (.., M, K)·(K)
    ia = idx;
    ia.push_back(k);
    ib = {k};
  } else if (sa.size() == 1) {  // (K)·(.., K, N)
    ia = {k};
    ib.assign(idx.begin(), idx.end() - 1);
    ib.push_back(k);
    ib.push_back(idx.back());
  } else {  // (.., M, K)·(.., K, N), leading dims broadcast
    std::vector<Expr> lead(idx.begin(), idx.end() - 2);
    ia = lead_index(sa, lead);
    ia.push_back(row_inside(s_, n, sa, idx[idx.size() - 2]));
    ia.push_back(k);
    ib = lead_index(sb, lead);
    ib.push_back(k);
    ib.push_back(key_of_tile(s_, n, idx.back()));
  }
  f(s_.args_of(n, idx)) = lanes > 0 ? select(s_.tile.few_queries, few_query_dots(n, idx, ia, ib, lanes, st), 0.0f) : Expr(0.0f);
  // A transposed left operand that is a buffer already (Pᵀ in the gradient's Pᵀ·dY) is read in
  // place, its last two indices swapped: the register tiles read a block of its rows per step,
  // contiguous in the untransposed buffer, so no transposed copy is made.
  const ir::node& left = s_.g.at(n.args[0]);
  const bool in_place = left.kind == ir::op::transpose && ia.size() >= 2 && ir::is_materialised(s_.g.at(left.args[0]).kind) &&
                        !in_fused_tile(s_, n);
  std::vector<Expr> ia_in_place = ia;
  if (in_place) std::swap(ia_in_place[ia.size() - 1], ia_in_place[ia.size() - 2]);
  Expr a = in_place ? value(left.args[0], ia_in_place, {}) : left_operand(n, ia, st);
  const Expr b = right_operand(n, ib, st);
  const int self = static_cast<int>(&n - s_.g.nodes.data());
  const auto softmax_free = s_.softmax_free.find(self);
  if (softmax_free != s_.softmax_free.end()) a = kept_weight(kept_by_chain(softmax_free->second, ia), a);
  // Weights · values: a key with weight 0 (masked) has no influence, even a NaN value.
  const bool weights = ir::normalises(s_.g.at(n.args[0]).kind) || softmax_free != s_.softmax_free.end();
  if (n.param == static_cast<int>(ir::product_kind::weighted)) {
    // The guard against 0·NaN only matters where the right operand holds a NaN or an inf: a check
    // of it, once per call, lets the schedule run the plain product otherwise (stage::right_finite).
    st.right_finite = all_finite(n.args[1]);
    f(s_.args_of(n, idx)) = accumulate_weighted(f(s_.args_of(n, idx)), a, b, st.right_finite());
  } else {
    f(s_.args_of(n, idx)) += product_term(a, b, weights);
  }
  return k;
}

// () true when every element of node i is finite: the largest exponent field below all ones. In
// two steps: per element of the innermost dim, the largest over every other index (a stage of its
// own, vectors of the innermost dim, the other dims walked innermost first), then across that dim.
Func generic_lowering::all_finite(int i) {
  const ir::node& x = s_.g.at(i);
  Func finite("all_finite" + std::to_string(s_.count++));
  if (x.shape.empty() && !x.batched) {
    finite() = exponent_field(value(i, {}, {})) < Expr(exponent_of_nonfinite);
    return finite;
  }
  const std::size_t rank = x.shape.size();
  Region others;  // the dims before the innermost, innermost first, then the batch
  for (std::size_t k = rank > 0 ? rank - 1 : 0; k-- > 0;) others.emplace_back(0, s_.extent(x.shape[k].name, x.shape[k].size));
  if (x.batched) others.emplace_back(0, s_.batch_extent());
  const Var d("d");
  std::vector<Expr> at(rank);
  if (rank > 0) at.back() = d;
  Func exponents("exponents" + std::to_string(s_.count++));
  exponents(d) = cast<std::uint32_t>(0);
  if (others.empty()) {
    exponents(d) = max(exponents(d), exponent_field(value(i, at, {})));
  } else {
    const RDom r(others, "element");
    for (std::size_t k = 0; k + 1 < rank; ++k) at[k] = r[static_cast<int>(rank - 2 - k)];
    Expr e = exponent_field(value(i, at, {}));
    if (x.batched) e = Internal::substitute(s_.batch.name(), r[static_cast<int>(others.size() - 1)], e);
    exponents(d) = max(exponents(d), e);
  }
  const Expr columns = rank > 0 ? s_.extent(x.shape.back().name, x.shape.back().size) : Expr(1);
  const RDom c(0, columns, "column");
  finite() = maximum(exponents(c)) < Expr(exponent_of_nonfinite);
  const std::int64_t known = rank > 0 ? s_.static_extents(x).front() : 1;
  s_.out.stages.push_back({exponents, {d}, stage::sum, {}, {}, {}, {}, {known}, {}});
  return finite;
}

// The softmax over the last axis (nonfinite_lowering.hpp), and with lowering_options::with_lse
// the log-sum-exp of its rows, once: from the softmax outside any fused tile.
void generic_lowering::define_softmax(const ir::node& n, Func& f, const std::vector<Var>& vars, stage& st) {
  const std::vector<Expr> idx = as_exprs(vars);
  const ir::dim& last = n.shape.back();
  RDom k(0, s_.extent(last.name, last.size), "k");
  std::vector<Expr> row(idx.begin(), idx.end() - 1), at_k = row;
  at_k.push_back(k);
  const Expr x_k = value(n.args[0], at_k, {}), x = value(n.args[0], idx, {});
  define_safe_softmax(f, s_.args_of(n, idx), s_.args_of(n, at_k), s_.args_of(n, row), x, x_k, st);
  if (s_.options.with_lse && s_.tile.pairwise == nullptr && !s_.out.lse.defined())
    define_lse(s_, n, s_.halide_vars({vars.begin(), vars.end() - 1}, n.batched), x_k);
}

}  // namespace attn::gen

namespace attn::gen {

// x summed over the axes it broadcasts over to reach n: its leading axes past n's rank, n's unit
// axes where x's is not, and the batch when n has none.
void generic_lowering::define_sum_to(const ir::node& n, Func& f, const std::vector<Expr>& idx) {
  const ir::node& x = s_.g.at(n.args[0]);
  const std::size_t lead = x.shape.size() - n.shape.size();
  Region summed;
  std::vector<std::size_t> axes;
  for (std::size_t k = 0; k < x.shape.size(); ++k)
    if (k < lead || (n.shape[k - lead].role == ir::dim_role::unit && x.shape[k].role != ir::dim_role::unit)) {
      axes.push_back(k);
      summed.emplace_back(0, s_.extent(x.shape[k].name, x.shape[k].size));
    }
  const bool batch = x.batched && !n.batched;
  if (batch) summed.emplace_back(0, s_.batch_extent());
  std::vector<Expr> at(x.shape.size());
  for (std::size_t k = lead; k < x.shape.size(); ++k) at[k] = idx[k - lead];
  f(s_.args_of(n, idx)) = 0.0f;
  if (summed.empty()) {
    f(s_.args_of(n, idx)) += value(n.args[0], at, {});
    return;
  }
  RDom r(summed, "sum");
  for (std::size_t j = 0; j < axes.size(); ++j) at[axes[j]] = r[static_cast<int>(j)];
  Expr v = value(n.args[0], at, {});
  if (batch) v = Internal::substitute(s_.batch.name(), r[static_cast<int>(axes.size())], v);
  f(s_.args_of(n, idx)) += v;
}

// (.., G, T, D) from (.., H, T, D): group g sums the heads g·(H/G) ... (g+1)·(H/G) - 1 (repeat_heads' order).
void generic_lowering::define_sum_groups(const ir::node& n, Func& f, const std::vector<Expr>& idx) {
  const ir::node& x = s_.g.at(n.args[0]);
  const std::size_t h = n.shape.size() - 3;
  const auto per_group = static_cast<int>(x.shape[h].size / n.shape[h].size);
  RDom j(0, per_group, "head");
  std::vector<Expr> at = idx;
  at[h] = idx[h] * per_group + j;
  f(s_.args_of(n, idx)) = 0.0f;
  f(s_.args_of(n, idx)) += value(n.args[0], at, {});
}

// A table shaped like gather's tensor, each element the sum of the contributions c at the places
// that gathered it (the indices clamped as gather clamps them). One serial pass in a fixed
// order: the same sums, bitwise, for any thread count. The sums are compensated (Kahan's, in
// strict float arithmetic): an element may sum every pair of T × T (a learned slope), where a
// plain float sum's error grows with the count (at T = 257 past the gradients' error rule).
// Returns the (sum, compensation) Func; f is its sum.
Func generic_lowering::define_scatter_add(const ir::node& n, Func& f, const std::vector<Expr>& idx) {
  const ir::node& c = s_.g.at(n.args[0]);
  Region domain;
  for (const ir::dim& d : c.shape) domain.emplace_back(0, s_.extent(d.name, d.size));
  const bool batch = c.batched && !n.batched;
  if (batch) domain.emplace_back(0, s_.batch_extent());
  std::vector<Expr> at_c;
  RDom r;
  if (!domain.empty()) {
    r = RDom(domain, "gathered");
    for (std::size_t k = 0; k < c.shape.size(); ++k) at_c.push_back(r[static_cast<int>(k)]);
  }
  const placeholders ph = c.shape.size() >= 2 ? score_placeholders(c, at_c, Expr()) : placeholders{};
  std::vector<Expr> at;
  for (std::size_t k = 0; k < n.shape.size(); ++k) {
    const Expr last = s_.extent(n.shape[k].name, n.shape[k].size) - 1;
    at.push_back(clamp(cast(Int(32), value(n.args[k + 1], {}, ph)), 0, last));
  }
  Expr v = value(n.args[0], at_c, {});
  if (batch) {  // the contributions and the indices (which may read per-sequence tensors) at the summed batch
    const Expr b = r[static_cast<int>(c.shape.size())];
    v = Internal::substitute(s_.batch.name(), b, v);
    for (Expr& a : at) a = Internal::substitute(s_.batch.name(), b, a);
  }
  Func sums(std::string(f.name()) + "_sums");
  const std::vector<Expr> element = s_.args_of(n, idx), cell = s_.args_of(n, at);
  sums(element) = Tuple(0.0f, 0.0f);
  const Expr y = v - sums(cell)[1], t = sums(cell)[0] + y;
  sums(cell) = Tuple(strict_float(t), strict_float((t - sums(cell)[0]) - y));
  f(element) = sums(element)[0];
  return sums;
}

}  // namespace attn::gen
