#pragma once
// Renders a Graphviz graph (DOT text, e.g. from attn::dsl::to_dot) to PNG with Graphviz's library.
#include <filesystem>
#include <string>

namespace pictures {

// Throws std::invalid_argument if Graphviz cannot parse the text, std::runtime_error if it cannot
// lay it out or write the file.
void graph_picture(const std::filesystem::path& path, const std::string& dot);

}  // namespace pictures
