#include "output_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace attn::tune {

std::string check_result::describe() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "max error %.3g at element %zu (tolerance %.3g)", max_error, worst, tolerance);
  return buf;
}

check_result check_output(std::span<const float> reference, std::span<const float> candidate, dtype stored) {
  check_result r;
  if (reference.size() != candidate.size()) {
    r.ok = false;
    r.max_error = std::numeric_limits<double>::infinity();
    return r;
  }
  double scale = 1;
  for (float x : reference)
    if (std::isfinite(x)) scale = std::max(scale, double(std::abs(x)));
  r.tolerance = (3e-5 + (stored == dtype::bf16 ? 0x1p-7 : stored == dtype::f16 ? 0x1p-10 : 0)) * scale;
  for (std::size_t i = 0; i < reference.size(); ++i) {
    const double a = reference[i], b = candidate[i];
    double e = 0;
    if (std::isnan(a) || std::isnan(b)) e = std::isnan(a) == std::isnan(b) ? 0 : std::numeric_limits<double>::infinity();
    else if (std::isinf(a) || std::isinf(b)) e = a == b ? 0 : std::numeric_limits<double>::infinity();
    else e = std::abs(a - b);
    if (e > r.max_error) {
      r.max_error = e;
      r.worst = i;
    }
  }
  r.ok = r.max_error <= r.tolerance;
  return r;
}

}  // namespace attn::tune
