#include "lower.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <stdexcept>
#include "attention_pattern.hpp"
#include "fast_math.hpp"
#include "nonfinite.hpp"

namespace attn::gen {

using namespace Halide;

std::vector<Expr> halide_args(const std::vector<Expr>& row_major, const Expr& batch, bool batched) {
  std::vector<Expr> args(row_major.rbegin(), row_major.rend());
  if (batched) args.push_back(batch);
  return args;
}

namespace {

// What the placeholders stand for inside a mask predicate or score modifier.
struct placeholders {
  Expr score, q_idx, kv_idx, head;
};

const Expr minus_infinity = gen::minus_infinity();

class lowering {
 public:
  lowering(const ir::graph& g, const bound_dims& bound, const lowering_options& o) : g_(g), bound_(bound), options_(o) {
    for (const attention_match& m : find_attention(g)) {
      if (!m.normalised()) softmax_free_.emplace(m.combine, m);  // either lowering weighs masked keys 0
      if (!o.fused) continue;
      attention_.emplace(m.combine, m);
      const auto& s = g.at(m.weights).shape;
      tiled_dims_.insert(s[s.size() - 2].name);
      tiled_dims_.insert(s[s.size() - 1].name);
    }
    for (int t : g_.terminals) {
      const ir::node& n = g_.at(t);
      Type type = n.kind == ir::op::int_input ? Int(32) : Float(32);
      int dims = static_cast<int>(n.shape.size()) + (n.batched ? 1 : 0);
      params_.emplace(t, ImageParam(type, dims, "p_" + std::string(n.name)));
      // A per-sequence scalar shared by the batch has batch stride 0: let its only dim have any stride.
      if (n.shape.empty() && n.batched) params_.at(t).dim(0).set_stride(Expr());
      out_.params.push_back(params_.at(t));
    }
  }

  lowered run() {
    const ir::node& root = g_.output();
    out_.output_batched = root.batched;
    if (is_materialized(root.kind)) {
      out_.output = func(g_.root);
    } else {
      auto [f, vars] = new_func("output", root);
      f(halide_args(as_exprs(vars), batch_, root.batched)) = value(g_.root, as_exprs(vars), {});
      out_.stages.push_back({f, halide_vars(vars, root.batched), lowered::stage::layout, {}, {}, {}, {}, static_extents(root), {}});
      out_.output = f;
    }
    for (int i = static_cast<int>(g_.nodes.size()) - 1; i >= 0 && !options_.fused; --i)
      if (g_.at(i).kind == ir::op::softmax) {
        out_.weights = func(i);
        out_.weights_batched = g_.at(i).batched;
        break;
      }
    return out_;
  }

 private:
  static bool is_materialized(ir::op k) {
    return k == ir::op::matmul || k == ir::op::softmax || k == ir::op::transpose;
  }

  static std::vector<Expr> as_exprs(const std::vector<Var>& v) { return {v.begin(), v.end()}; }

  std::vector<Var> halide_vars(const std::vector<Var>& row_major, bool batched) const {
    std::vector<Var> v(row_major.rbegin(), row_major.rend());
    if (batched) v.push_back(batch_);
    return v;
  }

  std::pair<Func, std::vector<Var>> new_func(const std::string& what, const ir::node& n) {
    std::vector<Var> vars;
    for (std::size_t k = 0; k < n.shape.size(); ++k) vars.emplace_back(what + "_" + std::string(n.shape[k].name) + std::to_string(k));
    return {Func(Float(32), static_cast<int>(n.shape.size()) + (n.batched ? 1 : 0), what + std::to_string(count_++)), vars};
  }

  // The extent of a dim: static, bound at jit time, or read off the first tensor that has it.
  Expr extent(std::string_view name, std::int64_t size) const {
    if (size > 0) return Expr(static_cast<int>(size));
    if (auto it = bound_.find(name); it != bound_.end()) return Expr(static_cast<int>(it->second));
    for (int t : g_.terminals) {
      const ir::node& n = g_.at(t);
      for (std::size_t k = 0; k < n.shape.size(); ++k)
        if (n.shape[k].name == name) return params_.at(t).dim(static_cast<int>(n.shape.size() - 1 - k)).extent();
    }
    throw std::logic_error("dim " + std::string(name) + " appears in no tensor");
  }

  // A node's dim sizes known when compiling (static or bound), in Halide order; 0 for run-time ones.
  std::vector<std::int64_t> static_extents(const ir::node& n) const {
    std::vector<std::int64_t> e;
    for (auto d = n.shape.rbegin(); d != n.shape.rend(); ++d) {
      auto it = bound_.find(d->name);
      e.push_back(d->size > 0 ? d->size : it != bound_.end() ? it->second : 0);
    }
    if (n.batched) e.push_back(0);
    return e;
  }

  // Index a child of rank <= parent's: it takes the trailing indices; size-1 axes read index 0.
  std::vector<Expr> broadcast_index(int child, const std::vector<Expr>& idx) const {
    const auto& s = g_.at(child).shape;
    std::vector<Expr> r(idx.end() - static_cast<std::ptrdiff_t>(s.size()), idx.end());
    for (std::size_t k = 0; k < s.size(); ++k)
      if (s[k].role == ir::dim_role::unit) r[k] = 0;
    return r;
  }

  Expr arg(const ir::node& n, std::size_t k, const std::vector<Expr>& idx, const placeholders& ph) {
    return value(n.args[k], broadcast_index(n.args[k], idx), ph);
  }

  // Does node i read a tensor's values or the score (not only indices, dims and constants)?
  bool reads_float_data(int i) const {
    const ir::node& n = g_.at(i);
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
  Expr divided(const ir::node& n, const Expr& x, const Expr& y) const {
    const ir::node& divisor = g_.at(n.args[1]);
    if (divisor.kind == ir::op::constant && reads_float_data(n.args[0])) {
      const float c = static_cast<float>(divisor.value), r = 1.0f / c;
      if (std::isnormal(c) && std::isnormal(r)) return x * r;
    }
    return x / y;
  }

  // The value of node i at a row-major index (batch implied by batch_).
  Expr value(int i, const std::vector<Expr>& idx, const placeholders& ph) {
    using ir::op;
    const ir::node& n = g_.at(i);
    auto a = [&](std::size_t k) { return arg(n, k, idx, ph); };
    switch (n.kind) {
      case op::input: case op::weight: case op::int_input:
        return params_.at(i)(halide_args(clamped(i, idx), batch_, n.batched));
      case op::constant: return Internal::make_const(Float(32), n.value);
      case op::dim_value: return cast<float>(extent(n.name, static_cast<std::int64_t>(n.value)));
      case op::placeholder: {
        const Expr* which[] = {&ph.score, &ph.q_idx, &ph.kv_idx, &ph.head};
        return *which[n.param];
      }
      case op::matmul: case op::softmax: case op::transpose:
        return func(i)(halide_args(idx, batch_, n.batched));
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
        if (transparent_.contains(i)) return s;  // applied as the fused score's `keep` instead
        return Halide::select(exact_predicate(arg(n, 1, idx, score_placeholders(n, idx, s))), s, minus_infinity);
      }
      case op::modify: {
        // modify(mask(S, p), f) runs as mask(modify(S, f), p): masked scores stay masked,
        // whatever order the two were written in.
        std::vector<int> masks;
        int inner = n.args[0];
        while (g_.at(inner).kind == op::mask) masks.push_back(inner), inner = g_.at(inner).args[0];
        Expr s = value(inner, idx, ph);
        Expr f = cast(Float(32), arg(n, 1, idx, score_placeholders(n, idx, s)));
        for (int m : masks)
          if (!transparent_.contains(m)) f = Halide::select(exact_predicate(arg(g_.at(m), 1, idx, score_placeholders(n, idx, s))), f, minus_infinity);
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
        Expr width = static_cast<int>(g_.at(n.args[0]).shape.back().size);
        std::vector<Expr> c(idx.begin(), idx.end() - 2);
        c.push_back(idx[r - 1] / width);
        c.push_back(idx[r - 2]);
        c.push_back(idx[r - 1] % width);
        return value(n.args[0], c, ph);
      }
      case op::gather: {  // the tensor at integer indices, each clamped to [0, extent - 1]
        const ir::node& table = g_.at(n.args[0]);
        std::vector<Expr> at;
        for (std::size_t k = 0; k < table.shape.size(); ++k) {
          const Expr last = extent(table.shape[k].name, table.shape[k].size) - 1;
          at.push_back(clamp(cast(Int(32), a(k + 1)), 0, last));
        }
        return params_.at(n.args[0])(halide_args(at, batch_, table.batched));
      }
      case op::repeat_heads: {  // (.., h, t, d) reads (.., h / (H / G), t, d)
        const std::size_t r = idx.size();
        const auto per_group = static_cast<int>(n.shape[r - 3].size / g_.at(n.args[0]).shape[r - 3].size);
        std::vector<Expr> c = idx;
        c[r - 3] = idx[r - 3] / per_group;
        return value(n.args[0], c, ph);
      }
      case op::unsqueeze: {
        std::vector<Expr> c = idx;
        c.erase(c.begin() + n.param);
        return value(n.args[0], c, ph);
      }
    }
    throw std::logic_error("lower: unknown op");
  }

  // a mod b as the DSL defines it, a - b·floor(a/b) (Halide's % on floats), but never through
  // Halide's float %: its simplifier rewrites x - x % c to x (Halide 21), which turned
  // block_causal's (kv - kv % 4) / 4 <= (q - q % 4) / 4 into causal. Integers (indices, and
  // integral constants, which reach here as floats) use integer %, where that rewrite is exact.
  static Expr remainder(Expr a, Expr b) {
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
  static Expr floor_div(Expr a, Expr b) {
    const std::optional<double> c = Internal::as_const_float(b);
    if (a.type().is_int() && c && *c == std::floor(*c) && *c != 0 && std::abs(*c) < 2147483647.0)
      b = Internal::make_const(a.type(), static_cast<std::int64_t>(*c));
    if (a.type().is_int() && b.type().is_int()) return a / b;
    return Halide::floor(cast(Float(32), a) / cast(Float(32), b));
  }

  // The fused pipeline computes whole tiles, past the last query or key; those reads are
  // clamped to the tensor (their results are masked or never stored).
  // Each input is clamped to its own extent, not to the dim's (read off the first tensor with
  // it): under a guard on the dim's size (a tile the sizes rule out, kept as dead code), the
  // simplifier dropped a clamp to that size, and bounds inference, which does not read the guard,
  // then asked for a whole key tile of V (a query against one key failed: "V accessed at 63").
  std::vector<Expr> clamped(int i, std::vector<Expr> idx) const {
    const ir::node& n = g_.at(i);
    for (std::size_t k = 0; k < n.shape.size(); ++k)
      if (tiled_dims_.contains(n.shape[k].name)) {
        const int dim = static_cast<int>(n.shape.size() - 1 - k);
        const Expr size = n.shape[k].size > 0 || bound_.contains(n.shape[k].name) ? extent(n.shape[k].name, n.shape[k].size)
                                                                                : params_.at(i).dim(dim).extent();
        // Keys of full tiles lie inside whenever the tile runs (mask_bounds.hpp): no clamp to
        // compute, only bounds inference to tell (it bounds the empty tile loop of N_KV < kv_tile).
        idx[k] = keys_inside_ ? unsafe_promise_clamped(idx[k], 0, size - 1) : clamp(idx[k], 0, size - 1);
      }
    return idx;
  }

  placeholders score_placeholders(const ir::node& n, const std::vector<Expr>& idx, Expr s) const {
    std::size_t r = idx.size();
    Expr head = 0;
    for (std::size_t k = 0; k < r; ++k)
      if (n.shape[k].role == ir::dim_role::heads) head = idx[k];
    return {std::move(s), idx[r - 2], idx[r - 1], head};
  }

  // Products, softmax and transposes are computed into their own Funcs (scheduled in cpu_schedule).
  Func func(int i) {
    const bool fresh = pairwise_ != nullptr && is_pairwise(g_.at(i));
    if (auto it = funcs_.find(i); !fresh && it != funcs_.end()) return it->second;
    if (auto a = attention_.find(i); a != attention_.end()) return fused(a->second);
    const ir::node& n = g_.at(i);
    auto [f, vars] = new_func(std::string(ir::op_name(n.kind)), n);
    std::vector<Expr> idx = as_exprs(vars);
    auto lhs = [&](const std::vector<Expr>& at) { return halide_args(at, batch_, n.batched); };
    lowered::stage st{f, halide_vars(vars, n.batched), lowered::stage::layout, {}, {}, {}, {}, static_extents(n), {}};
    if (n.kind == ir::op::transpose) {
      define_transpose(n, f, idx);
    } else if (n.kind == ir::op::matmul) {
      st.reduction = define_product(n, f, idx, lhs, st);
      st.kind = lowered::stage::product;
      if (auto it = funcs_.find(n.args[1]); g_.at(n.args[1]).shape.size() >= 2 && it != funcs_.end())
        st.right_operand = it->second;
    } else {
      define_softmax(n, f, idx, lhs, st);
      st.kind = lowered::stage::softmax_row;
    }
    if (fresh) {
      pairwise_->push_back(st);
    } else {
      funcs_.emplace(i, f);
      out_.stages.push_back(st);
    }
    return f;
  }

  // (d): the largest exponent field in column d (the last dim) of node i, over all its other
  // indices and the batch (flash_problem::value_exponents).
  Func exponents_by_column(int i) {
    const ir::node& n = g_.at(i);
    const std::size_t rank = n.shape.size();
    Region others;  // Halide order: the dims before the last, innermost first, then the batch
    for (std::size_t k = rank - 1; k-- > 0;) others.emplace_back(0, extent(n.shape[k].name, n.shape[k].size));
    if (n.batched) others.emplace_back(0, batch_extent());
    const RDom r(others, "value_rows" + std::to_string(count_++));
    const Var d("d");
    std::vector<Expr> idx(rank);
    for (std::size_t k = 0; k + 1 < rank; ++k) idx[k] = r[static_cast<int>(rank - 2 - k)];
    idx.back() = d;
    Expr x = value(i, idx, {});
    if (n.batched) x = Internal::substitute(batch_.name(), r[static_cast<int>(rank - 1)], x);
    Func e("value_exponents" + std::to_string(count_++));
    e(d) = cast<std::uint32_t>(0);
    e(d) = max(e(d), exponent_field(x));
    return e;
  }

  // The number of batch items: the last dim of any batched input.
  Expr batch_extent() const {
    for (int t : g_.terminals)
      if (g_.at(t).batched) return params_.at(t).dim(params_.at(t).dimensions() - 1).extent();
    throw std::logic_error("a batched node without a batched input");
  }

  // A node spanning (queries, keys) of the attention being fused: computed per tile, one copy per use.
  bool is_pairwise(const ir::node& n) const {
    const std::size_t r = n.shape.size();
    return (n.kind == ir::op::matmul || n.kind == ir::op::softmax || n.kind == ir::op::transpose) && r >= 2 &&
           n.shape[r - 2].name == pair_q_ && n.shape[r - 1].name == pair_kv_;
  }

  int index_of(const ir::node& n) const { return static_cast<int>(&n - g_.nodes.data()); }

  // Does the subtree at i read the placeholder `score`?
  bool uses_score(int i) const {
    const ir::node& n = g_.at(i);
    if (n.kind == ir::op::placeholder) return n.param == static_cast<int>(ir::placeholder::score);
    for (int a : n.args)
      if (uses_score(a)) return true;
    return false;
  }

  // Softmax-free attention: does every mask on the score's path (attention_match::chain) keep
  // the pair at idx (the weights' index)? Each predicate is read at its mask's own index.
  Expr kept_by_chain(const attention_match& m, const std::vector<Expr>& idx) {
    Expr keep = Internal::const_true();
    for (int mask : m.chain) {
      const ir::node& link = g_.at(mask);
      const std::vector<Expr> at = broadcast_index(mask, idx);
      const Expr s = uses_score(link.args[1]) ? value(link.args[0], at, {}) : Expr();
      keep = keep && arg(link, 1, at, score_placeholders(link, at, s));
    }
    return keep;
  }

  // softmax(chain(S))·V, or softmax-free f(S)·V, as one fused pipeline (flash_algorithm.hpp).
  Func fused(const attention_match& m) {
    const ir::node& weights = g_.at(m.weights);
    const std::size_t r = weights.shape.size();
    const ir::dim& q_dim = weights.shape[r - 2];
    const ir::dim& kv_dim = weights.shape[r - 1];
    const ir::node& values = g_.at(m.values);
    flash_problem p;
    p.lead = static_cast<int>(r - 2);
    p.batched = g_.at(m.combine).batched;
    p.batch = batch_;
    p.nq = extent(q_dim.name, q_dim.size);
    p.nk = extent(kv_dim.name, kv_dim.size);
    p.dv = static_cast<int>(values.shape.back().size);
    p.dv_known = static_cast<int>(static_extents(values).front());  // static or bound at jit time
    p.dv_extent = extent(values.shape.back().name, values.shape.back().size);
    // On a GPU the guarded FMA costs little beside memory, and a check over V would run on the host.
    if (!options_.gpu) p.value_exponents = exponents_by_column(m.values);
    p.suffix = out_.flash.empty() ? "" : "_" + std::to_string(out_.flash.size());
    p.score = [this, m, q_dim, kv_dim](const std::vector<Expr>& lead, const Expr& q, const Expr& kv, std::vector<stage>& pairwise) {
      auto saved = std::tuple(pairwise_, pair_q_, pair_kv_);
      pairwise_ = &pairwise;
      pair_q_ = q_dim.name;
      pair_kv_ = kv_dim.name;
      std::vector<Expr> idx = lead;
      idx.push_back(q);
      idx.push_back(kv);
      if (!m.normalised()) {
        // f(S) with the path's masks as `keep` (so that tiles can be skipped or left unchecked).
        const auto saved_transparent = transparent_;
        transparent_.insert(m.chain.begin(), m.chain.end());
        flash_problem::scored sc{cast(Float(32), value(m.score, idx, {})), kept_by_chain(m, idx)};
        transparent_ = saved_transparent;
        std::tie(pairwise_, pair_q_, pair_kv_) = saved;
        return sc;
      }
      flash_problem::scored sc{value(m.score, idx, {}), Internal::const_true()};
      for (auto it = m.chain.rbegin(); it != m.chain.rend(); ++it) {
        const ir::node& link = g_.at(*it);
        const Expr bound = arg(link, 1, idx, score_placeholders(link, idx, sc.score));
        if (link.kind == ir::op::mask) sc.keep = sc.keep && bound;
        else sc.score = cast(Float(32), bound);
      }
      std::tie(pairwise_, pair_q_, pair_kv_) = saved;
      return sc;
    };
    p.value = [this, m](const std::vector<Expr>& lead, const Expr& kv, const Expr& d, bool inside) {
      std::vector<Expr> idx = lead_index(g_.at(m.values).shape, lead);
      idx.push_back(kv);
      idx.push_back(d);
      const bool saved = keys_inside_;
      keys_inside_ = inside;
      const Expr v = value(m.values, idx, {});
      keys_inside_ = saved;
      return v;
    };
    p.with_lse = options_.with_lse;
    p.normalised = m.normalised();
    // On a GPU the lanes of the row reductions are the block's threads in x.
    const flash_schedule& t = options_.tiles;
    const std::optional<flash_gpu_schedule>& gpu = options_.gpu;
    // CPU: decoding (at most a register tile of queries) transposes K per key tile (right_operand).
    if (!gpu) {
      p.few_rows = std::min(t.q_unroll, t.q_tile);
      p.few_queries = few_queries_ = simplify(p.nq <= p.few_rows);
    }
    out_.flash.push_back(gpu ? flash_attention(p, gpu->q_tile, gpu->kv_tile, gpu->kv_tile, gpu->threads)
                             : flash_attention(p, t.q_tile, t.kv_tile, t.partial_tile, t.vector, t.pack_state ? t.vector : 0, true));
    few_queries_ = Expr();
    if (options_.with_lse) {
      out_.lse = out_.flash.back().lse;
      out_.lse_batched = p.batched;
    }
    funcs_.emplace(m.combine, out_.flash.back().output);
    return out_.flash.back().output;
  }

  void define_transpose(const ir::node& n, Func& f, const std::vector<Expr>& idx) {
    std::vector<Expr> c = idx;
    std::swap(c[c.size() - 1], c[c.size() - 2]);
    f(halide_args(idx, batch_, n.batched)) = value(n.args[0], c, {});
  }

  // The right operand of product n at ib. A materialised transpose (Kᵀ) is computed once and
  // shared by every query tile; where few queries share it (few_queries_: decoding, one small
  // query tile per head), a per-tile product reads a copy transposed per key tile instead
  // (stage::tile_transpose), and the pass over K, a round trip through memory, is not made.
  Expr right_operand(const ir::node& n, const std::vector<Expr>& ib, lowered::stage& st) {
    const Expr shared = value(n.args[1], ib, {});
    const ir::node& t = g_.at(n.args[1]);
    const bool per_tile = pairwise_ != nullptr && is_pairwise(n) && t.kind == ir::op::transpose && t.shape.size() >= 2;
    if (!per_tile || !few_queries_.defined() || is_const_zero(few_queries_)) return shared;
    auto [f, vars] = new_func("tile_transpose", t);
    define_transpose(t, f, as_exprs(vars));
    st.tile_transpose = f;
    return select(few_queries_, f(halide_args(ib, batch_, t.batched)), shared);
  }

  template <class Lhs>
  RDom define_product(const ir::node& n, Func& f, const std::vector<Expr>& idx, const Lhs& lhs, lowered::stage& st) {
    const auto& sa = g_.at(n.args[0]).shape;
    const auto& sb = g_.at(n.args[1]).shape;
    RDom k(0, extent(sa.back().name, sa.back().size), "k");
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
      ia.push_back(row_inside(n, sa, idx[idx.size() - 2]));
      ia.push_back(k);
      ib = lead_index(sb, lead);
      ib.push_back(k);
      ib.push_back(key_of_tile(n, idx.back()));
    }
    f(lhs(idx)) = 0.0f;
    Expr a = value(n.args[0], ia, {});
    const Expr b = right_operand(n, ib, st);
    // Softmax-free attention: a key a mask on the score's path removes has weight 0 (as fused).
    const auto softmax_free = softmax_free_.find(index_of(n));
    if (softmax_free != softmax_free_.end()) a = Halide::select(exact_predicate(kept_by_chain(softmax_free->second, ia)), a, 0.0f);
    // Weights · values: a key with weight 0 (masked) has no influence, even a NaN value.
    const bool weights = g_.at(n.args[0]).kind == ir::op::softmax || softmax_free != softmax_free_.end();
    f(lhs(idx)) += weights ? weighted(a, b) : a * b;
    return k;
  }

  // A per-tile product (CPU) reads its right operand (Kᵀ, shared by the query tiles) at keys in
  // [0, max(N_K, kv_tile)): the tiles' first keys are clamped (flash_algorithm). The promise keeps
  // bounds inference to them where a tile loop the sizes rule out (N_K < kv_tile; simplified as if
  // it ran, clamps dropped) would widen the copy, so the schedule can bound it and pad its rows.
  Expr key_of_tile(const ir::node& product, const Expr& key) const {
    if (pairwise_ == nullptr || !is_pairwise(product) || options_.gpu) return key;
    const ir::dim& d = product.shape.back();
    return unsafe_promise_clamped(key, 0, max(extent(d.name, d.size), options_.tiles.kv_tile) - 1);
  }

  // A per-tile product (Q·Kᵀ) is computed for whole blocks of rows, past the last query (a
  // static size, no per-row guards): its left operand is read at the last row there. Any other
  // product is read inside its rows already.
  Expr row_inside(const ir::node& product, const std::vector<ir::dim>& shape, const Expr& row) const {
    if (pairwise_ == nullptr || !is_pairwise(product)) return row;
    const ir::dim& d = shape[shape.size() - 2];
    return min(row, extent(d.name, d.size) - 1);
  }

  // A matrix operand's leading (batch-like) dims, aligned from the right against the output's.
  static std::vector<Expr> lead_index(const std::vector<ir::dim>& s, const std::vector<Expr>& lead) {
    std::size_t own = s.size() - 2;
    std::vector<Expr> r(lead.end() - static_cast<std::ptrdiff_t>(own), lead.end());
    for (std::size_t k = 0; k < own; ++k)
      if (s[k].role == ir::dim_role::unit) r[k] = 0;
    return r;
  }

  // Safe softmax over the last axis, with the rules of nonfinite.hpp: -inf scores weigh 0, a
  // row without a finite score is all 0, a NaN or +inf score makes its row NaN.
  template <class Lhs>
  void define_softmax(const ir::node& n, Func& f, const std::vector<Expr>& idx, const Lhs& lhs, lowered::stage& st) {
    const ir::dim& last = n.shape.back();
    RDom k(0, extent(last.name, last.size), "k");
    std::vector<Expr> row(idx.begin(), idx.end() - 1), at_k = row;
    at_k.push_back(k);
    Func m("row_max"), e("row_exp"), s("row_sum");
    auto row_args = halide_args(row, batch_, n.batched);
    const Expr x_k = value(n.args[0], at_k, {}), x = value(n.args[0], idx, {});
    m(row_args) = no_score();
    m(row_args) = Halide::max(m(row_args), kept_or_no_score(x_k));
    e(lhs(idx)) = kept_exp(x, m(row_args));
    s(row_args) = 0.0f;
    s(row_args) += e(lhs(at_k));
    f(lhs(idx)) = normalise(e(lhs(idx)), s(row_args));
    st.row_max = m;
    st.row_exp = e;
    st.row_sum = s;
    if (options_.with_lse && pairwise_ == nullptr && !out_.lse.defined()) define_lse(n, row, x_k);
  }

  // The log-sum-exp of each row of the softmax, by the softmax's own rule (nonfinite.hpp): its
  // own running max and sum, computed per row (the softmax's helpers live inside the softmax's loops).
  void define_lse(const ir::node& n, const std::vector<Expr>& row, const Expr& x_k) {
    const auto row_args = halide_args(row, batch_, n.batched);
    Func m("lse_max"), s("lse_sum"), lse("lse");
    m(row_args) = no_score();
    m(row_args) = Halide::max(m(row_args), kept_or_no_score(x_k));
    s(row_args) = 0.0f;
    s(row_args) += kept_exp(x_k, m(row_args));
    lse(row_args) = log_sum_exp(m(row_args), s(row_args));
    std::vector<Var> vars;
    for (auto it = row.rbegin(); it != row.rend(); ++it) vars.push_back(Var(it->as<Internal::Variable>()->name));
    if (n.batched) vars.push_back(batch_);
    std::vector<std::int64_t> extents = static_extents(n);
    extents.erase(extents.begin());
    out_.stages.push_back({lse, vars, lowered::stage::row_reduction, m, {}, s, {}, extents, {}});
    out_.lse = lse;
    out_.lse_batched = n.batched;
  }

  const ir::graph& g_;
  const bound_dims& bound_;
  const lowering_options& options_;
  std::map<int, attention_match> attention_;  // by combine node
  std::map<int, attention_match> softmax_free_;  // softmax-free attentions, fused or not, by combine node
  std::set<int> transparent_;                  // masks evaluated as a fused score's `keep`, not as -inf
  std::set<std::string_view> tiled_dims_;     // query and key dims of fused attentions
  bool keys_inside_ = false;  // reading V at keys of full tiles: promised, not clamped
  std::vector<stage>* pairwise_ = nullptr;    // while evaluating a fused score: its per-pair Funcs
  Expr few_queries_;                          // while lowering a fused attention: flash_problem::few_queries
  std::string_view pair_q_, pair_kv_;
  std::map<int, ImageParam> params_;
  std::map<int, Func> funcs_;
  Var batch_{"batch"};
  int count_ = 0;
  lowered out_;
};

}  // namespace

lowered lower(const ir::graph& g, const bound_dims& bound, const lowering_options& options) {
  return lowering(g, bound, options).run();
}

}  // namespace attn::gen
