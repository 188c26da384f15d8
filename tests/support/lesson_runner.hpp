#pragma once
// Runs an example program into a fresh directory and reads back what it recorded: its JSON
// record, its pictures. The lesson tests check these against independent references.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include "reference.hpp"

namespace lessons {

namespace fs = std::filesystem;

struct run_result {
  fs::path dir;
  nlohmann::json record;
  std::string printed;
};

// ATTN_EXAMPLES_DIR: where CMake put the example programs.
inline run_result run(const std::string& program, const std::string& record_name) {
  run_result r;
  r.dir = fs::temp_directory_path() / ("attn_lesson_" + std::to_string(::getpid()) + "_" + program);
  fs::remove_all(r.dir);
  fs::create_directories(r.dir);
  const fs::path exe = fs::path(ATTN_EXAMPLES_DIR) / program, log = r.dir / "printed.txt";
  const std::string command = "\"" + exe.string() + "\" \"" + r.dir.string() + "\" > \"" + log.string() + "\" 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream printed(log);
  r.printed.assign(std::istreambuf_iterator<char>(printed), {});
  if (status != 0) throw std::runtime_error(program + " failed (status " + std::to_string(status) + "):\n" + r.printed);
  std::ifstream in(r.dir / (record_name + ".json"));
  if (!in) throw std::runtime_error(program + " wrote no " + record_name + ".json");
  r.record = nlohmann::json::parse(in);
  return r;
}

// A recorded tensor {"shape": [...], "values": [...]} as a double matrix (rank 1: one row;
// rank 3+: leading dims stacked along the rows).
inline attn::ref::mat<double> matrix(const nlohmann::json& t) {
  const auto shape = t.at("shape").get<std::vector<std::int64_t>>();
  const auto values = t.at("values").get<std::vector<double>>();
  const std::int64_t cols = shape.empty() ? 1 : shape.back();
  attn::ref::mat<double> m(static_cast<std::int64_t>(values.size()) / cols, cols);
  m.a = values;
  return m;
}

inline double max_difference(const attn::ref::mat<double>& a, const attn::ref::mat<double>& b) {
  if (a.rows != b.rows || a.cols != b.cols) return std::numeric_limits<double>::infinity();
  double d = 0;
  for (std::size_t i = 0; i < a.a.size(); ++i) d = std::max(d, std::abs(a.a[i] - b.a[i]));
  return d;
}

// Width and height of a PNG file, from its signature and IHDR chunk; {0, 0} if it is not one.
inline std::pair<std::uint32_t, std::uint32_t> png_size(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char h[24] = {};
  if (!in.read(reinterpret_cast<char*>(h), sizeof h)) return {0, 0};
  const unsigned char signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (!std::equal(signature, signature + 8, h) || std::string(reinterpret_cast<char*>(h + 12), 4) != "IHDR") return {0, 0};
  auto be32 = [&](int o) { return std::uint32_t(h[o]) << 24 | std::uint32_t(h[o + 1]) << 16 | std::uint32_t(h[o + 2]) << 8 | h[o + 3]; };
  return {be32(16), be32(20)};
}

}  // namespace lessons
