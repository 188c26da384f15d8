#include "generators/gpu/flash_gpu_schedule.hpp"

#include <algorithm>
#include <set>
#include "generators/fused/flash_algorithm.hpp"
#include "generators/gpu/gpu_threads.hpp"

namespace attn::gen {

using namespace Halide;

namespace {

using S = flash_gpu_schedule;
constexpr std::string_view variant_names[] = {"per_thread", "shared_memory", "register_tiles"};
constexpr parameter<S> parameters[] = {
    number<&S::q_tile>("q_tile", 1, 1024),
    number<&S::kv_tile>("kv_tile", 1, 4096),
    number<&S::threads>("threads", 1, 1024),
    choice<&S::stage_k>("stage_k", on_off),
    choice<&S::stage_v>("stage_v", on_off),
    choice<&S::shared>("shared", variant_names),
    choice<&S::unroll>("unroll", on_off),
    number<&S::thread_rows>("thread_rows", 1, 64),
    choice<&S::stage_q>("stage_q", on_off),
};
constexpr relation<S> relations[] = {
    {"kv_tile threads", "kv_tile must be a multiple of threads", [](const S& s) { return s.kv_tile % s.threads == 0; }},
    {"threads q_tile", "threads × q_tile, the threads of a block, must be at most 1024",
     [](const S& s) { return s.threads * s.q_tile <= 1024; }},
    {"shared q_tile thread_rows", "with register tiles (shared=2), q_tile must be a multiple of thread_rows",
     [](const S& s) { return s.shared != flash_gpu_variant::register_tiles || s.q_tile % s.thread_rows == 0; }},
};
constexpr parameter_table<S> table{"GPU schedule", parameters, relations};

constexpr std::int64_t shared_limit = 48 << 10;  // CUDA's static shared memory per block
// What a default schedule's shared_bytes may be: Halide pads and aligns a block's allocations
// beyond the estimate (by 3-4 KiB in the kernels measured), so 8 KiB below the limit.
constexpr std::int64_t default_shared_budget = shared_limit - (8 << 10);

// Every Func and image P·V reads other than the tile's probabilities and itself: V, however it is computed.
class callees : public Internal::IRVisitor {
 public:
  explicit callees(std::set<std::string> skip) : skip_(std::move(skip)) {}
  std::set<std::string> funcs, images;

 private:
  using Internal::IRVisitor::visit;
  void visit(const Internal::Call* c) override {
    if (c->call_type == Internal::Call::Halide && !skip_.contains(c->name)) funcs.insert(c->name);
    if (c->call_type == Internal::Call::Image && c->param.defined()) images.insert(c->param.name());
    Internal::IRVisitor::visit(c);
  }
  std::set<std::string> skip_;
};

// The Func a call of `fn` reads: a product computed through a global wrapper (matmul_gpu_schedule)
// is read from that wrapper.
Func stored(const Internal::Function& fn) {
  const auto wrapper = fn.wrappers().find("");
  return wrapper != fn.wrappers().end() ? Func(Internal::Function(wrapper->second)) : Func(fn);
}

// A copy of a product's right operand (Kᵀ's key tile: keys innermost, as the product's columns) in
// shared memory, read by `product`, computed at `at` by the block's tx × ty threads.
void stage_right_operand(const stage& pw, const Func& product, const LoopLevel& at, int tx, int ty) {
  Func operand = pw.right_operand;  // a handle: in() records the wrapper on the Func
  Func staged = operand.in(product);
  staged.compute_at(at);
  on_block_threads(staged, tx, ty);
}

// Copies of V's key tile in shared memory, one per callee of P·V, computed by the block's threads.
void stage_values(flash_step& st, const std::vector<ImageParam>& params, const LoopLevel& at, int dv_threads, int row_threads) {
  callees found({st.prob.name(), st.score.name(), st.pv.name()});  // (softmax-free: the score is P)
  const Tuple values = st.pv.update_values();
  for (const Expr& e : values.as_vector()) e.accept(&found);
  std::vector<Func> copies;
  for (const auto& [name, fn] : Internal::find_direct_calls(st.pv.function()))
    if (found.funcs.contains(name)) copies.push_back(stored(fn).in(st.pv));
  for (ImageParam p : params)  // a handle: in() records the wrapper on the shared parameter
    if (found.images.contains(p.name())) copies.push_back(p.in(st.pv));
  for (Func c : copies) {
    if (c.args().empty()) continue;
    c.compute_at(at);
    on_block_threads(c, dv_threads, row_threads);  // V's width across x
  }
}

// Where T, known when compiling, is shorter than a tile, the partial tile reads keys up to the
// last one only (flash_algorithm's first_key), so a per-tile Func's key range shrinks there,
// below the thread count when fewer keys than threads are left: then some threads have
// no iteration at all, and PoCL computes wrong results (T = 33 with kv_tile 32 and 8 threads;
// right from 9 keys on). Partial tiles therefore compute whole multiples of the thread count
// (the reads past the last key are clamped, fused_lowering.cpp) and stage nothing: a staged copy reads
// its source unclamped, so it cannot grow past the last key.
void schedule_pairwise(stage& st, const LoopLevel& at, const flash_gpu_schedule& s, bool partial) {
  st.func.compute_at(at);
  if (partial) st.func.align_bounds(st.vars[0], s.threads);
  on_block_threads(st.func, s.threads, s.q_tile);
  if (st.kind == stage::product && s.stage_k && !partial && st.right_operand.defined()) {
    stage_right_operand(st, st.func, at, s.threads, s.q_tile);
  } else if (st.kind == stage::softmax_row) {
    for (Func helper : {st.row_max, st.row_exp, st.row_sum}) {
      helper.compute_at(at);
      on_block_threads(helper, s.threads, s.q_tile);
    }
  }
}

// A per-tile Func holds one key tile (t = the step's tile) of one query tile's `rows` rows (the
// per-thread variant: one row) of one (batch item, head); its storage says so, and so does Q·Kᵀ's
// (keys innermost, then the rows, then one each of the lead dims and the batch). Bounds inference
// cannot prove it through the masks' tile ranges (RDom::where: a select over the tiles), and a GPU
// allocation inside a block is sized for the largest over the loops around it: without these
// bounds each thread's scratch went to global memory sized by T (the CUDA benchmark's causal
// kernels read out of bounds at B = 4, H = 16, T = 1024), and the shared variant's causal blocks
// asked for shared memory growing as T² (two negative extents of a masked tile pair multiplied:
// CUDA refused the launch, PoCL asserted at T = 1000). Halide drops the check of a storage bound
// inside a GPU kernel: these hold by construction, the state's update being the only reader of a
// tile's Funcs, at its own tile and rows; test_opencl and test_cuda run sizes that would show
// otherwise.
void bound_per_tile(const flash_funcs& f, Func fn, int keys, int rows) {
  for (const Var& a : fn.args()) {
    const std::string& n = a.name();
    if (n == f.kvi.name()) fn.bound_storage(a, keys);
    else if (n == f.lane.name()) fn.bound_storage(a, f.vector);
    else if (n == f.dv.name() && f.dv_known > 0) fn.bound_storage(a, f.dv_known);
    else if (n == f.qi.name()) fn.bound_storage(a, rows);
    else if (n != f.dv.name()) fn.bound_storage(a, 1);  // t, qt, lead dims, batch
  }
}

// `product_keys`: Q·Kᵀ's keys, a tile's plus what aligning a partial tile to the threads adds
// (schedule_pairwise). Storage bounds without that slack fail to launch on a CUDA GPU (full
// attention, q_tile 1, T = 33): test_cuda runs that case, test_opencl the shared variant on PoCL.
void bound_step(const flash_funcs& f, const flash_step& step, int rows, int product_keys) {
  for (const stage& pw : step.pairwise) {
    if (pw.kind != stage::product || pw.vars.size() < 2) continue;
    Func product = pw.func;  // a handle
    product.bound_storage(pw.vars[0], product_keys).bound_storage(pw.vars[1], rows);
    for (std::size_t k = 2; k < pw.vars.size(); ++k) product.bound_storage(pw.vars[k], 1);
  }
  for (Func per_tile : {step.max_lanes, step.max, step.prob, step.sum_lanes, step.sum, step.pv})
    if (per_tile.defined()) bound_per_tile(f, per_tile, step.tile, rows);
}

// Per-thread variant, V's width known: constant loops over it (and a tile's keys) unrolled, so that
// the row's state and a tile's P·V are registers rather than local memory.
void unroll_row(flash_funcs& f, flash_step& step) {
  const int dv = f.dv_known;
  f.state.update(step.update - 1).unroll(f.dv);
  step.pv.bound(f.dv, 0, dv).unroll(f.dv);
  step.pv.update().reorder(f.dv, step.keys.x).unroll(f.dv);
  if (step.prob.defined()) step.prob.unroll(f.kvi);
  // Q·Kᵀ: a tile's scores accumulate in registers, each element of the query row read once per tile.
  for (stage& pw : step.pairwise) {
    if (pw.kind != stage::product || pw.vars.size() < 2 || !pw.reduction.defined()) continue;
    Func product = pw.func;
    const Var keys = pw.vars[0];
    if (step.prob.defined()) {
      product.unroll(keys);
      product.update().reorder(keys, pw.reduction.x).unroll(keys);
      continue;
    }
    // Softmax-free attention: bounds inference cannot tell a partial tile's extent, so the keys
    // go in guarded chunks of a tile, a constant loop to unroll. (Not done for softmax: there
    // the extent is known, and the guards would change the code the H100 measured.)
    const Var chunk(keys.name() + "_chunk"), key(keys.name() + "_in_chunk");
    product.split(keys, chunk, key, step.tile, TailStrategy::GuardWithIf).unroll(key);
    product.update().split(keys, chunk, key, step.tile, TailStrategy::GuardWithIf).reorder(key, pw.reduction.x, chunk).unroll(key);
  }
}

// Threads across V's width: no more than it has columns.
int dv_threads(const flash_funcs& f, const flash_gpu_schedule& s) {
  return f.dv_size > 0 ? std::min(s.threads, f.dv_size) : s.threads;
}

void schedule_step(flash_funcs& f, flash_step& step, const std::vector<ImageParam>& params, const flash_gpu_schedule& s) {
  const int across_v = dv_threads(f, s);
  // The key-tile loop runs at block level, outside the threads: its Funcs are the block's, in
  // shared memory, and each one's threads meet at a barrier before the next reads it.
  Stage u = f.state.update(step.update - 1);
  threads_2d(u, f.dv, f.qi, across_v, s.q_tile, {}, {step.r.x});
  const LoopLevel at(f.state, step.r.x);
  const bool partial = &step == &f.partial;
  for (stage& pw : step.pairwise) schedule_pairwise(pw, at, s, partial);
  // The score is recomputed where it is read (cheap beside the product it reads): one tile fewer.
  for (Func per_tile : {step.max_lanes, step.max, step.prob, step.sum_lanes, step.sum}) {
    if (!per_tile.defined()) continue;  // softmax-free: the score (the weights) and P·V only
    per_tile.compute_at(at);
    on_block_threads(per_tile, s.threads, s.q_tile);
  }
  step.pv.compute_at(at);
  on_block_threads(step.pv, across_v, s.q_tile);
  if (s.stage_v && !partial) stage_values(step, params, at, across_v, s.q_tile);
  bound_step(f, step, s.q_tile, partial ? step.tile + s.threads : step.tile);
}

// `tiles` computed as its own kernel: a block per (query tile, lead dims and batch item), whatever
// the output's min, so that the state in a block is exactly one query tile; the output (and with
// the log-sum-exp the lse) copied out of it by kernels of their own (O(T·Dv) beside the
// attention's O(T²·Dv)). Returns the block loop.
Var tiles_on_blocks(flash_funcs& f, const flash_gpu_schedule& s) {
  gpu_root(f.output);
  if (f.lse.defined()) gpu_root(f.lse);
  Func tiles = f.tiles;
  tiles.compute_root().bound(f.qi, 0, s.q_tile);  // whole tiles: rows past the last are computed, never stored
  if (f.dv_size > 0) tiles.bound(f.dv, 0, f.dv_size);
  else if (f.blocked_state) tiles.bound(f.dv, 0, f.dv_known);  // flash_funcs::state: a column past V's width is an error
  // A V width bound when compiling sizes the state (as on the CPU): private arrays, not scratch in global memory.
  if (f.dv_size == 0 && f.dv_known > 0 && f.state_lanes == 0) f.state.bound(f.dv, 0, f.dv_known);
  // The query tile is a block dim of its own: fused with the others, bounds inference could not
  // tell a block's tile from the fused index, and sized every block's scratch for all of T's tiles.
  std::vector<Var> others(f.lead.begin(), f.lead.end());
  if (f.batched) others.push_back(f.batch);
  if (others.empty()) tiles.gpu_blocks(f.qt);
  else tiles.gpu_blocks(f.qt, fuse_all(tiles, others));
  return f.qt;
}

// The per-thread variant: one thread per query row; the state and every per-tile Func of a row
// live in the thread's private memory, computed serially inside it. No shared memory, no barriers.
void schedule_flash_per_thread(flash_funcs& f, const flash_gpu_schedule& s) {
  tiles_on_blocks(f, s);
  f.tiles.reorder(f.dv, f.qi).gpu_threads(f.qi);
  f.state.compute_at(f.tiles, f.qi);
  for (flash_step* step : {&f.full, &f.partial}) {
    // The key tiles outermost in the thread, so that each tile's Funcs are computed once per tile.
    f.state.update(step->update - 1).reorder(f.dv, f.qi, f.qt, step->r.x);
    const LoopLevel at(f.state, step->r.x);
    for (stage& pw : step->pairwise) {
      pw.func.compute_at(at);
      if (pw.kind == stage::softmax_row)
        for (Func helper : {pw.row_max, pw.row_exp, pw.row_sum}) helper.compute_at(at);
    }
    for (Func per_tile : {step->max_lanes, step->max, step->prob, step->sum_lanes, step->sum, step->pv})
      if (per_tile.defined()) per_tile.compute_at(at);  // softmax-free: P·V only
    bound_step(f, *step, 1, step->tile);
    if (s.unroll && f.dv_known > 0) unroll_row(f, *step);
  }
  if (s.unroll && f.dv_known > 0) f.state.unroll(f.dv);
}

// Where a register tile's sites go: a thread each (a stage computed at block level: the thread
// loops outside the tile's), or inside one thread (the stage is that thread's tile), x unrolled or
// as one vector (adjacent values load together, ld.shared.v4 on CUDA; OpenCL's C backend cannot
// take every vector the tiles make).
enum class tile_in { threads, thread, thread_vectors };

// Register tiles of tile_x × tile_y adjacent sites (x, y) of a stage, their loops unrolled, `inner`
// (a reduction) outside them: each value it reads feeds the whole row or column of the tile.
void register_tile(Stage s, const Var& x, const Var& y, int tile_x, int tile_y, tile_in where,
                   const std::vector<VarOrRVar>& inner = {}) {
  const Var xt(x.name() + "_t"), xi(x.name() + "_i"), yt(y.name() + "_t"), yi(y.name() + "_i");
  s.split(x, xt, xi, tile_x, TailStrategy::GuardWithIf).split(y, yt, yi, tile_y, TailStrategy::GuardWithIf);
  std::vector<VarOrRVar> order{xi, yi};
  order.insert(order.end(), inner.begin(), inner.end());
  for (const Var& v : {xt, yt}) order.emplace_back(v);
  s.reorder(order).unroll(yi);
  if (where == tile_in::thread_vectors) s.vectorize(xi);
  else s.unroll(xi);
  if (where == tile_in::threads) s.gpu_threads(xt, yt);
}

// The register-tile variant's threads: `threads` across keys and V's columns, q_tile / thread_rows across rows.
int row_threads(const flash_gpu_schedule& s) { return s.q_tile / s.thread_rows; }

// Q·Kᵀ of a key tile, computed into shared memory (a wrapper the row reductions read) by register
// tiles of thread_rows rows × kv_tile / threads keys, each accumulated over Dk in registers.
void tile_product(stage& pw, const LoopLevel& at, const flash_gpu_schedule& s, bool partial, tile_in in_thread) {
  Func product = pw.func;
  Func scores = product.in();
  scores.compute_at(at);
  const int keys = s.kv_tile / s.threads;
  register_tile(scores, pw.vars[0], pw.vars[1], keys, s.thread_rows, tile_in::threads);
  product.compute_at(scores, Var(pw.vars[0].name() + "_t"));
  register_tile(product, pw.vars[0], pw.vars[1], keys, s.thread_rows, in_thread);
  register_tile(product.update(), pw.vars[0], pw.vars[1], keys, s.thread_rows, in_thread, {pw.reduction.x});
  if (s.stage_k && !partial && pw.right_operand.defined()) stage_right_operand(pw, product, at, s.threads, row_threads(s));
  // Storage of a tile's size (bound_per_tile says why), a thread's product of its register tile's:
  // a constant size, so registers, also where a partial tile's keys are not known to fill it.
  for (std::size_t k = 2; k < pw.vars.size(); ++k) {
    scores.bound_storage(pw.vars[k], 1);
    product.bound_storage(pw.vars[k], 1);
  }
  scores.bound_storage(pw.vars[0], s.kv_tile).bound_storage(pw.vars[1], s.q_tile);
  product.bound_storage(pw.vars[0], keys).bound_storage(pw.vars[1], s.thread_rows);
}

void schedule_register_step(flash_funcs& f, flash_step& step, const std::vector<ImageParam>& params, const flash_gpu_schedule& s,
                            tile_in in_thread) {
  const int ty = row_threads(s);
  const bool partial = &step == &f.partial;
  // The state's update: a thread owns thread_rows rows of one lane (packed: all of its columns,
  // acc_j) or of Dv / threads adjacent columns; the tile's P·V in registers inside it.
  const Var column = f.state_column();
  const int columns = f.state_lanes > 0 ? 1 : std::max(1, (f.dv_known + s.threads - 1) / s.threads);
  Stage u = f.state.update(step.update - 1);
  // Names of their own per update: a LoopLevel names a loop by its Func and Var, not its stage.
  const std::string update = std::to_string(step.update);
  const Var ct(column.name() + "_t" + update), rt(f.qi.name() + "_t" + update);
  {
    const Var ci(column.name() + "_i" + update), ri(f.qi.name() + "_i" + update);
    u.split(column, ct, ci, columns, TailStrategy::GuardWithIf).split(f.qi, rt, ri, s.thread_rows, TailStrategy::GuardWithIf);
    u.reorder(ci, ri, ct, rt, step.r.x).unroll(ci).unroll(ri).gpu_threads(ct, rt);
  }
  const LoopLevel at(f.state, step.r.x);
  for (stage& pw : step.pairwise) {
    if (pw.kind == stage::product && pw.vars.size() >= 2 && pw.reduction.defined()) {
      tile_product(pw, at, s, partial, in_thread);
      continue;
    }
    pw.func.compute_at(at);
    on_block_threads(pw.func, s.threads, ty);
    if (pw.kind == stage::softmax_row)
      for (Func helper : {pw.row_max, pw.row_exp, pw.row_sum}) {
        helper.compute_at(at);
        on_block_threads(helper, s.threads, ty);
      }
  }
  for (Func per_tile : {step.max, step.prob, step.sum}) {
    if (!per_tile.defined()) continue;
    per_tile.compute_at(at);
    on_block_threads(per_tile, s.threads, ty);
    bound_per_tile(f, per_tile, step.tile, s.q_tile);
  }
  // A row's lanes of the max and the sum in the registers of the thread that reduces them: no
  // shared memory, no barrier of their own.
  for (auto [lanes, row] : {std::pair{step.max_lanes, step.max}, std::pair{step.sum_lanes, step.sum}}) {
    if (!lanes.defined()) continue;
    lanes.compute_at(row, Var(f.qi.name() + "_o"));  // one row (threads_2d: the serial loop in a thread)
    lanes.unroll(f.lane).update().unroll(f.lane);
    bound_per_tile(f, lanes, step.tile, 1);
  }
  // P·V reads a thread's rows of one key: rows innermost, adjacent and free of bank conflicts.
  if (step.prob.defined()) {
    std::vector<Var> storage{f.qi, f.kvi};
    for (const Var& a : step.prob.args())
      if (a.name() != f.qi.name() && a.name() != f.kvi.name()) storage.emplace_back(a);
    step.prob.reorder_storage(storage);
  }
  // P·V: each thread its own columns and rows, accumulated over the tile's keys in registers.
  const int pv_columns = f.state_lanes > 0 ? f.dv_known / f.state_lanes : columns;
  step.pv.compute_at(f.state, ct);
  for (const Var& a : step.pv.args()) {
    if (a.name() == f.dv.name()) step.pv.bound_storage(a, pv_columns);
    else step.pv.bound_storage(a, a.name() == f.qi.name() ? s.thread_rows : 1);
  }
  register_tile(step.pv, f.dv, f.qi, pv_columns, s.thread_rows, in_thread);
  register_tile(step.pv.update(), f.dv, f.qi, pv_columns, s.thread_rows, in_thread, {step.keys.x});
  if (s.stage_v && !partial) stage_values(step, params, at, s.threads, ty);
}

// The products' left operand (Q), staged for the block once, before its key tiles, rows
// innermost: a thread's rows of one column are adjacent, conflict-free for the block's row threads.
// Only where every tile product reads one and the same Func or input besides Kᵀ.
void stage_left_operand(flash_funcs& f, const std::vector<ImageParam>& params, const flash_gpu_schedule& s, const Var& block) {
  std::vector<Func> products;
  std::set<std::string> funcs, images;
  for (flash_step* step : {&f.full, &f.partial})
    for (stage& pw : step->pairwise) {
      if (pw.kind != stage::product || pw.vars.size() < 2 || !pw.reduction.defined()) continue;
      std::set<std::string> skip{pw.func.name()};
      if (pw.right_operand.defined()) skip.insert(pw.right_operand.name());
      callees found(skip);
      const Tuple values = pw.func.update_values();
      for (const Expr& e : values.as_vector()) e.accept(&found);
      funcs.insert(found.funcs.begin(), found.funcs.end());
      images.insert(found.images.begin(), found.images.end());
      products.push_back(pw.func);
    }
  if (products.empty() || funcs.size() + images.size() != 1) return;
  Func staged;
  if (!images.empty()) {
    for (ImageParam p : params)
      if (p.name() == *images.begin()) staged = p.in(products);
  } else {
    for (const auto& [name, fn] : Internal::find_direct_calls(products.front().function()))
      if (name == *funcs.begin()) staged = stored(fn).in(products);
  }
  if (!staged.defined() || staged.args().size() < 2) return;
  const std::vector<Var> a = staged.args();
  staged.compute_at(f.tiles, block);
  std::vector<Var> storage{a[1], a[0]};
  storage.insert(storage.end(), a.begin() + 2, a.end());
  staged.reorder_storage(storage);
  on_block_threads(staged, s.threads, row_threads(s));
}

// The register-tile variant (flash_gpu_variant::register_tiles): blocks as the shared variant's,
// threads × q_tile / thread_rows threads.
void schedule_flash_register_tiles(flash_funcs& f, const std::vector<ImageParam>& params, const flash_gpu_schedule& s,
                                   const Target& target) {
  const tile_in in_thread = target.has_feature(Target::CUDA) ? tile_in::thread_vectors : tile_in::thread;
  const Var block = tiles_on_blocks(f, s);
  const int ty = row_threads(s);
  threads_2d(f.tiles, f.dv, f.qi, s.threads, ty);
  f.state.compute_at(f.tiles, block);
  threads_2d(f.state, f.state_column(), f.qi, s.threads, ty);
  schedule_register_step(f, f.full, params, s, in_thread);
  schedule_register_step(f, f.partial, params, s, in_thread);
  if (s.stage_q) stage_left_operand(f, params, s, block);
}

}  // namespace

const parameter_table<flash_gpu_schedule>& flash_gpu_schedule::parameters() { return table; }

std::string to_string(const flash_gpu_schedule& s) { return table.print(s); }

flash_gpu_schedule parse_flash_gpu_schedule(const std::string& text, flash_gpu_schedule s) { return table.parse(text, s); }

std::int64_t shared_bytes(const flash_gpu_schedule& s, std::int64_t dv, std::int64_t dk) {
  const std::int64_t q = s.q_tile, k = s.kv_tile;
  // Register tiles: the state packed (max and sum once per lane) where the threads divide V's
  // width; P·V and the reductions' lanes in registers; Q staged.
  const bool tiled = s.shared == flash_gpu_variant::register_tiles;
  const std::int64_t state = tiled && dv % s.threads == 0 ? q * (2 * s.threads + dv) : 3 * q * dv;
  const std::int64_t floats = state + 2 * q * k    // Q·Kᵀ and the probabilities
                              + (tiled ? 0 : q * dv)  // P·V of the tile
                              + (tiled ? 0 : 2 * q * s.threads) + 2 * q  // lanes (registers when tiled) and rows of the max and the sum
                              + (s.stage_k ? k * dk : 0) + (s.stage_v ? k * dv : 0) + (tiled && s.stage_q ? q * dk : 0);
  return 4 * floats;
}

flash_gpu_schedule default_flash_gpu_schedule(std::int64_t dv) {
  flash_gpu_schedule s;
  // V's width not known when compiling: the per-thread variant, rolled (register tiles and the
  // packed state need the width, and a block's shared memory would grow with it).
  if (dv <= 0) return s;
  // Register tiles of 4 rows, the fastest of those measured (docs/performance.md): to Dv = 64, 32
  // rows × 16 keys a block with Q, K and V staged; wider, 16 threads across V (a thread's P·V
  // stays 4 × 8 values) and 32 keys a step, read through the L1 cache.
  s.shared = flash_gpu_variant::register_tiles;
  s.thread_rows = 4;
  s.q_tile = 32;
  if (dv <= 64) {
    s.kv_tile = 16;
    s.threads = 8;
  } else {
    s.kv_tile = 32;
    s.threads = 16;
    s.stage_k = s.stage_v = s.stage_q = false;
  }
  // Wider V: without the staged copies, then with smaller tiles, until a block fits.
  while (shared_bytes(s, dv, dv) > default_shared_budget) {
    if (s.stage_q) s.stage_q = false;
    else if (s.stage_v) s.stage_v = false;
    else if (s.stage_k) s.stage_k = false;
    else if (s.kv_tile > s.threads) s.kv_tile /= 2;
    else if (s.q_tile > s.thread_rows) s.q_tile /= 2;
    else break;
  }
  return s;
}

flash_gpu_schedule banded(flash_gpu_schedule s, std::int64_t band) {
  if (band <= 0) return s;
  const std::int64_t quarter = (band / 4 + s.threads - 1) / s.threads * s.threads;
  s.kv_tile = static_cast<int>(std::clamp<std::int64_t>(quarter, s.threads, s.kv_tile));
  return s;
}

void schedule_flash_gpu(flash_funcs& f, const std::vector<ImageParam>& params, const flash_gpu_schedule& s, const Target& target) {
  if (s.shared == flash_gpu_variant::per_thread) return schedule_flash_per_thread(f, s);
  if (s.shared == flash_gpu_variant::register_tiles) return schedule_flash_register_tiles(f, params, s, target);
  // Blocks: (query tile, lead dims and batch fused); threads: (V's width, query rows).
  const Var block = tiles_on_blocks(f, s);
  threads_2d(f.tiles, f.dv, f.qi, dv_threads(f, s), s.q_tile);
  // The online-softmax state lives in the block, each (column, row) with the thread that owns it.
  f.state.compute_at(f.tiles, block);
  threads_2d(f.state, f.dv, f.qi, dv_threads(f, s), s.q_tile);
  schedule_step(f, f.full, params, s);
  schedule_step(f, f.partial, params, s);
}

}  // namespace attn::gen
