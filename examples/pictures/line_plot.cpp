#include "line_plot.hpp"
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include "canvas.hpp"

namespace pictures {

namespace {

constexpr int width = 760, height = 500;
constexpr double left = 90, right = 30, top = 50, bottom = 70;
constexpr std::array<rgb, 6> palette{{{0.12, 0.47, 0.71}, {1.0, 0.50, 0.05}, {0.17, 0.63, 0.17},
                                      {0.84, 0.15, 0.16}, {0.58, 0.40, 0.74}, {0.55, 0.34, 0.29}}};

// One axis: data range → pixels, and where its ticks go.
struct axis {
  bool log;
  double lo, hi;  // in data units (log2 of them when log)

  axis(bool log_scale, double mn, double mx) : log(log_scale) {
    lo = log ? std::log2(mn) : mn;
    hi = log ? std::log2(mx) : mx;
    if (!log) lo = std::min(lo, 0.0);  // linear axes start at zero, so growth reads honestly
    if (hi - lo < 1e-12) hi = lo + 1;
    const double pad = 0.04 * (hi - lo);  // keep points off the frame
    hi += pad;
    if (log) lo -= pad;
  }
  double fraction(double v) const { return ((log ? std::log2(v) : v) - lo) / (hi - lo); }

  std::vector<double> ticks() const {
    std::vector<double> t;
    if (log) {
      const double decades = (hi - lo) / std::log2(10.0);
      const double base = decades > 4 ? 10.0 : 2.0, step_exp = base == 10.0 ? std::ceil(decades / 8) : std::ceil((hi - lo) / 12);
      const double e0 = std::ceil(lo / std::log2(base) - 1e-9), e1 = std::floor(hi / std::log2(base) + 1e-9);
      for (double e = e0; e <= e1; e += step_exp) t.push_back(std::pow(base, e));
    } else {
      const double raw = (hi - lo) / 6, mag = std::pow(10.0, std::floor(std::log10(raw)));
      const double step = raw / mag < 2 ? 2 * mag : raw / mag < 5 ? 5 * mag : 10 * mag;
      for (double v = std::ceil(lo / step) * step; v <= hi + 1e-9 * step; v += step) t.push_back(std::abs(v) < 1e-12 * step ? 0 : v);
    }
    return t;
  }
};

std::string tick_label(double v) {
  char buf[32];
  if (v != 0 && (std::abs(v) >= 1e5 || std::abs(v) < 1e-3)) {
    const int e = static_cast<int>(std::floor(std::log10(std::abs(v)) + 1e-9));
    const double m = v / std::pow(10.0, e);
    std::abs(m - 1) < 1e-9 ? std::snprintf(buf, sizeof buf, "1e%d", e) : std::snprintf(buf, sizeof buf, "%.3ge%d", m, e);
  } else {
    std::snprintf(buf, sizeof buf, "%g", v);
  }
  return buf;
}

}  // namespace

void line_plot(const std::filesystem::path& path, const plot_spec& spec, const std::vector<series>& lines) {
  double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin, ymin = xmin, ymax = -xmin;
  for (const series& s : lines) {
    if (s.x.empty() || s.x.size() != s.y.size())
      throw std::invalid_argument("line_plot '" + spec.title + "': series '" + s.name + "' is empty or its x and y differ in length");
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if ((spec.log_x && !(s.x[i] > 0)) || (spec.log_y && !(s.y[i] > 0)) || !std::isfinite(s.x[i]) || !std::isfinite(s.y[i]))
        throw std::invalid_argument("line_plot '" + spec.title + "': series '" + s.name + "' has a value a " +
                                    "log axis cannot show (zero, negative or not finite)");
      xmin = std::min(xmin, s.x[i]), xmax = std::max(xmax, s.x[i]);
      ymin = std::min(ymin, s.y[i]), ymax = std::max(ymax, s.y[i]);
    }
  }
  if (lines.empty()) throw std::invalid_argument("line_plot '" + spec.title + "': no series");
  const axis ax(spec.log_x, xmin, xmax), ay(spec.log_y, ymin, ymax);
  const double pw = width - left - right, ph = height - top - bottom;
  auto px = [&](double x) { return left + ax.fraction(x) * pw; };
  auto py = [&](double y) { return top + (1 - ay.fraction(y)) * ph; };

  canvas c(width, height);
  c.text(spec.title, width / 2.0, 24, 16, align::center, {0, 0, 0}, true);
  const rgb grid{0.88, 0.88, 0.88}, ink{0.2, 0.2, 0.2};
  for (double t : ax.ticks()) {
    c.line(px(t), top, px(t), top + ph, grid);
    c.text(tick_label(t), px(t), top + ph + 16, 12, align::center, ink);
  }
  for (double t : ay.ticks()) {
    c.line(left, py(t), left + pw, py(t), grid);
    c.text(tick_label(t), left - 8, py(t), 12, align::right, ink);
  }
  c.stroke_rect(left, top, pw, ph, ink);
  c.text(spec.x_label + (spec.log_x ? " (log scale)" : ""), left + pw / 2, height - 22.0, 14, align::center, ink, true);
  c.text(spec.y_label + (spec.log_y ? " (log scale)" : ""), 20, top + ph / 2, 14, align::center, ink, true, true);

  for (std::size_t k = 0; k < lines.size(); ++k) {
    const series& s = lines[k];
    const rgb color = palette[k % palette.size()];
    for (std::size_t i = 0; i + 1 < s.x.size(); ++i)
      c.line(px(s.x[i]), py(s.y[i]), px(s.x[i + 1]), py(s.y[i + 1]), color, 2.5, s.dashed);
    for (std::size_t i = 0; i < s.x.size(); ++i) c.fill_rect(px(s.x[i]) - 3, py(s.y[i]) - 3, 6, 6, color);
    const double ly = top + 18 + 20.0 * static_cast<double>(k);
    c.line(left + 12, ly, left + 40, ly, color, 2.5, s.dashed);
    c.text(s.name, left + 48, ly, 13, align::left, ink);
  }
  c.save_png(path);
}

}  // namespace pictures
