#include "tuning_key.hpp"

#include <bit>
#include <cstdio>
#include <set>
#include <Halide.h>

namespace attn {

std::string tuning_signature(const ir::graph& g, const jit_options& o) {
  const std::string text = ir::serialize(g) + "|weights=" + (o.with_weights ? "1" : "0") +
                           "|path=" + (o.path == lowering::generic ? "generic" : "fused") +  // automatic fuses attention
                           (o.with_lse ? "|lse=1" : "");  // absent when off: earlier records keep their signature
  std::uint64_t h = 14695981039346656037ull;  // FNV-1a: simple, stable, no dependency
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

std::optional<std::string> shape_bucket(const ir::graph& g, const std::map<std::string, std::int64_t, std::less<>>& sizes) {
  std::set<std::string> run_time;
  for (const ir::node& n : g.nodes)
    for (const ir::dim& d : n.shape)
      if (d.size == 0 && d.numerator.empty()) run_time.emplace(d.name);
  if (run_time.empty()) return "static";
  std::string b;
  for (const std::string& name : run_time) {
    auto it = sizes.find(name);
    if (it == sizes.end() || it->second < 1) return std::nullopt;
    b += (b.empty() ? "" : ",") + name + "=" + std::to_string(std::bit_ceil(static_cast<std::uint64_t>(it->second)));
  }
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
