#pragma once
// Where a lesson puts what it shows: pictures (PNG) and a JSON record of its key numbers, in the
// directory named by the first argument (default ./attnforge_output). Tests read the record.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>
#include "pictures/heatmap.hpp"
#include "pictures/line_plot.hpp"
#include "runtime/tensor.hpp"

namespace examples {

inline nlohmann::json to_json(const attn::tensor<float>& t) {
  return {{"shape", t.sizes()}, {"values", std::vector<float>(t.values().begin(), t.values().end())}};
}

class lesson_output {
 public:
  lesson_output(std::string lesson, int argc, char** argv)
      : lesson_(std::move(lesson)), dir_(argc > 1 ? argv[1] : "attnforge_output") {
    std::filesystem::create_directories(dir_);
  }

  std::filesystem::path path(const std::string& file) const { return dir_ / file; }

  // The lesson's key numbers, saved as <dir>/<lesson>.json by save().
  nlohmann::json record;

  void heatmap(const std::string& file, const attn::tensor<float>& m, const pictures::heatmap_spec& spec) const {
    pictures::heatmap(path(file), m.values(), spec);
    wrote(file);
  }

  void line_plot(const std::string& file, const pictures::plot_spec& spec, const std::vector<pictures::series>& lines) const {
    pictures::line_plot(path(file), spec, lines);
    wrote(file);
  }

  void text_file(const std::string& file, const std::string& contents) const {
    std::ofstream out(path(file));
    out << contents;
    if (!out) throw std::runtime_error("could not write " + path(file).string());
    wrote(file);
  }

  void wrote(const std::string& file) const { std::printf("wrote %s\n", path(file).c_str()); }

  void save() const {
    text_file(lesson_ + ".json", record.dump(2) + "\n");
  }

 private:
  std::string lesson_;
  std::filesystem::path dir_;
};

}  // namespace examples
