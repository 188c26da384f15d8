#include "tuning_key.hpp"

#include <bit>
#include <cstdio>
#include <Halide.h>

namespace attn {

std::string tuning_signature(const ir::graph& g, const jit_options& o) {
  ir::graph sizeless = g;  // the sizes go to the bucket
  for (ir::node& n : sizeless.nodes) {
    for (ir::dim& d : n.shape) d.size = d.numerator_size = d.denominator_size = 0;
    if (n.kind == ir::op::dim_value) n.value = 0;  // a dim's size read as a number (rsqrt(Dh))
  }
  const std::string text = ir::serialize(sizeless) + "|weights=" + (o.with_weights ? "1" : "0") +
                           "|path=" + (o.path == lowering::generic ? "generic" : "fused") +  // automatic fuses attention
                           (o.with_lse ? "|lse=1" : "");
  std::uint64_t h = 14695981039346656037ull;  // FNV-1a: simple, stable, no dependency
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

std::optional<std::string> shape_bucket(const ir::graph& g, const std::map<std::string, std::int64_t, std::less<>>& sizes) {
  std::map<std::string, std::int64_t> known;  // by name, sorted
  for (const ir::node& n : g.nodes)
    for (const ir::dim& d : n.shape) {
      if (!d.numerator.empty() || d.role == ir::dim_role::unit) continue;
      std::int64_t size = d.size;
      if (size == 0) {
        const auto it = sizes.find(d.name);
        if (it == sizes.end() || it->second < 1) return std::nullopt;
        size = it->second;
      }
      known.emplace(d.name, size);
    }
  if (known.empty()) return "static";
  std::string b;
  for (const auto& [name, size] : known)
    b += (b.empty() ? "" : ",") + name + "=" + std::to_string(std::bit_ceil(static_cast<std::uint64_t>(size)));
  return b;
}

std::string tuning_target(const std::string& target) {
  if (target == "host") return Halide::get_host_target().to_string();
  try {
    return Halide::Target(target).to_string();
  } catch (const Halide::Error&) {
    return target;  // compiling reports the bad target
  }
}

}  // namespace attn
