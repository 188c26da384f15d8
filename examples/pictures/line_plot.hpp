#pragma once
// Line plots of measured series, with linear or logarithmic axes and a legend.
#include <filesystem>
#include <string>
#include <vector>

namespace pictures {

struct series {
  std::string name{};
  std::vector<double> x{}, y{};
  bool dashed = false;
};

struct plot_spec {
  std::string title{}, x_label{}, y_label{};
  bool log_x = false, log_y = false;
};

// Writes a PNG; throws std::invalid_argument for empty or mismatched series or non-positive
// values on a log axis, std::runtime_error if the file cannot be written.
void line_plot(const std::filesystem::path& path, const plot_spec& spec, const std::vector<series>& lines);

}  // namespace pictures
