#include "generators/gpu/flash_backward_gpu_schedule.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include "generators/gpu/gpu_threads.hpp"

namespace attn::gen {

using namespace Halide;

namespace {

// A block's allocation sized when compiling, as in the forward (flash_gpu_schedule.cpp's
// bound_per_tile says why): `sizes` for the first args, 1 for the rest (tiles, lead dims, batch).
// Each holds by construction: a step reads its own tiles only.
void bound_storage(Func f, const std::vector<int>& sizes) {
  const std::vector<Var> a = f.args();
  for (std::size_t k = 0; k < a.size(); ++k) f.bound_storage(a[k], k < sizes.size() ? sizes[k] : 1);
}

void schedule_pass(const backward_funcs& b, backward_pass& p, const flash_gpu_schedule& s) {
  // Threads: across the exits' width (and a tile's keys), and across the pass's own rows.
  const int tx = s.threads, ty = std::max(1, std::min(p.tile_rows, 1024 / tx));
  std::vector<Var> others(b.lead.begin(), b.lead.end());
  if (b.batched) others.push_back(b.batch);
  // The own tile a block dim of its own (as the forward's query tile): bounds inference then
  // tells a block's tile, and sizes its scratch for one.
  auto on_blocks = [&](Stage st) {
    if (others.empty()) st.gpu_blocks(p.tile);
    else st.gpu_blocks(p.tile, fuse_all(st, others));
  };
  p.acc.compute_root().bound(p.i, 0, p.tile_rows);
  if (p.width_known > 0) p.acc.bound(p.d, 0, p.width_known);
  threads_2d(p.acc, p.d, p.i, tx, ty);
  on_blocks(p.acc);
  Stage u = p.acc.update();
  threads_2d(u, p.d, p.i, tx, ty, {}, {p.tile_loop()});
  on_blocks(u);

  const LoopLevel step(p.acc, p.tile_loop());
  // The pair values the exits and tables read (and a table's cells): whole tiles in shared memory,
  // each site by a thread. (Their readers read every site, so their regions are exact.)
  for (Func f : p.values) {
    const std::vector<Var> a = f.args();
    f.compute_at(step).bound_extent(a[0], b.kv_tile).bound_extent(a[1], b.q_tile);
    on_block_threads(f, tx, ty);
    bound_storage(f, {b.kv_tile, b.q_tile});
  }
  // The pair nodes beneath them, one Func per use (fused_backward.cpp): inlined, and the products
  // (Q·Kᵀ, dO·Vᵀ) each computed at the one site of the pair value that reads it, its dot product
  // in the thread's registers. Stored per tile instead, a product's region would follow bounds
  // inference through the masks' selects, which narrows it (the pairs a mask keeps) differently
  // per reader and stage, past a tile's storage.
  std::map<std::string, Func> pair_funcs;
  for (const stage& pw : p.pairwise) {
    pair_funcs.emplace(pw.func.name(), pw.func);
    if (pw.right_finite.defined()) gpu_root(pw.right_finite);  // on the device: no copy back to the host
  }
  std::map<std::string, std::string> placed;  // product -> the pair value it is computed in
  for (Func site : p.values) {
    const LoopLevel at(site, Var(site.args()[0].name() + "_o"));  // on_block_threads' serial loop: one site
    std::vector<Internal::Function> pending{site.function()};
    std::set<std::string> seen{site.name()};
    while (!pending.empty()) {
      const Internal::Function caller = pending.back();
      pending.pop_back();
      for (const auto& [name, callee] : Internal::find_direct_calls(caller)) {
        auto it = pair_funcs.find(name);
        if (it == pair_funcs.end() || !seen.insert(name).second) continue;
        pending.push_back(callee);
        Func f = it->second;
        if (!f.has_update_definition()) continue;  // inlined
        if (!placed.emplace(name, site.name()).second)
          throw std::logic_error("GPU backward: the per-tile product " + name + " is read by two pair values");
        f.compute_at(at);
        bound_storage(f, {});
      }
    }
  }
  // A table's tile sums: a thread per lane, each lane's pairs in order (fused_backward.cpp).
  for (Func f : p.tile_sums) {
    const Var cell = f.args()[0], lane = f.args()[1];
    f.compute_at(step).bound(lane, 0, scatter_lanes);
    threads_2d(f, cell, lane, tx, scatter_lanes);
    f.update().gpu_threads(lane);
  }
  // The exits' products: a thread per (column, row) of the step's results, the contracted tile
  // inside it.
  for (std::size_t k = 0; k < p.products.size(); ++k) {
    Func f = p.products[k];
    f.compute_at(step);
    on_block_threads(f, tx, ty);
    bound_storage(f, {p.width_known, p.tile_rows});
    if (p.finite[k].defined()) gpu_root(p.finite[k]);
  }
}

}  // namespace

void schedule_flash_backward_gpu(backward_funcs& b, const flash_gpu_schedule& s) {
  for (backward_pass& p : b.passes) schedule_pass(b, p, s);
}

}  // namespace attn::gen
