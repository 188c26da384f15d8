#include "random_inputs.hpp"

#include <cmath>
#include <random>
#include <stdexcept>

namespace attn::tune {

namespace {

std::int64_t size_of(const ir::dim& d, const dim_sizes& sizes) {
  if (d.size > 0) return d.size;
  if (auto it = sizes.find(d.name); it != sizes.end()) return it->second;
  throw std::invalid_argument("tuner: no size for run-time dim '" + std::string(d.name) + "'");
}

}  // namespace

kernel_inputs random_inputs(const ir::graph& g, const dim_sizes& sizes, unsigned seed, std::int64_t batch) {
  kernel_inputs in;
  in.floats.reserve(g.terminals.size());
  in.ints.reserve(g.terminals.size());
  in.bf16s.reserve(g.terminals.size());
  in.f16s.reserve(g.terminals.size());
  std::mt19937 rng(seed);
  for (int t : g.terminals) {
    const ir::node& n = g.at(t);
    std::vector<std::int64_t> shape;
    if (n.batched && batch > 1) shape.push_back(batch);
    for (const ir::dim& d : n.shape) shape.push_back(size_of(d, sizes));
    if (n.kind == ir::op::int_input) {
      // Rank 0 (lengths): the longest run-time dim given (every position valid). Otherwise
      // (document ids, indices): small values, some equal; lookups clamp them anyway.
      std::int64_t longest = 1;
      for (const auto& [name, size] : sizes) longest = std::max(longest, size);
      tensor<std::int32_t>& x = in.ints.emplace_back(std::move(shape), std::int32_t(longest));
      std::uniform_int_distribution<std::int32_t> u(0, 3);
      if (!n.shape.empty())
        for (std::int32_t& v : x.values()) v = u(rng);
      in.views.push_back(x.view());
      continue;
    }
    const float scale = n.kind == ir::op::weight && !shape.empty() ? 1.0f / std::sqrt(float(shape.front())) : 1.0f;  // (no batch dim)
    std::uniform_real_distribution<float> u(-scale, scale);
    const auto fill = [&](auto& x) {
      for (auto& v : x.values()) v = std::remove_reference_t<decltype(v)>(u(rng));
      in.views.push_back(x.view());
    };
    if (n.type == ir::element::bf16) fill(in.bf16s.emplace_back(std::move(shape)));
    else if (n.type == ir::element::f16) fill(in.f16s.emplace_back(std::move(shape)));
    else fill(in.floats.emplace_back(std::move(shape)));
  }
  return in;
}

}  // namespace attn::tune
