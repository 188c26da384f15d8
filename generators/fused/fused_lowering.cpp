#include "generators/fused/fused_lowering.hpp"

#include <algorithm>
#include <stdexcept>
#include <tuple>
#include "dsl/gradient.hpp"
#include "generators/fused/flash_algorithm.hpp"
#include "generators/lowering/generic_lowering.hpp"
#include "generators/lowering/nonfinite.hpp"

namespace attn::gen {

using namespace Halide;

namespace {

// The number of batch items: the last dim of any batched input.
Expr batch_extent(const lowering_state& s) {
  for (int t : s.g.terminals)
    if (s.g.at(t).batched) return s.params.at(t).dim(s.params.at(t).dimensions() - 1).extent();
  throw std::logic_error("a batched node without a batched input");
}

// (d): the largest exponent field in column d (the last dim) of node i, over all its other
// indices and the batch (flash_problem::value_exponents).
Func exponents_by_column(generic_lowering& rules, lowering_state& s, int i) {
  const ir::node& n = s.g.at(i);
  const std::size_t rank = n.shape.size();
  Region others;  // Halide order: the dims before the last, innermost first, then the batch
  for (std::size_t k = rank - 1; k-- > 0;) others.emplace_back(0, s.extent(n.shape[k].name, n.shape[k].size));
  if (n.batched) others.emplace_back(0, batch_extent(s));
  const RDom r(others, "value_rows" + std::to_string(s.count++));
  const Var d("d");
  std::vector<Expr> idx(rank);
  for (std::size_t k = 0; k + 1 < rank; ++k) idx[k] = r[static_cast<int>(rank - 2 - k)];
  idx.back() = d;
  Expr x = rules.value(i, idx, {});
  if (n.batched) x = Internal::substitute(s.batch.name(), r[static_cast<int>(rank - 1)], x);
  Func e("value_exponents" + std::to_string(s.count++));
  e(d) = cast<std::uint32_t>(0);
  e(d) = max(e(d), exponent_field(x));
  return e;
}

}  // namespace

flash_problem::scored fused_score(generic_lowering& rules, lowering_state& s, const attention_match& m,
                                  const std::vector<Expr>& lead, const Expr& q, const Expr& kv, std::vector<stage>& pairwise) {
  const auto saved = std::tuple(s.tile.pairwise, s.tile.weights);
  s.tile.pairwise = &pairwise;
  s.tile.weights = &s.g.at(m.weights);
  std::vector<Expr> idx = lead;
  idx.push_back(q);
  idx.push_back(kv);
  flash_problem::scored sc;
  if (!m.normalised()) {
    // f(S) with the path's masks as `keep` (so that tiles can be skipped or left unchecked).
    const auto saved_transparent = s.tile.transparent;
    s.tile.transparent.insert(m.chain.begin(), m.chain.end());
    sc.score = cast(Float(32), rules.value(m.score, idx, {}));
    sc.keep = rules.kept_by_chain(m, idx);
    s.tile.transparent = saved_transparent;
  } else {
    sc = {rules.value(m.score, idx, {}), Internal::const_true()};
    for (auto it = m.chain.rbegin(); it != m.chain.rend(); ++it) {
      const ir::node& link = s.g.at(*it);
      const Expr bound = rules.arg(link, 1, idx, rules.score_placeholders(link, idx, sc.score));
      if (link.kind == ir::op::mask) sc.keep = sc.keep && bound;
      else sc.score = cast(Float(32), bound);
    }
  }
  std::tie(s.tile.pairwise, s.tile.weights) = saved;
  return sc;
}

namespace {

// V at (lead..., kv, d); `inside`: the key lies inside the keys, read without a clamp.
Expr fused_value(generic_lowering& rules, lowering_state& s, const attention_match& m, const std::vector<Expr>& lead,
                 const Expr& kv, const Expr& d, bool inside) {
  std::vector<Expr> idx = lead_index(s.g.at(m.values).shape, lead);
  idx.push_back(kv);
  idx.push_back(d);
  const bool saved = s.tile.keys_inside;
  s.tile.keys_inside = inside;
  const Expr v = rules.value(m.values, idx, {});
  s.tile.keys_inside = saved;
  return v;
}

// Is the attention's result (its combine) one of the graph's results, stored as bfloat16?
bool stored_as_bf16(const ir::graph& g, int combine) {
  const std::vector<int> outputs = g.outputs();
  const std::vector<ir::element> types = ir::result_types(g);
  for (std::size_t k = 0; k < outputs.size(); ++k)
    if (outputs[k] == combine && types[k] == ir::element::bf16) return true;
  return false;
}

// The attention's result type where the graph returns it once and no node reads it: its fused
// output is written in that type (flash_problem::stored). float32 otherwise.
ir::element written_type(const ir::graph& g, int combine) {
  const std::vector<int> outputs = g.outputs();
  if (std::ranges::count(outputs, combine) != 1) return ir::element::f32;
  for (const ir::node& n : g.nodes)
    if (std::ranges::find(n.args, combine) != n.args.end()) return ir::element::f32;
  return ir::result_types(g)[static_cast<std::size_t>(std::ranges::find(outputs, combine) - outputs.begin())];
}

// P·V on bfloat16 dot products (flash_problem::value_pairs): V a bfloat16 tensor and the result
// stored as bfloat16, which rounds it as much as rounding P does (PyTorch's CPU and FlashAttention's
// bfloat16 kernels round P alike), and many queries known when compiling: decoding reads V once,
// where a copy in pairs made once per call would read it twice.
// V may be a tensor of groups that repeat_heads reads (GQA).
bool pairs_values(const generic_lowering& rules, const lowering_state& s, const attention_match& m, const flash_problem& p) {
  return s.options.bf16_dot_products && !s.options.gpu && p.normalised && s.options.tiles.vector % 2 == 0 &&
         is_const_zero(p.few_queries) && rules.bf16_tensor(rules.tensor_behind_repeats(m.values)) && stored_as_bf16(s.g, m.combine);
}

}  // namespace

Func lower_fused(generic_lowering& rules, lowering_state& s, const attention_match& m) {
  const ir::node& weights = s.g.at(m.weights);
  const std::size_t r = weights.shape.size();
  const ir::dim& q_dim = weights.shape[r - 2];
  const ir::dim& kv_dim = weights.shape[r - 1];
  const ir::node& values = s.g.at(m.values);
  flash_problem p;
  p.lead = static_cast<int>(r - 2);
  p.batched = s.g.at(m.combine).batched;
  p.batch = s.batch;
  p.nq = s.extent(q_dim.name, q_dim.size);
  p.nk = s.extent(kv_dim.name, kv_dim.size);
  p.dv = static_cast<int>(values.shape.back().size);
  p.dv_known = static_cast<int>(s.static_extents(values).front());  // static or bound at jit time
  p.dv_extent = s.extent(values.shape.back().name, values.shape.back().size);
  // On a GPU the guarded FMA costs little beside memory, and a check over V would run on the host.
  if (!s.options.gpu) p.value_exponents = exponents_by_column(rules, s, m.values);
  p.suffix = s.out.flash.empty() ? "" : "_" + std::to_string(s.out.flash.size());
  p.score = [&rules, &s, m](const std::vector<Expr>& lead, const Expr& q, const Expr& kv, std::vector<stage>& pairwise) {
    return fused_score(rules, s, m, lead, q, kv, pairwise);
  };
  p.value = [&rules, &s, m](const std::vector<Expr>& lead, const Expr& kv, const Expr& d, bool inside) {
    return fused_value(rules, s, m, lead, kv, d, inside);
  };
  p.with_lse = s.options.with_lse || s.lse_of.contains(m.combine);
  p.normalised = m.normalised();
  // On a GPU the lanes of the row reductions are the block's threads in x.
  const flash_schedule& t = s.options.tiles;
  const std::optional<flash_gpu_schedule>& gpu = s.options.gpu;
  // CPU: decoding (at most two register tiles of queries) transposes K per key tile (generic_lowering's
  // right operand): 8 queries against 8192 keys 2x faster than through the shared Kᵀ, whose copy
  // is a pass over the cache.
  if (!gpu) {
    p.few_rows = std::min(2 * t.q_unroll, t.q_tile);
    p.few_queries = s.tile.few_queries = simplify(p.nq <= p.few_rows);
    s.tile.queries = p.nq;
  }
  if (const Type written = stored_type(written_type(s.g, m.combine)); written != Float(32))
    p.stored = [written](const Expr& x) { return stored_as(written, x); };
  // bfloat16 V converted as loaded (a CPU's P·V in float32): its columns split in blocks of two vectors.
  const int block = 2 * t.vector;
  if (!gpu && !pairs_values(rules, s, m, p) && rules.bf16_tensor(rules.tensor_behind_repeats(m.values)) && p.dv_known > 0 &&
      p.dv_known % block == 0)
    p.split_columns = block;
  if (pairs_values(rules, s, m, p)) {
    p.value_pairs = [&rules, &s, m](const std::vector<Expr>& lead, const Expr& pair, const Expr& d, const Expr& j) {
      std::vector<Expr> idx = lead_index(s.g.at(m.values).shape, lead);
      const int values = rules.tensor_behind_repeats(m.values, &idx);
      const ir::node& v = s.g.at(values);
      idx.insert(idx.end(), {pair, d, j});
      return rules.pairs_of(values, v.shape.size() - 2)(halide_args(idx, s.batch, v.batched));
    };
    s.out.bf16_dot_products.values = true;
  }
  // GPU register tiles: the state packed with a lane per thread across V, its columns adjacent.
  const bool gpu_lanes = gpu && gpu->shared == flash_gpu_variant::register_tiles;
  s.out.flash.push_back(gpu ? flash_attention(p, gpu->q_tile, gpu->kv_tile, gpu->kv_tile, gpu->threads,
                                              gpu_lanes ? gpu->threads : 0, false, gpu_lanes)
                            : flash_attention(p, t.q_tile, t.kv_tile, t.partial_tile, t.vector, t.pack_state ? t.vector : 0, true));
  s.out.flash.back().paired_dots = s.tile.paired_dots;
  s.tile.few_queries = s.tile.queries = s.tile.paired_dots = Expr();
  if (s.options.with_lse) {
    s.out.lse = s.out.flash.back().lse;
    s.out.lse_batched = p.batched;
  }
  s.funcs.emplace(m.combine, s.out.flash.back().output);
  s.out.materialised.push_back(m.combine);
  return s.out.flash.back().output;
}

bool in_fused_tile(const lowering_state& s, const ir::node& n) {
  return s.tile.pairwise != nullptr && computed_per_tile(n, *s.tile.weights);
}

// Each input is clamped to its own extent, not to the dim's (read off the first tensor with
// it): under a guard on the dim's size (a tile the sizes rule out, kept as dead code), the
// simplifier dropped a clamp to that size, and bounds inference, which does not read the guard,
// then asked for a whole key tile of V (a query against one key failed: "V accessed at 63").
std::vector<Expr> clamped_to_tensor(const lowering_state& s, int i, std::vector<Expr> idx, bool promise_inside) {
  const ir::node& n = s.g.at(i);
  for (std::size_t k = 0; k < n.shape.size(); ++k)
    if (s.tiled_dims.contains(n.shape[k].name)) {
      const int dim = static_cast<int>(n.shape.size() - 1 - k);
      const Expr size = n.shape[k].size > 0 || s.bound.contains(n.shape[k].name) ? s.extent(n.shape[k].name, n.shape[k].size)
                                                                                  : s.params.at(i).dim(dim).extent();
      // Keys of full tiles lie inside whenever the tile runs (mask_bounds.hpp): no clamp to
      // compute, only bounds inference to tell (it bounds the empty tile loop of N_KV < kv_tile).
      idx[k] = s.tile.keys_inside && promise_inside ? unsafe_promise_clamped(idx[k], 0, size - 1) : clamp(idx[k], 0, size - 1);
    }
  return idx;
}

// A per-tile product (CPU) reads its right operand (Kᵀ, shared by the query tiles) at keys in
// [0, max(N_K, kv_tile)): the tiles' first keys are clamped (flash_algorithm). The promise keeps
// bounds inference to them where a tile loop the sizes rule out (N_K < kv_tile; simplified as if
// it ran, clamps dropped) would widen the copy, so the schedule can bound it and pad its rows.
Expr key_of_tile(const lowering_state& s, const ir::node& product, const Expr& key) {
  if (!in_fused_tile(s, product) || s.options.gpu || !s.tile.keys_clamped) return key;
  const ir::dim& d = product.shape.back();
  return unsafe_promise_clamped(key, 0, max(s.extent(d.name, d.size), s.options.tiles.kv_tile) - 1);
}

// A per-tile product (Q·Kᵀ) is computed for whole blocks of rows, past the last query (a
// static size, no per-row guards): its left operand is read at the last row there. Any other
// product is read inside its rows already.
Expr row_inside(const lowering_state& s, const ir::node& product, const std::vector<ir::dim>& shape, const Expr& row) {
  if (!in_fused_tile(s, product)) return row;
  const ir::dim& d = shape[shape.size() - 2];
  return min(row, s.extent(d.name, d.size) - 1);
}

}  // namespace attn::gen
