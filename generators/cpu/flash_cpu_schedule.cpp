#include "generators/cpu/flash_cpu_schedule.hpp"

#include <algorithm>

#include "generators/cpu/fuse_loops.hpp"
#include "generators/cpu/pair_copy.hpp"
#include "generators/cpu/register_tile.hpp"

namespace attn::gen {

using namespace Halide;

namespace {

// A copy of the product's right operand (Kᵀ) for this tile, rows padded by one vector so that
// rows a power of two apart do not share cache sets.
void stage_right_operand(stage& st, const LoopLevel& at, const flash_schedule& s) {
  Func staged = st.right_operand.in(st.func);
  const Var keys = staged.args().front();
  staged.compute_at(at).bound_storage(keys, s.kv_tile + s.vector).vectorize(keys, s.vector, TailStrategy::GuardWithIf);
}

// Kᵀ (a product's right operand, keys innermost) stored with an odd number of cache lines per
// row: a register tile walks its rows, one per step, and at a power-of-two number of keys all
// of them would share one L1 set. 1.01-1.08x at T = 1024..4096 (AVX2) for full attention; a
// sliding window's Q·Kᵀ, unpadded, took 1.5x as long as its P·V (T = 4096, AVX2).
void pad_right_operand(stage& st, const Expr& keys) {
  if (st.kind != stage::product || !st.right_operand.defined()) return;
  constexpr int line = 16;  // floats per 64-byte cache line
  st.right_operand.bound_storage(st.right_operand.args().front(), (((keys + line - 1) / line) | 1) * line);
}

// Kᵀ for one key tile (stage::tile_transpose), transposed from K in square blocks of one vector
// (loads and stores whole vectors, shuffled in registers); rows padded by a vector, as stage_right_operand's.
void transpose_per_tile(Func t, const LoopLevel& tile, const flash_schedule& s) {
  const Var keys = t.args()[0], d = t.args()[1];
  Var ko, ki, dO, di;
  t.compute_at(tile).bound_storage(keys, s.kv_tile + s.vector);
  t.split(keys, ko, ki, s.vector, TailStrategy::GuardWithIf)
      .split(d, dO, di, s.vector, TailStrategy::GuardWithIf)
      .reorder(ki, di, ko, dO)
      .vectorize(ki)
      .unroll(di);
}

// K's pairs for one key tile (a paired product's stage::tile_transpose): a vector of keys' rows
// at a time, transposed in registers; rows padded by a vector, as transpose_per_tile's.
void pairs_per_tile(const stage& st, const LoopLevel& tile, const flash_schedule& s) {
  Func t = st.tile_transpose;
  t.compute_at(tile).bound_storage(t.args()[1], s.kv_tile + s.vector);
  split_pair_copy(t, st.tile_source, s.vector, pairs_per_row_block, false);
}

// Partial dot products of few queries (stage::dots) and their sums, computed where their product
// is: a register tile of keys × rows (independent sums, the lanes a vector each) along the
// contracted dim, each vector of a key's row and of a query's row loaded once per tile; the sums a
// vector of keys at a time (each key's lanes halved first, stage::dot_halves), apart from the
// product's register tiles (unrolled there, each tile would repeat them: several times the code
// and the compile time).
// Steps of 8 keys × 2 rows (16 of 32 registers; AVX2: 4 × 2 of 16), the rows rounded up to a
// whole step: an odd row count computes one row more (its queries' rows clamped at the last),
// where a guarded row keeps every sum in memory, a load and a store per FMA (8 queries 1.1x
// faster). One query (`one_row`, a version of its own): steps of 8 keys, nothing rounded (the
// second row was 1.2x slower).
void few_query_dots(const stage& st, const LoopLevel& at, int keys, int rows, int vector, const Expr& one_row) {
  const int keys_per_step = vector >= 16 ? 8 : 4, rows_per_step = 2;
  Func dots = st.dots, sums = st.dot_sums;
  const std::vector<Var> v = dots.args();
  const Var lane = v[0], key = v[1], row = v[2];
  // The partial dots of a register tile pass 16 KiB (16 lanes x 64 keys x 6 rows): Halide would
  // take them from the heap per tile; on its pseudostack a task allocates once (1q decode 4% faster).
  dots.compute_at(at)
      .bound_storage(key, keys)
      .bound_storage(row, (rows + rows_per_step - 1) / rows_per_step * rows_per_step)
      .vectorize(lane)
      .store_in(MemoryType::Stack);
  // The contracted dim's blocks inside the steps; blocks split in halves (stage::split_rows):
  // both halves of a block, from its one load, in a row.
  const std::vector<RVar> blocks = dots.rvars();
  int query_vectors = 1;  // a query row's vectors along the contracted dim
  for (const RVar& b : blocks) query_vectors *= static_cast<int>(Internal::as_const_int(b.extent()).value_or(64));
  const int registers = vector >= 16 ? 32 : 16;
  auto steps = [&](Stage stage, int keys_at_once, int rows_at_once) {
    Var ko("dot_keys"), ki("dot_key"), ro("dot_rows"), ri("dot_row");
    stage.split(key, ko, ki, keys_at_once, TailStrategy::GuardWithIf);
    if (rows_at_once > 1) stage.split(row, ro, ri, rows_at_once, TailStrategy::RoundUp).unroll(ri);
    // One row whose vectors stay in registers beside the sums (and a few loads): each key's row
    // read whole before the next key's (its blocks unrolled), the loads along memory as the
    // hardware prefetcher follows them (1q decode 1.02-1.1x).
    const bool along_rows = rows_at_once == 1 && query_vectors + keys_at_once <= registers - 4;
    std::vector<VarOrRVar> order{lane};
    if (!along_rows) order.push_back(ki);
    if (rows_at_once > 1) order.push_back(ri);
    order.insert(order.end(), blocks.begin(), blocks.end());
    if (along_rows) {
      order.push_back(ki);
      for (const RVar& b : blocks) stage.unroll(b);
    }
    order.insert(order.end(), {ko, rows_at_once > 1 ? ro : row});
    stage.reorder(order).vectorize(lane).unroll(ki);
    if (blocks.size() > 1) stage.unroll(blocks.front());
  };
  steps(dots.update().specialize(one_row), 8, 1);  // before the general schedule, which it would copy
  steps(dots.update(), keys_per_step, rows_per_step);

  const Var sum_key = sums.args()[0], sum_row = sums.args()[1];
  Var sum_keys("dot_sum_keys"), sum_key_vector;
  sums.compute_at(at)
      .bound_storage(sum_key, keys)
      .bound_storage(sum_row, rows)
      .split(sum_key, sum_keys, sum_key_vector, vector, TailStrategy::GuardWithIf)
      .vectorize(sum_key_vector);
  // The halvings per vector of keys the sums take: a vector of each key's lanes at a time.
  int lanes = vector;
  for (Func half : st.dot_halves) {
    lanes /= 2;
    const Var half_lane = half.args()[0], half_key = half.args()[1], half_row = half.args()[2];
    half.compute_at(sums, sum_keys)
        .bound_storage(half_lane, lanes)
        .bound_storage(half_key, vector)
        .bound_storage(half_row, 1)
        .vectorize(half_lane, lanes)
        .unroll(half_key, vector, TailStrategy::GuardWithIf);
    never_partition(half);
  }
  never_partition(dots);
  never_partition(sums);
}

// Kᵀ copied per key tile (stage_kv): its blocks are then walked outside the rows, each reused by every row.
bool staged_right_operand(const stage& st, const flash_schedule& s) { return s.stage_kv && st.right_operand.defined(); }

// A register tile of a product (Q·Kᵀ) with its keys (vectors) and rows: no wider than the step's
// key tile (a wider one would run guarded).
int product_vectors(const flash_schedule& s, int keys) { return std::max(1, std::min(s.kv_vectors, keys / s.vector)); }

// `in_registers`: `at` is one register tile of the scores, which read the product there (a lone
// product, flash_step::score's only pairwise stage); otherwise `at` is a block of `rows` rows.
void schedule_pairwise(stage& st, const LoopLevel& at, bool in_registers, const LoopLevel& tile, const flash_schedule& s,
                       int rows, int keys, const Expr& one_row) {
  if (st.tile_transpose.defined()) {
    if (st.paired) pairs_per_tile(st, tile, s);
    else transpose_per_tile(st.tile_transpose, tile, s);
  }
  const int vectors = product_vectors(s, keys);
  // At most one tile's keys and one block's rows: without the bound, the clamps at the last
  // row and key make Halide size it dynamically (a heap allocation per block).
  st.func.compute_at(at).store_at(at);
  if (in_registers) {
    st.func.bound_storage(st.vars[0], s.vector * vectors).bound_storage(st.vars[1], s.q_unroll);
    register_tile(st.func, st.vars[0], st.vars[1], {}, s.vector, vectors, s.q_unroll);
  } else {
    st.func.bound_storage(st.vars[0], s.kv_tile).bound_storage(st.vars[1], rows);
    st.func.vectorize(st.vars.front(), s.vector, TailStrategy::GuardWithIf);
  }
  if (st.dots.defined()) few_query_dots(st, at, in_registers ? s.vector * vectors : s.kv_tile, in_registers ? s.q_unroll : rows, s.vector, one_row);
  if (st.kind == stage::product) {
    if (staged_right_operand(st, s)) stage_right_operand(st, tile, s);
    // In registers the tile is one block: the order of blocks is the scores' (schedule_step).
    register_tile_product(st, st.vars[0], st.vars[1], s.vector, vectors, s.q_unroll,
                          staged_right_operand(st, s) && !in_registers ? key_blocks_outside : rows_outside);
  } else if (st.kind == stage::softmax_row) {
    for (Func helper : {st.row_max, st.row_exp, st.row_sum}) helper.compute_at(at);
  }
}

// Is V finite? One pass over it per call, before the tasks, row by row: V's columns innermost
// (vectors), every other index outside them.
void schedule_value_check(flash_funcs& f, int vector) {
  f.values_finite.compute_root();
  Func e = f.value_exponents;
  const Var d = e.args().front();
  e.compute_root().vectorize(d, vector, TailStrategy::GuardWithIf);
  std::vector<VarOrRVar> order{d};
  for (const auto& rv : e.function().update(0).schedule().rvars()) order.push_back(RVar(rv.var));
  e.update().reorder(order).vectorize(d, vector, TailStrategy::GuardWithIf);
}

// N_Q known only at the call, few of them a version of their own (flash_funcs::few_queries).
bool few_queries_at_call(const flash_funcs& f) { return f.few_queries.defined() && !Internal::is_const(f.few_queries); }

// Rows a block of `rows` stores: few queries at the call compute P·V in pairs of rows, an odd
// block one row more (and so its P, scores and state).
int stored_rows(const flash_funcs& f, int rows) { return few_queries_at_call(f) ? (rows + 1) / 2 * 2 : rows; }

// Partial tiles where V is finite: the plain FMA (1.4x faster for a sliding window of 256), a
// version of P·V's update u (schedule(u) after: a specialisation copies its stage's schedule).
template <class Schedule>
void finite_too(const flash_step& step, const flash_funcs& f, Stage u, const Schedule& schedule) {
  if (&step == &f.partial && f.values_finite.defined()) schedule(u.specialize(f.values_finite()));
  schedule(u);
}

void schedule_step(flash_funcs& f, flash_step& step, const flash_schedule& s) {
  const int v = s.vector;
  Stage u = f.state.update(step.update - 1);
  const Var column = f.state_column();
  u.vectorize(column, v, TailStrategy::GuardWithIf);
  const LoopLevel tile(f.state, step.r.x);
  LoopLevel at = tile;
  const bool row_blocks = s.row_block > 0 && s.row_block < f.q_tile;
  if (row_blocks) {
    const std::string kind = step.score.name();  // loop names unique per step
    Var rows("rows_" + kind), row("row_" + kind);
    u.split(f.qi, rows, row, s.row_block, TailStrategy::GuardWithIf).reorder(column, row, rows, step.r.x);
    at = LoopLevel(f.state, rows);
  } else {
    u.reorder(column, f.qi, step.r.x);
  }

  // A lone product (Q·Kᵀ) accumulates in registers: computed per register tile of the scores, which
  // scale, modify and mask it there; no buffer of the tile's products is zeroed, stored and read
  // back (1.05-1.2x for full attention at T = 1024..4096, AVX2). Kᵀ staged per tile (stage_kv):
  // the scores' register tiles walk the key blocks outside the rows, each block reused by every row.
  const bool in_registers = step.pairwise.size() == 1 && step.pairwise.front().kind == stage::product;
  LoopLevel product_at = at;
  step.score.compute_at(at);
  if (in_registers) {
    const block_order order = staged_right_operand(step.pairwise.front(), s) ? key_blocks_outside : rows_outside;
    const Var blocks = register_tile(step.score, f.kvi, f.qi, {}, v, product_vectors(s, step.tile), s.q_unroll, order);
    product_at = LoopLevel(step.score, blocks);
  } else {
    step.score.vectorize(f.kvi, v, TailStrategy::GuardWithIf);
  }
  for (stage& pw : step.pairwise)
    schedule_pairwise(pw, product_at, in_registers, tile, s, row_blocks ? s.row_block : f.q_tile, step.tile, f.q_rows == 1);
  // Softmax-free attention has the scores (its weights) and P·V only: no max, probabilities or sum.
  const bool normalised = step.prob.defined();
  if (normalised) {
    step.prob.compute_at(at).vectorize(f.kvi, v, TailStrategy::GuardWithIf);
    // A row's lane maxima and sums stay in a register, reduced across it where computed (stored and
    // read back one lane at a time, the maxima were 16 loads and 15 maxes a row and tile).
    step.max_lanes.compute_at(step.max, f.qi);
    step.sum_lanes.compute_at(step.sum, f.qi);
    for (Func lanes : {step.max_lanes, step.sum_lanes}) {
      lanes.vectorize(f.lane);
      lanes.update().reorder(f.lane, step.in_lane.x, f.qi).vectorize(f.lane);
    }
    step.max.compute_at(at);
    step.sum.compute_at(at).update().unroll(step.lanes.x);
  }
  // One key tile of one query tile: the RDom's conditions make Halide size t and qt as 0 or 1,
  // which would put the buffers on the heap (a malloc per tile); they are 1.
  // Rows: a block's, or the query tile's (at most q_tile; fewer rows known only at the call); the
  // lanes, computed per row, one.
  const int block_rows = stored_rows(f, row_blocks ? s.row_block : f.q_tile);
  auto bound_tile = [&](Func per_tile, int rows) {
    if (per_tile.defined()) per_tile.bound_storage(f.t, 1).bound_storage(f.qt, 1).bound_storage(f.qi, rows);
  };
  if (step.rounded_prob.defined()) step.rounded_prob.compute_at(at).vectorize(f.kvi, v, TailStrategy::GuardWithIf);
  for (Func per_tile : {step.score, step.prob, step.rounded_prob, step.max, step.sum, step.pv}) bound_tile(per_tile, block_rows);
  for (Func lanes : {step.max_lanes, step.sum_lanes}) bound_tile(lanes, 1);
  // P·V: dv in registers (pv_tile_vectors: all of V's row where it fits) × pv_rows rows, keys outside.
  const int pv_rows = s.pv_rows > 0 ? s.pv_rows : s.q_unroll;
  const int dv_vectors = pv_tile_vectors(s, f.dv_known);
  step.pv.compute_at(at);
  if (step.paired_pv.defined()) {
    // On bfloat16 pairs of keys (flash_step::key_pairs), per register tile of pv: the pairs outside
    // it, each pair's two innermost, vectorised with V's columns (vdpbf16ps). Computed at pv's own
    // loops, where the tile's indices are points: at the state's, its storage index carried the
    // key tile's bounds (lets Halide's atomic vectorisation cannot match: scalar code, 10x slower).
    // V's rows of a tile are half as many bytes: no key blocks (pv_keys). The guarded float32 P·V
    // of a partial tile alike, in pv's version for a V with a NaN or inf, the paired one skipped there.
    const Var blocks = register_tile(step.pv, f.dv, f.qi, {}, v, dv_vectors, pv_rows);
    for (Func product : {step.paired_pv, step.guarded_pv}) {
      if (!product.defined()) continue;
      product.compute_at(step.pv, blocks).bound_storage(f.dv, v * dv_vectors).bound_storage(f.qi, pv_rows);
      for (const Var& point : {f.t, f.qt}) product.bound_storage(point, 1);
      register_tile(product, f.dv, f.qi, {}, v, dv_vectors, pv_rows);
    }
    Stage pairs = step.paired_pv.update();
    register_tile(pairs, f.dv, f.qi, {step.key_pairs.y}, v, dv_vectors, pv_rows);
    pairs.atomic().vectorize(step.key_pairs.x);
    if (step.guarded_pv.defined()) {
      register_tile(step.guarded_pv.update(), f.dv, f.qi, {step.keys.x}, v, dv_vectors, pv_rows);
      step.pv.specialize(step.pairs_fit);
    }
  } else if (s.pv_keys > 0 && s.pv_keys < step.tile) {
    // Keys in blocks whose rows of V stay in L1 while every register tile of rows uses them.
    RVar ko("pv_ko"), ki("pv_ki");
    Var dvo, dvi, dvv, qo, qi;
    step.pv.vectorize(f.dv, v, TailStrategy::GuardWithIf);
    step.pv.update()
        .split(step.keys.x, ko, ki, s.pv_keys)
        .split(f.dv, dvo, dvi, v * dv_vectors, TailStrategy::GuardWithIf)
        .split(dvi, dvi, dvv, v, TailStrategy::GuardWithIf)
        .split(f.qi, qo, qi, pv_rows, TailStrategy::GuardWithIf)
        .reorder(dvv, dvi, qi, ki, dvo, qo, ko)
        .vectorize(dvv)
        .unroll(dvi)
        .unroll(qi);
    finite_too(step, f, step.pv.update(), [](Stage) {});  // the schedule above, copied
  } else {
    step.pv.vectorize(f.dv, v, TailStrategy::GuardWithIf);
    // Few queries known at the call (decoding): register tiles of 2 rows (an odd count computes one
    // more, its P a row of the tile's storage past the last query, never read), or of 1 for one
    // query, all of V's row where it fits. With 6 rows, the rows past N_Q guarded kept every sum
    // in memory: a load and a store per FMA (8 queries: 1.1-1.2x).
    if (few_queries_at_call(f)) {
      for (int rows : {1, 2}) {
        Stage few = step.pv.update().specialize(rows == 1 ? f.q_rows == 1 : f.few_queries);
        finite_too(step, f, few, [&](Stage u) {
          register_tile(u, f.dv, f.qi, {step.keys.x}, v, pv_tile_vectors(s, f.dv_known, rows), rows, rows_outside, TailStrategy::RoundUp);
        });
      }
    }
    finite_too(step, f, step.pv.update(), [&](Stage u) { register_tile(u, f.dv, f.qi, {step.keys.x}, v, dv_vectors, pv_rows); });
  }
  // No loop partitioning in a step: its guarded tails nest (register tiles in row blocks in key
  // tiles), and Halide's partitioning of them grows without bound (sliding windows with vectors of
  // 4 at Dh = 64 compile for tens of minutes with it, in seconds without); the default schedules
  // run as fast without it.
  for (Func g : {step.score, step.prob, step.rounded_prob, step.max, step.sum, step.pv, step.paired_pv, step.guarded_pv,
                 step.max_lanes, step.sum_lanes})
    never_partition(g);
  for (stage& pw : step.pairwise) never_partition(pw.func);
  u.never_partition_all();
}

}  // namespace

void schedule_flash_cpu(flash_funcs& f, const flash_schedule& s, const Target&) {
  // With the log-sum-exp, the state is computed in `rows` and copied out to both (O(T·Dv) of the O(T²·Dv) work).
  Func out = f.rows.defined() ? f.rows : f.output;
  if (f.rows.defined()) {
    std::vector<Var> rows{f.q};
    rows.insert(rows.end(), f.lead.begin(), f.lead.end());
    if (f.batched) rows.push_back(f.batch);
    f.output.compute_root().vectorize(f.dv, s.vector, TailStrategy::GuardWithIf);
    f.output.parallel(fuse_all(f.output, rows));
    f.lse.compute_root().vectorize(f.q, s.vector, TailStrategy::GuardWithIf);
    if (rows.size() > 1) f.lse.parallel(fuse_all(f.lse, std::vector<Var>(rows.begin() + 1, rows.end())));
  }
  Var qo("qo"), qin("qin");
  out.compute_root().split(f.q, qo, qin, f.q_rows, TailStrategy::GuardWithIf).reorder(f.dv, qin, qo);
  // One task per (query tile, lead dims, batch item), all in one parallel loop.
  std::vector<Var> tasks{qo};
  tasks.insert(tasks.end(), f.lead.begin(), f.lead.end());
  if (f.batched) tasks.push_back(f.batch);
  const Var task = fuse_all(out, tasks);
  out.parallel(task).vectorize(f.dv, s.vector, TailStrategy::GuardWithIf);
  if (f.dv_size > 0) out.bound(f.dv, 0, f.dv_size);
  // A packed state holds column d in accumulator d / lanes: with the columns known to start at 0 and
  // their vectors unrolled, each output vector reads one accumulator, not a lane-wise gather across all.
  if (f.state_lanes > 0) out.bound(f.dv, 0, f.dv_known).unroll(f.dv);

  f.state.compute_at(out, task)
      .vectorize(f.state_column(), s.vector, TailStrategy::GuardWithIf)
      .bound_storage(f.qt, 1)
      .bound_storage(f.qi, stored_rows(f, f.q_tile));
  if (f.state_lanes > 0) f.state.bound(f.lane, 0, f.state_lanes);
  // A Dv bound when compiling bounds the unpacked state, not the output (a wrong-sized V is then
  // reported as V's error, not the output's; a packed state has no dv, and flash_algorithm's
  // accumulated() refuses columns past the width); unbounded, P·V's register tiles have dynamic
  // extents (1.6× slower).
  if (f.dv_size == 0 && f.dv_known > 0 && f.state_lanes == 0) f.state.bound(f.dv, 0, f.dv_known);
  // A width known only at the call: the state is V's width, and the kernel has a version with
  // fixed-size buffers and register tiles for each common width (2.5x faster than sized at run time).
  if (f.dv_known == 0) f.state.bound(f.dv, 0, f.dv_extent);
  auto for_widths = [&](Stage st) {
    if (f.dv_known == 0)
      for (int width : {64, 128}) st.specialize(f.dv_extent == width);
  };
  // Few queries known only at the call: a version of their own (one query tile of exactly N_Q
  // rows, Q·Kᵀ as partial dot products or on K copied per key tile), and fewer still for paired
  // products (flash_funcs::paired_dots, first: it implies few_queries). Each version adds the
  // compile time of the kernel.
  if (f.paired_dots.defined() && !Internal::is_const(f.paired_dots)) for_widths(out.specialize(f.paired_dots));
  if (f.few_queries.defined() && !Internal::is_const(f.few_queries)) for_widths(out.specialize(f.few_queries));
  for_widths(out);
  if (f.values_finite.defined()) schedule_value_check(f, s.vector);
  schedule_step(f, f.full, s);
  schedule_step(f, f.partial, s);
  // The queries' 16-bit rows widened once per task (stage::widened_rows), read by every key tile's products.
  for (const flash_step* step : {&f.full, &f.partial})
    for (const stage& pw : step->pairwise)
      for (Func rows : {pw.widened_rows, pw.split_rows})
        if (rows.defined()) rows.compute_at(out, task).vectorize(rows.args()[0], s.vector, TailStrategy::GuardWithIf);
  if (!s.stage_kv)
    // A tile may pass the last key (a partial tile at the end; a full tile that fewer keys rule out,
    // whose region bounds inference still counts; a fused backward's last key tile, sharing Kᵀ): up
    // to the keys rounded up to whole tiles of either.
    for (stage& pw : f.full.pairwise) {
      const int backward = s.backward_sweep ? s.backward_q_tile : s.kv_tile;
      pad_right_operand(pw, max(max((f.nk + f.kv_tile - 1) / f.kv_tile * f.kv_tile, f.kv_tile), (f.nk + backward - 1) / backward * backward));
    }
}

}  // namespace attn::gen
