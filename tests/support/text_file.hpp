#pragma once
// A file's whole content as text, and a file written with exactly the given text (bytes as they
// are: no newline translation).
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace attn::ref {

inline void write_text(const std::filesystem::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

// "" for a file that cannot be read.
inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace attn::ref
