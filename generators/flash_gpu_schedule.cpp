#include "flash_gpu_schedule.hpp"

#include <algorithm>
#include <set>
#include "flash_algorithm.hpp"
#include "gpu_threads.hpp"

namespace attn::gen {

using namespace Halide;

namespace {

using S = flash_gpu_schedule;
constexpr std::string_view variant_names[] = {"per_thread", "shared_memory"};
constexpr parameter<S> parameters[] = {
    number<&S::q_tile>("q_tile", 1, 1024),
    number<&S::kv_tile>("kv_tile", 1, 4096),
    number<&S::threads>("threads", 1, 1024),
    choice<&S::stage_k>("stage_k", on_off),
    choice<&S::stage_v>("stage_v", on_off),
    choice<&S::shared>("shared", variant_names),
    choice<&S::unroll>("unroll", on_off),
};
constexpr relation<S> relations[] = {
    {"kv_tile threads", "kv_tile must be a multiple of threads", [](const S& s) { return s.kv_tile % s.threads == 0; }},
    {"threads q_tile", "threads × q_tile, the threads of a block, must be at most 1024",
     [](const S& s) { return s.threads * s.q_tile <= 1024; }},
};
constexpr parameter_table<S> table{"GPU schedule", parameters, relations};

constexpr std::int64_t shared_limit = 48 << 10;  // CUDA's static shared memory per block

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

// Copies of V's key tile in shared memory, one per callee of P·V, computed by the block's threads.
void stage_values(flash_step& st, const std::vector<ImageParam>& params, const LoopLevel& at, const flash_gpu_schedule& s,
                  int dv_threads) {
  callees found({st.prob.name(), st.score.name(), st.pv.name()});  // (softmax-free: the score is P)
  const Tuple values = st.pv.update_values();
  for (const Expr& e : values.as_vector()) e.accept(&found);
  std::vector<Func> copies;
  for (const auto& [name, fn] : Internal::find_direct_calls(st.pv.function())) {
    if (!found.funcs.contains(name)) continue;
    // A product computed through a global wrapper (matmul_gpu_schedule) is read from that wrapper.
    const auto stored = fn.wrappers().find("");
    Func source = stored != fn.wrappers().end() ? Func(Internal::Function(stored->second)) : Func(fn);
    copies.push_back(source.in(st.pv));
  }
  for (ImageParam p : params)  // a handle: in() records the wrapper on the shared parameter
    if (found.images.contains(p.name())) copies.push_back(p.in(st.pv));
  for (Func c : copies) {
    if (c.args().empty()) continue;
    c.compute_at(at);
    on_block_threads(c, dv_threads, s.q_tile);  // V's width across x
  }
}

// Where T, known when compiling, is shorter than a tile, the partial tile reads keys up to the
// last one only (flash_algorithm's first_key), so a per-tile Func's key range shrinks there,
// below the thread count when fewer keys than threads are left: then some threads have
// no iteration at all, and PoCL computes wrong results (T = 33 with kv_tile 32 and 8 threads;
// right from 9 keys on). Partial tiles therefore compute whole multiples of the thread count
// (the reads past the last key are clamped, lower.cpp) and stage nothing: a staged copy reads
// its source unclamped, so it cannot grow past the last key.
void schedule_pairwise(stage& st, const LoopLevel& at, const flash_gpu_schedule& s, bool partial) {
  st.func.compute_at(at);
  if (partial) st.func.align_bounds(st.vars[0], s.threads);
  on_block_threads(st.func, s.threads, s.q_tile);
  if (st.kind == stage::product && s.stage_k && !partial && st.right_operand.defined()) {
    Func staged = st.right_operand.in(st.func);  // Kᵀ's tile: keys innermost, as the product's columns
    staged.compute_at(at);
    on_block_threads(staged, s.threads, s.q_tile);
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
// (schedule_pairwise). In the shared variant these bounds are checked on PoCL only (2026-11-26);
// an earlier try of storage bounds there, likely without that slack, failed to launch on an H100
// (full attention, q_tile 1, T = 33): test_cuda runs that case.
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
  if (s.stage_v && !partial) stage_values(step, params, at, s, across_v);
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
  // A V width bound when compiling sizes the state (as on the CPU): private arrays, not scratch in global memory.
  if (f.dv_size == 0 && f.dv_known > 0) f.state.bound(f.dv, 0, f.dv_known);
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

}  // namespace

const parameter_table<flash_gpu_schedule>& flash_gpu_schedule::parameters() { return table; }

std::string to_string(const flash_gpu_schedule& s) { return table.print(s); }

flash_gpu_schedule parse_flash_gpu_schedule(const std::string& text, flash_gpu_schedule s) { return table.parse(text, s); }

std::int64_t shared_bytes(const flash_gpu_schedule& s, std::int64_t dv, std::int64_t dk) {
  const std::int64_t q = s.q_tile, k = s.kv_tile;
  const std::int64_t floats = 3 * q * dv      // state: max, sum, acc (one of each per V column)
                              + 2 * q * k     // Q·Kᵀ and the probabilities
                              + q * dv        // P·V of the tile
                              + 2 * q * s.threads + 2 * q  // lanes and rows of the max and the sum
                              + (s.stage_k ? k * dk : 0) + (s.stage_v ? k * dv : 0);
  return 4 * floats;
}

flash_gpu_schedule default_flash_gpu_schedule(std::int64_t dv) {
  flash_gpu_schedule s;  // per thread: q_tile threads per block, each a row's state in private memory
  if (dv > 0) {
    // V's width known: the row's state in registers, 64 rows a block: faster than the rolled
    // loops and within a few percent of the best q_tile measured (docs/performance.md), where
    // 32 unrolled rows spill at Dh = 128.
    s.q_tile = 64;
    s.unroll = true;
  }
  if (s.shared == flash_gpu_variant::per_thread) return s;
  // Shared memory: the largest query tile whose block fits in shared memory with both
  // tiles staged; failing that, without the copy of V (P·V then reads V through the L1 cache).
  // At most 8 rows: blocks of 256 threads (PoCL runs a block's work-items on one CPU thread's
  // stack; 1024 overflowed it).
  const std::int64_t width = dv > 0 ? dv : 128;
  for (int q : {8, 4}) {
    s.q_tile = q;
    s.stage_v = true;
    if (shared_bytes(s, width, width) <= shared_limit) return s;
    s.stage_v = false;
    if (shared_bytes(s, width, width) <= shared_limit) return s;
  }
  s.stage_k = false;
  return s;
}

flash_gpu_schedule banded(flash_gpu_schedule s, std::int64_t band) {
  if (band <= 0) return s;
  const std::int64_t quarter = (band / 4 + s.threads - 1) / s.threads * s.threads;
  s.kv_tile = static_cast<int>(std::clamp<std::int64_t>(quarter, s.threads, s.kv_tile));
  return s;
}

void schedule_flash_gpu(flash_funcs& f, const std::vector<ImageParam>& params, const flash_gpu_schedule& s, const Target&) {
  if (s.shared == flash_gpu_variant::per_thread) return schedule_flash_per_thread(f, s);
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
