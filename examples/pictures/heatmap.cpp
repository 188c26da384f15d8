#include "heatmap.hpp"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include "canvas.hpp"

namespace pictures {

namespace {

constexpr double label_size = 14, title_size = 16, value_size = 11;

std::string fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

double widest(const std::vector<std::string>& labels) {
  canvas probe(1, 1);
  double w = 0;
  for (const auto& l : labels) w = std::max(w, probe.text_width(l, label_size));
  return w;
}

}  // namespace

heatmap_layout layout(const heatmap_spec& spec, std::size_t rows, std::size_t cols) {
  heatmap_layout l{};
  l.cell = std::clamp(480.0 / static_cast<double>(std::max(rows, cols)), 24.0, 64.0);
  l.left = 40 + widest(spec.row_labels) + 12;
  l.top = 56;
  const double colorbar = 110;
  l.width = static_cast<int>(std::ceil(l.left + static_cast<double>(cols) * l.cell + colorbar));
  l.height = static_cast<int>(std::ceil(l.top + static_cast<double>(rows) * l.cell + widest(spec.col_labels) + 56));
  return l;
}

void heatmap(const std::filesystem::path& path, std::span<const float> values, const heatmap_spec& spec) {
  const std::size_t rows = spec.row_labels.size(), cols = spec.col_labels.size();
  if (rows == 0 || cols == 0 || values.size() != rows * cols)
    throw std::invalid_argument("heatmap '" + spec.title + "': " + std::to_string(values.size()) + " values for " +
                                std::to_string(rows) + " row labels × " + std::to_string(cols) + " column labels");
  const auto [mn, mx] = std::minmax_element(values.begin(), values.end());
  const double lo = spec.lo.value_or(*mn), hi = spec.hi.value_or(*mx);
  const double span = hi > lo ? hi - lo : 1.0;
  const heatmap_layout l = layout(spec, rows, cols);

  canvas c(l.width, l.height);
  c.text(spec.title, l.width / 2.0, 24, title_size, align::center, {0, 0, 0}, true);
  for (std::size_t i = 0; i < rows; ++i) {
    const double y = l.top + static_cast<double>(i) * l.cell;
    c.text(spec.row_labels[i], l.left - 8, y + l.cell / 2, label_size, align::right);
    for (std::size_t j = 0; j < cols; ++j) {
      const double x = l.left + static_cast<double>(j) * l.cell, v = values[i * cols + j];
      const double t = (v - lo) / span;
      c.fill_rect(x, y, l.cell, l.cell, viridis(t));
      if (l.cell >= 40)
        c.text(fixed(v, 2), x + l.cell / 2, y + l.cell / 2, value_size, align::center, t > 0.6 ? rgb{0, 0, 0} : rgb{1, 1, 1});
    }
  }
  const double bottom = l.top + static_cast<double>(rows) * l.cell;
  for (std::size_t j = 0; j < cols; ++j)
    c.text(spec.col_labels[j], l.left + (static_cast<double>(j) + 0.5) * l.cell, bottom + 8, label_size, align::right,
           {0, 0, 0}, false, true);
  c.text(spec.row_axis, 16, l.top + static_cast<double>(rows) * l.cell / 2, label_size, align::center, {0.3, 0.3, 0.3},
         true, true);
  c.text(spec.col_axis, l.left + static_cast<double>(cols) * l.cell / 2, l.height - 14.0, label_size, align::center,
         {0.3, 0.3, 0.3}, true);

  // Colour bar: hi at the top, lo at the bottom.
  const double bx = l.left + static_cast<double>(cols) * l.cell + 24, bh = static_cast<double>(rows) * l.cell;
  for (int k = 0; k < 100; ++k) c.fill_rect(bx, l.top + bh * k / 100.0, 16, bh / 100.0 + 1, viridis(1.0 - k / 100.0));
  c.stroke_rect(bx, l.top, 16, bh, {0.3, 0.3, 0.3});
  for (double f : {0.0, 0.5, 1.0}) c.text(fixed(lo + f * (hi - lo), 2), bx + 22, l.top + bh * (1 - f), value_size);
  c.save_png(path);
}

}  // namespace pictures
