#include "generators/cpu/matmul_schedule.hpp"

#include <algorithm>
#include "generators/cpu/fuse_loops.hpp"
#include "generators/cpu/panels.hpp"

namespace attn::gen {

using namespace Halide;

namespace {

using S = matmul_schedule;
constexpr parameter<S> parameters[] = {
    number<&S::vector_width>("vector_width", 1),
    number<&S::vectors>("vectors", 1),
    number<&S::rows>("rows", 1),
    number<&S::k_block>("k_block", 0),
    number<&S::col_block>("col_block", 0),
    choice<&S::parallel>("parallel", on_off),
};
constexpr parameter_table<S> table{"matmul schedule", parameters};

// Vector registers the tile's accumulators, operand vectors and broadcast share.
int vector_registers(const Target& t) {
  if (t.arch == Target::X86) return t.has_feature(Target::AVX512) ? 32 : 16;
  return 32;  // AArch64 NEON/SVE, RISC-V V: 32
}

}  // namespace

const parameter_table<matmul_schedule>& matmul_schedule::parameters() { return table; }

std::string matmul_schedule::to_string() const { return table.print(*this); }

matmul_schedule matmul_schedule::parse(std::string_view text) { return table.parse(text, {}); }

matmul_shape shape_of(const lowered::stage& product) {
  matmul_shape s;
  const auto& e = product.extents;
  if (!e.empty()) s.cols = e[0];
  if (e.size() >= 2) s.rows = e[1];
  if (product.reduction.defined())
    if (auto k = Internal::as_const_int(product.reduction.x.extent())) s.depth = *k;
  return s;
}

matmul_schedule default_matmul_schedule(const matmul_shape& shape, const Target& target) {
  matmul_schedule s;
  s.vector_width = target.natural_vector_size<float>();
  // Two vectors across: each broadcast of a feeds two FMAs, and the B panel a tile streams over
  // the reduction (depth · 2V floats) stays in L2. One vector when the product is that narrow.
  s.vectors = shape.cols > 0 && shape.cols <= s.vector_width ? 1 : 2;
  // As many rows as the registers allow: vectors · rows accumulators, plus the b vectors and a broadcast.
  s.rows = std::min((vector_registers(target) - s.vectors - 2) / s.vectors, 16);
  if (shape.rows > 0) s.rows = static_cast<int>(std::min<std::int64_t>(s.rows, shape.rows));
  // Wide products run a block of b's columns at a time through all row blocks, the block small
  // enough (256 KiB) to stay in L2 even when other programs share the core; measured on 2 threads at
  // (2048, 512)·(512, 512): 1.4-1.8x. Only for static widths: a run-time width would guard every tile.
  const int width = s.vectors * s.vector_width;
  if (shape.cols > 0 && shape.depth > 0) {
    const std::int64_t fits = (256 << 10) / (shape.depth * 4) / width * width;
    if (fits >= width && fits < shape.cols) s.col_block = static_cast<int>(fits);
  }
  return s;
}

namespace {

// Whether the product's columns var (vars[0]) runs along the innermost dim of every operand it
// indexes: then a tile's columns are vector loads. Not so for a matrix·vector product, whose
// output runs down the matrix's rows.
class columns_contiguous : public Internal::IRVisitor {
 public:
  explicit columns_contiguous(const Var& column) : column_(column.name()) {}
  bool contiguous = true;

 private:
  using Internal::IRVisitor::visit;
  void visit(const Internal::Call* c) override {
    if (c->call_type == Internal::Call::Halide || c->call_type == Internal::Call::Image) {
      bool anywhere = false;
      for (const Expr& a : c->args) anywhere = anywhere || Internal::expr_uses_var(a, column_);
      if (anywhere && !Internal::expr_uses_var(c->args.front(), column_)) contiguous = false;
    }
    Internal::IRVisitor::visit(c);
  }
  std::string column_;
};

// The read of b in f(n, ...) += a(k, ...) · b(n, k, ...): the one call (of a Func or an input)
// other than f's own whose innermost arg uses the columns var n. None when there is not exactly one.
class columns_operand : public Internal::IRVisitor {
 public:
  columns_operand(const Func& f, const Var& column) : f_(f.name()), column_(column.name()) {}
  const Internal::Call* found = nullptr;
  int count = 0;

 private:
  using Internal::IRVisitor::visit;
  void visit(const Internal::Call* c) override {
    const bool operand = c->call_type == Internal::Call::Halide || c->call_type == Internal::Call::Image;
    if (operand && c->name != f_ && !c->args.empty() && Internal::expr_uses_var(c->args.front(), column_)) {
      found = c;
      ++count;
    }
    Internal::IRVisitor::visit(c);
  }
  std::string f_, column_;
};

// b's columns packed, a block at a time (at `block`), into panels of one register tile's width
// (panels.hpp): 1.3-1.4x for (2048, 512)·(512, 512), whose loads of b were a quarter of its time
// (AVX2). Only where b is read at n itself, over the product's `columns` (known when compiling):
// columns past the last are then clamped (read, never used: a tail tile is guarded).
void pack_column_panels(Func acc, const Var& n, std::int64_t columns, Func out, const Var& block, int width) {
  columns_operand b(acc, n);
  acc.update_value().accept(&b);
  if (b.count != 1 || columns <= 0 || b.found->args.size() < 2) return;
  const auto* column = b.found->args.front().as<Internal::Variable>();
  if (!column || column->name != n.name()) return;
  Func panels = read_in_panels(acc, b.found, width, static_cast<int>(columns - 1));
  const Var lane = panels.args().front();
  panels.compute_at(out, block).bound(lane, 0, width).vectorize(lane);
}

// Matrix·vector: one dot product per output element. Each row block accumulates vector_width
// partial sums per output (rfactor: vector loads along the reduction), then adds them up.
Func schedule_dot_products(const lowered::stage& product, const matmul_schedule& s) {
  Func f = product.func;
  const std::vector<Var>& v = product.vars;
  const int vec = s.vector_width;
  constexpr TailStrategy guard = TailStrategy::GuardWithIf;
  f.compute_root().vectorize(v.front(), vec, guard);
  RVar ko("ko"), ki("ki");
  Var lane("lane"), block("block");
  Stage u = f.update();
  Func partial = u.split(product.reduction.x, ko, ki, vec, guard).rfactor(ki, lane);
  u.split(v.front(), block, v.front(), s.rows, guard);
  std::vector<Var> outer{block};
  outer.insert(outer.end(), v.begin() + 1, v.end());
  const Var row_block = fuse_all(u, outer);
  if (s.parallel) u.parallel(row_block);
  partial.compute_at(f, row_block).reorder_storage(lane, v.front()).vectorize(lane);
  partial.update().reorder(lane, v.front(), ko).vectorize(lane).unroll(v.front());
  return f;
}

// f (a pure init, then f += ... over k) as a register tile: columns in vectors (unrolled), rows
// unrolled, k innermost around them, so the whole tile stays in vector registers.
void register_tile(Func f, const Var& n, const Var* m, RVar k, const matmul_schedule& s) {
  constexpr TailStrategy guard = TailStrategy::GuardWithIf;
  Var nv("nv"), nl("nl");
  f.split(n, nv, nl, s.vector_width, guard).vectorize(nl).unroll(nv);
  // Rows unrolled in blocks of `rows`: a consumer may ask for a region that is not a whole number
  // of tiles (the fused attention reads whole key tiles), so the extent need not be constant.
  if (m) f.unroll(*m, s.rows, guard);
  Stage u = f.update();
  u.split(n, nv, nl, s.vector_width, guard);
  std::vector<VarOrRVar> order{nl, nv};
  if (m) order.push_back(*m);
  order.push_back(k);
  u.reorder(order).vectorize(nl).unroll(nv);
  if (m) u.unroll(*m, s.rows, guard);
}

}  // namespace

Func apply_matmul_schedule(const lowered::stage& product, const matmul_schedule& s) {
  table.check(s);
  Func acc = product.func;
  const std::vector<Var>& v = product.vars;
  if (v.empty() || !product.reduction.defined()) {  // a scalar: nothing to tile
    acc.compute_root();
    return acc;
  }
  columns_contiguous access(v.front());
  acc.update_value().accept(&access);
  if (!access.contiguous) return schedule_dot_products(product, s);
  // The product in memory; every consumer (and the pipeline, when it is the output) reads it.
  Func out = acc.in();
  out.compute_root();
  // Static sizes tell Halide the loop bounds: whole tiles need no tail code (half the compile time).
  for (std::size_t i = 0; i < v.size() && i < product.extents.size(); ++i)
    if (product.extents[i] > 0) out.bound(v[i], 0, static_cast<int>(product.extents[i]));

  const int vec = s.vector_width, width = s.vectors * vec;
  const bool has_rows = v.size() >= 2;
  const Var n = v[0];
  Var no("no"), ni("ni"), mo("mo"), mi("mi"), nt("nt"), nr("nr"), nv("nv"), nl("nl");
  // Guarded tails everywhere: a partial tile reads nothing beyond the operands' bounds.
  constexpr TailStrategy guard = TailStrategy::GuardWithIf;

  if (has_rows) {
    out.tile(n, v[1], no, mo, ni, mi, width, s.rows, guard).vectorize(ni, vec).unroll(ni).unroll(mi);
    if (s.col_block > 0 && s.k_block == 0) {  // column blocks outermost: all row blocks meet one block of b's columns
      Var nb("nb");
      const int tiles = (s.col_block + width - 1) / width;
      out.split(no, nb, no, tiles, guard).reorder(ni, mi, no, mo, nb);
      pack_column_panels(acc, n, product.extents.empty() ? 0 : product.extents[0], out, nb, width);
    }
    // Row blocks apart from the outer dims (heads, batch): fused, every tile would be guarded.
    if (s.parallel) parallel_rows(out, mo, std::vector<Var>(v.begin() + 2, v.end()));
  } else {
    out.split(n, no, ni, width, guard).vectorize(ni, vec).unroll(ni);
    if (s.parallel) out.parallel(no);
  }

  if (s.k_block > 0 && has_rows) {
    // Blocks of k outermost in a row block: rfactor sums each block into a register tile (`part`);
    // the stage's Func adds the blocks' tiles up in memory, a row block's columns at a time.
    RVar ko("ko"), ki("ki");
    Var kb("kb");
    Stage u = acc.update();
    Func part = u.split(product.reduction.x, ko, ki, s.k_block, guard).rfactor(ko, kb);
    acc.compute_at(out, mo).split(n, nv, nl, vec, guard).vectorize(nl);
    u.split(n, nt, nr, width, guard).split(nr, nv, nl, vec, guard).reorder(nl, nv, v[1], nt, ko);
    u.vectorize(nl).unroll(nv).unroll(v[1], s.rows, guard);
    part.compute_at(acc, nt);
    register_tile(part, n, &v[1], ki, s);
  } else {
    acc.compute_at(out, no);
    // One tile's accumulators, of a size known when compiling, so on the stack: Halide cannot
    // bound the rows (their unroll is guarded), and sized at run time they were a malloc and free
    // per tile (6% of multi-head attention with projections, in glibc's free).
    acc.bound_storage(n, width);
    if (has_rows) acc.bound_storage(v[1], s.rows);
    for (std::size_t i = 2; i < v.size(); ++i) acc.bound_storage(v[i], 1);
    register_tile(acc, n, has_rows ? &v[1] : nullptr, product.reduction.x, s);
  }
  return out;
}

}  // namespace attn::gen
