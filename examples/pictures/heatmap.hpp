#pragma once
// A heatmap of a matrix with labelled rows and columns, e.g. attention weights (queries × keys).
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace pictures {

struct heatmap_spec {
  std::string title{};
  std::vector<std::string> row_labels{}, col_labels{};  // one per row (query), one per column (key)
  std::string row_axis = "query", col_axis = "key";
  std::optional<double> lo{}, hi{};                  // colour range; the data's min and max when unset
};

// Where the cells lie in the picture; drawing and tests share it.
struct heatmap_layout {
  int width, height;
  double left, top, cell;  // cell (i, j) spans [left + j·cell, +cell) × [top + i·cell, +cell)
};

heatmap_layout layout(const heatmap_spec& spec, std::size_t rows, std::size_t cols);

// values: rows × cols, row-major. Writes a PNG; throws std::invalid_argument for labels that do
// not match the matrix, std::runtime_error if the file cannot be written.
void heatmap(const std::filesystem::path& path, std::span<const float> values, const heatmap_spec& spec);

}  // namespace pictures
