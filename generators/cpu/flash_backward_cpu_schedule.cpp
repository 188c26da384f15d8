#include "generators/cpu/flash_backward_cpu_schedule.hpp"

#include <algorithm>
#include <cstdint>
#include "generators/cpu/fuse_loops.hpp"
#include "generators/cpu/register_tile.hpp"

namespace attn::gen {

using namespace Halide;

namespace {

// Bytes of a tile's buffers a thread's stack holds (threads have MiBs of stack: 8 MiB by default
// on Linux).
constexpr std::int64_t stack_budget = std::int64_t(512) << 10;

void schedule_pass(const backward_funcs& b, backward_pass& p, const flash_schedule& s) {
  const int v = s.vector;
  // Tasks: the lead dims and batch items, and in two passes the pass's own tiles; the sums of a
  // task stay in its rows of `acc`.
  const bool sweep = p.order == backward_order::sweep;
  std::vector<Var> tasks;
  if (!sweep) tasks.push_back(p.tile);
  tasks.insert(tasks.end(), b.lead.begin(), b.lead.end());
  if (b.batched) tasks.push_back(b.batch);
  std::vector<Var> pure_tasks{p.tile};
  pure_tasks.insert(pure_tasks.end(), b.lead.begin(), b.lead.end());
  if (b.batched) pure_tasks.push_back(b.batch);
  p.acc.compute_root().vectorize(p.d, v, TailStrategy::GuardWithIf).parallel(fuse_all(p.acc, pure_tasks));
  // The width fixed: register tiles of a constant size, no guard per vector in the inner loops.
  if (p.width_known > 0) p.acc.bound(p.d, 0, p.width_known);
  Stage u = p.acc.update();
  // The exits' products: d in registers (all of it where it fits) × rows (a divisor of the tile's).
  const int vectors = pv_tile_vectors(s, p.width_known);
  int rows = std::min(s.q_unroll, p.tile_rows);
  while (p.tile_rows % rows != 0) --rows;
  Var register_tiles;
  if (sweep) {
    // Each slot's rows in register tiles, its product computed per register tile into registers
    // (below) and added to acc where the tile ends; the slots unrolled: each adds its one product
    // (the mux over them then selects at compile time).
    std::vector<VarOrRVar> order{p.d};
    for (int k = 0; k < p.r.dimensions(); ++k) order.push_back(p.r[k]);
    order.insert(order.end(), tasks.begin(), tasks.end());
    u.reorder(order).unroll(p.r[1]);
    register_tiles = register_tile(u, p.d, p.r[0], {}, v, vectors, rows);
  } else {
    std::vector<VarOrRVar> order{p.d, p.i, p.r.x};
    order.insert(order.end(), tasks.begin(), tasks.end());
    u.reorder(order).vectorize(p.d, v, TailStrategy::GuardWithIf);
  }
  if (!tasks.empty()) u.parallel(fuse_all(u, tasks));
  never_partition(p.acc);

  // Per tile, every Func spans one tile of keys: that extent said constant, so that the register
  // tiles carry no guard on keys (a guard in the contracted loop keeps the accumulators in memory).
  // Aligned to the tile first: bounds inference narrows a region to the pairs a mask keeps (a
  // window: the keys from the query tile's band on), which then starts inside the tile. The
  // queries' extent stays as inferred (narrowed along a causal diagonal, its bound is looser than a tile).
  const LoopLevel tile(p.acc, p.tile_loop());
  auto one_tile = [&](Func f, const Var& keys, const Var&) {
    f.compute_at(tile).align_bounds(keys, b.kv_tile).bound_extent(keys, b.kv_tile);
    f.vectorize(keys, v, TailStrategy::GuardWithIf);
  };
  for (stage& pw : p.pairwise) {
    one_tile(pw.func, pw.vars[0], pw.vars[1]);
    if (pw.kind == stage::product) {
      // A block of keys in vectors × q_unroll rows, the contracted dim inside (Q·Kᵀ, dO·Vᵀ).
      int vectors = std::max(1, std::min(s.kv_vectors, b.kv_tile / v));
      while (vectors > 1 && (b.kv_tile / v) % vectors != 0) --vectors;
      register_tile_product(pw, pw.vars[0], pw.vars[1], v, vectors, s.q_unroll);
      if (pw.right_finite.defined()) {
        pw.right_finite.compute_root();
        pw.func.update().specialize(pw.right_finite());
      }
    }
    never_partition(pw.func);
  }
  for (Func f : p.values) {
    one_tile(f, f.args()[0], f.args()[1]);
    never_partition(f);
  }
  // The products' other operands, a tile's rows each, where their tile changes: a sweep's key
  // tiles outside its query tiles.
  for (backward_pass::operand& o : p.operands) {
    const LoopLevel rows_change = sweep && !o.query_rows ? LoopLevel(p.acc, p.r[3]) : tile;
    o.func.compute_at(rows_change).vectorize(o.func.args()[0], v, TailStrategy::GuardWithIf);
    never_partition(o.func);
  }
  // A tile's buffers (its pairs' values, the operands' rows) on the stack where they fit
  // stack_budget together. On the heap, each tile mallocs and frees them (thousands of blocks a
  // call), and glibc may return their pages to the system and fault them in again: at T = 1024,
  // Dh = 128, ~20000 page faults a call and 1.7x slower where no larger block had raised glibc's
  // trim threshold (an AOT kernel whose large blocks its allocator keeps: checked_call.c).
  if (p.width_known > 0) {
    const std::int64_t pair_bytes = std::int64_t(b.kv_tile) * b.q_tile * 4, row_bytes = std::int64_t(p.width_known) * 4;
    std::int64_t bytes = pair_bytes * static_cast<std::int64_t>(p.pairwise.size() + p.values.size());
    for (const backward_pass::operand& o : p.operands) bytes += row_bytes * (o.query_rows ? b.q_tile : b.kv_tile);
    if (bytes <= stack_budget) {
      for (stage& pw : p.pairwise) pw.func.store_in(MemoryType::Stack);
      for (Func f : p.values) f.store_in(MemoryType::Stack);
      for (backward_pass::operand& o : p.operands) o.func.store_in(MemoryType::Stack);
    }
  }
  // The reductions' sums per tile: one serial pass over the tile's pairs (a fixed order), the
  // lanes innermost, so that consecutive keys add to different sums.
  // Sums per offset: a row's keys in vectors, each key of a row on its own offset (no two lanes
  // of a vector add to one sum, so the race Halide cannot rule out is none), rows in order.
  for (Func f : p.offset_sums) {
    f.compute_at(tile).vectorize(f.args()[0], v, TailStrategy::GuardWithIf);
    const std::vector<RVar> pairs = f.rvars();
    f.update().allow_race_conditions().vectorize(pairs[0], v, TailStrategy::GuardWithIf);
    never_partition(f);
  }
  for (Func f : p.tile_sums) {
    f.compute_at(tile);
    std::vector<VarOrRVar> lanes_inside{f.args()[1]};
    for (const RVar& r : f.rvars()) lanes_inside.emplace_back(r);
    f.update().reorder(lanes_inside);
    never_partition(f);
  }
  // The exits' products as register tiles, the tile's other dim inside: in a sweep one register
  // tile at a time, where acc adds it; else the pass's whole tile.
  for (std::size_t k = 0; k < p.products.size(); ++k) {
    Func f = p.products[k];
    if (sweep) {
      f.compute_at(p.acc, register_tiles);
      register_tile(Stage(f), p.d, p.i, {}, v, vectors, rows);
    } else {
      f.compute_at(tile).bound_extent(p.i, p.tile_rows).vectorize(p.d, v, TailStrategy::GuardWithIf);
    }
    register_tile(f.update(), p.d, p.i, {p.contracted[k].x}, v, vectors, rows);
    if (p.finite[k].defined()) {
      p.finite[k].compute_root();
      f.update().specialize(p.finite[k]());
    }
    never_partition(f);
  }
}

}  // namespace

void schedule_flash_backward_cpu(backward_funcs& b, const flash_schedule& s, const Target&) {
  for (backward_pass& p : b.passes) schedule_pass(b, p, s);
}

}  // namespace attn::gen
