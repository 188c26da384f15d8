#include "dim_bindings.hpp"

#include <exception>
#include "halide_limits.hpp"

namespace attn::detail {

namespace {

// The expression's dims by name: static size, or 0 for run-time ones.
dim_sizes dims_of(const ir::graph& g) {
  dim_sizes d;
  for (const ir::node& n : g.nodes) {
    for (const ir::dim& x : n.shape) d.emplace(std::string(x.name), x.size);
    if (n.kind == ir::op::dim_value) d.emplace(std::string(n.name), static_cast<std::int64_t>(n.value));
  }
  return d;
}

}  // namespace

dim_sizes checked_bindings(const ir::graph& g, std::span<const dsl::dim_binding> bind) {
  const dim_sizes dims = dims_of(g);
  dim_sizes bound;
  for (const dsl::dim_binding& b : bind) {
    const std::string name(b.name), what = "bind " + name + " = " + std::to_string(b.size);
    const auto d = dims.find(name);
    if (d == dims.end()) {
      std::string known;
      for (const auto& [n, s] : dims) known += (known.empty() ? "" : ", ") + n;
      throw argument_error(what + ": the expression has no dim " + name + " (its dims: " + known + ")");
    }
    if (d->second > 0) {
      if (b.size != d->second)
        throw shape_error(what + ": dim " + name + " is fixed at " + std::to_string(d->second) + " by the expression");
      continue;
    }
    if (b.size < 1 || b.size > halide_max_extent)
      throw shape_error(what + ": a size must be in [1, " + std::to_string(halide_max_extent) + "]");
    if (auto [it, fresh] = bound.emplace(name, b.size); !fresh && it->second != b.size)
      throw argument_error(what + ": " + name + " is also bound to " + std::to_string(it->second));
  }
  return bound;
}

dsl::dim_binding parse_dim_binding(const std::string& option, const std::string& text, std::deque<std::string>& names) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) throw argument_error(option + " " + text + ": expected NAME=SIZE, e.g. T=128");
  std::size_t used = 0;
  long long size = 0;
  try {
    size = std::stoll(text.substr(eq + 1), &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() - eq - 1) throw argument_error(option + " " + text + ": the size must be a whole number");
  names.push_back(text.substr(0, eq));
  return {names.back(), size};
}

}  // namespace attn::detail
