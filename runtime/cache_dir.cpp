#include "cache_dir.hpp"

#include <cstdlib>
#include <string_view>

namespace attn::detail {

std::optional<std::filesystem::path> kernel_cache_dir() {
  if (const char* dir = std::getenv("ATTN_CACHE_DIR")) {
    const std::string_view d(dir);
    if (d.empty() || d == "off") return std::nullopt;
    return std::filesystem::path(d);
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg == '/') return std::filesystem::path(xdg) / "attnforge";
  if (const char* home = std::getenv("HOME"); home && *home) return std::filesystem::path(home) / ".cache" / "attnforge";
  return std::nullopt;  // nowhere sensible: compile in-process only
}

}  // namespace attn::detail
