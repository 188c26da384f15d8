#include "generators/gpu/matmul_gpu_schedule.hpp"

#include <algorithm>
#include "generators/gpu/gpu_threads.hpp"

namespace attn::gen {

using namespace Halide;

namespace {

using S = matmul_gpu_schedule;
constexpr parameter<S> parameters[] = {
    number<&S::threads_x>("threads_x", 1, 1024),
    number<&S::threads_y>("threads_y", 1, 1024),
    number<&S::cols>("cols", 1, 1024),
    number<&S::rows>("rows", 1, 1024),
};
constexpr relation<S> relations[] = {
    {"threads_x threads_y", "threads_x × threads_y, the threads of a block, must be at most 1024",
     [](const S& s) { return s.threads_x * s.threads_y <= 1024; }},
};
constexpr parameter_table<S> table{"matmul GPU schedule", parameters, relations};

}  // namespace

const parameter_table<matmul_gpu_schedule>& matmul_gpu_schedule::parameters() { return table; }

std::string matmul_gpu_schedule::to_string() const { return table.print(*this); }

matmul_gpu_schedule matmul_gpu_schedule::parse(std::string_view text) { return table.parse(text, {}); }

matmul_gpu_schedule default_matmul_gpu_schedule(const matmul_shape& shape) {
  matmul_gpu_schedule s;
  if (shape.cols > 0 && shape.cols < s.threads_x * s.cols) s.threads_x = std::max<int>(1, static_cast<int>((shape.cols + s.cols - 1) / s.cols));
  if (shape.rows > 0 && shape.rows < s.threads_y * s.rows) s.threads_y = std::max<int>(1, static_cast<int>((shape.rows + s.rows - 1) / s.rows));
  return s;
}

Func apply_matmul_gpu_schedule(const lowered::stage& product, const matmul_gpu_schedule& s) {
  Func acc = product.func;
  const std::vector<Var>& v = product.vars;
  if (v.empty() || !product.reduction.defined()) {  // a scalar: one thread
    gpu_root(acc);
    return acc;
  }
  Func out = acc.in();
  out.compute_root();
  for (std::size_t i = 0; i < v.size() && i < product.extents.size(); ++i)
    if (product.extents[i] > 0) out.bound(v[i], 0, static_cast<int>(product.extents[i]));
  constexpr TailStrategy guard = TailStrategy::GuardWithIf;
  const Var n = v[0];
  Var nb("nb"), nt("nt"), nc("nc"), mb("mb"), mt("mt"), mr("mr");
  out.split(n, nb, nt, s.threads_x * s.cols, guard).split(nt, nt, nc, s.cols, guard);
  if (v.size() >= 2) {
    out.split(v[1], mb, mt, s.threads_y * s.rows, guard).split(mt, mt, mr, s.rows, guard);
    out.reorder(nc, mr, nt, mt, nb, mb).unroll(nc).unroll(mr);
    if (v.size() > 2) out.gpu_blocks(nb, mb, fuse_all(out, std::vector<Var>(v.begin() + 2, v.end())));
    else out.gpu_blocks(nb, mb);
    out.gpu_threads(nt, mt);
  } else {
    out.reorder(nc, nt, nb).unroll(nc).gpu_blocks(nb).gpu_threads(nt);
  }
  // The thread's tile of accumulators, in registers: the reduction outside the unrolled tile.
  acc.compute_at(out, nt).unroll(n, s.cols, guard);
  Stage u = acc.update();
  if (v.size() >= 2) {
    acc.unroll(v[1], s.rows, guard);
    u.reorder(n, v[1], product.reduction.x).unroll(n, s.cols, guard).unroll(v[1], s.rows, guard);
  } else {
    u.reorder(n, product.reduction.x).unroll(n, s.cols, guard);
  }
  return out;
}

}  // namespace attn::gen
