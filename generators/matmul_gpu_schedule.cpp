#include "matmul_gpu_schedule.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include "gpu_threads.hpp"

namespace attn::gen {

using namespace Halide;

namespace {

struct field {
  std::string_view key;
  int matmul_gpu_schedule::*value;
};
constexpr field fields[] = {{"threads_x", &matmul_gpu_schedule::threads_x},
                            {"threads_y", &matmul_gpu_schedule::threads_y},
                            {"cols", &matmul_gpu_schedule::cols},
                            {"rows", &matmul_gpu_schedule::rows}};

}  // namespace

std::string matmul_gpu_schedule::to_string() const {
  std::string s;
  for (const field& f : fields) s += (s.empty() ? "" : " ") + std::string(f.key) + "=" + std::to_string(this->*f.value);
  return s;
}

matmul_gpu_schedule matmul_gpu_schedule::parse(std::string_view text) {
  matmul_gpu_schedule s;
  std::istringstream in{std::string(text)};
  std::string item;
  while (in >> item) {
    const std::size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const field* f = std::find_if(std::begin(fields), std::end(fields), [&](const field& x) { return x.key == key; });
    if (f == std::end(fields) || eq == std::string::npos)
      throw std::invalid_argument("matmul_gpu_schedule: unknown key '" + key + "'");
    std::size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(item.substr(eq + 1), &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() - eq - 1 || v < 1 || v > 1024)
      throw std::invalid_argument("matmul_gpu_schedule: " + key + " must be an integer in [1, 1024], got '" + item.substr(eq + 1) + "'");
    s.*f->value = v;
  }
  if (s.threads_x * s.threads_y > 1024)
    throw std::invalid_argument("matmul_gpu_schedule: threads_x × threads_y = " + std::to_string(s.threads_x * s.threads_y) +
                                " threads per block; at most 1024");
  return s;
}

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
