#include "memory_budget.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <unistd.h>
#include "environment.hpp"
#include "limits.hpp"

namespace attn::detail {

namespace {

constexpr std::int64_t saturated = std::numeric_limits<std::int64_t>::max();

std::int64_t saturating_mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? saturated : r;
}
std::int64_t saturating_add(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? saturated : r;
}

std::string sizes_text(const std::vector<std::int64_t>& s) {
  std::string t = "(";
  for (std::size_t k = 0; k < s.size(); ++k) t += (k ? ", " : "") + std::to_string(s[k]);
  return t + ")";
}

memory_need need_of(const ir::node& n, const call_shape& call, bool intermediate) {
  const std::vector<std::int64_t> sizes = result_sizes(n, call);
  std::int64_t bytes = 4;
  for (std::int64_t s : sizes) bytes = saturating_mul(bytes, s);
  const std::string what = intermediate ? "intermediate " + std::string(ir::op_name(n.kind)) : "output";
  return {what + " " + sizes_text(sizes), bytes, intermediate};
}

std::int64_t default_budget() {
  if (const auto n = number_from_environment("ATTN_MEMORY_BUDGET", quantity::bytes); n && *n > 0)
    return static_cast<std::int64_t>(*n);
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return std::int64_t{4} << 30;
  return saturating_mul(pages, page) / 2;
}

std::atomic<std::int64_t>& budget_setting() {
  static std::atomic<std::int64_t> b{0};  // 0: the default
  return b;
}

}  // namespace

memory_estimate estimate_memory(const ir::graph& g, const call_shape& call, std::span<const int> allocated,
                                std::span<const int> materialised) {
  memory_estimate e;
  for (int i : allocated) e.parts.push_back(need_of(g.at(i), call, false));
  for (int i : materialised) e.parts.push_back(need_of(g.at(i), call, true));
  for (const memory_need& p : e.parts) e.total = saturating_add(e.total, p.bytes);
  return e;
}

std::string bytes_text(std::int64_t bytes) {
  if (bytes == saturated) return "more than 2^63 bytes";
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = -1;
  while (v >= 1024.0 && u < 3) v /= 1024.0, ++u;
  if (u < 0) return std::to_string(bytes) + " bytes";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f %s (%lld bytes)", v, units[u], static_cast<long long>(bytes));
  return buf;
}

void check_memory(const memory_estimate& e, std::int64_t max_buffer_bytes) {
  for (const memory_need& p : e.parts)
    if (p.intermediate && p.bytes > max_buffer_bytes)
      throw memory_error("kernel call: the " + p.what + " needs " + bytes_text(p.bytes) + ", above the " +
                         std::to_string(max_buffer_bytes) + " bytes Halide allocates for one buffer on this target");
  const std::int64_t budget = memory_budget();
  if (e.total <= budget) return;
  std::string parts;
  for (const memory_need& p : e.parts) parts += (parts.empty() ? "" : ", ") + p.what + " " + bytes_text(p.bytes);
  throw memory_error("kernel call: needs " + bytes_text(e.total) + " of temporaries, above the memory budget of " +
                     bytes_text(budget) + " (attn::set_memory_budget): " + parts);
}

}  // namespace attn::detail

namespace attn {

void set_memory_budget(std::int64_t bytes) { detail::budget_setting().store(bytes > 0 ? bytes : 0); }

std::int64_t memory_budget() {
  const std::int64_t b = detail::budget_setting().load();
  if (b > 0) return b;
  static const std::int64_t fallback = detail::default_budget();
  return fallback;
}

}  // namespace attn
