// attn-cache: the disk kernel cache from the command line (runtime/disk_cache.hpp).
//   attn-cache [--dir DIR] where            the folder, its size limit, whether it is used
//   attn-cache [--dir DIR] list             its entries, least recently used first
//   attn-cache [--dir DIR] clear [--stale]  remove entries (only other builds' with --stale)
//   attn-cache [--dir DIR] trim [--limit N] drop least recently used entries down to N bytes
// Only attnforge's own files are ever removed.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <CLI/CLI.hpp>
#include "cache_dir.hpp"
#include "disk_cache.hpp"
#include "environment.hpp"
#include "private_folder.hpp"

namespace {

namespace fs = std::filesystem;
using attn::detail::cache_entry;
using attn::detail::disk_cache;

std::string when(fs::file_time_type t) {
  const auto system = std::chrono::file_clock::to_sys(t);
  const std::time_t tt = std::chrono::system_clock::to_time_t(system);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", std::localtime(&tt));
  return buf;
}

std::string megabytes(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

// What an entry holds, for a person: the kernel's expression, cut to one line.
std::string what(const cache_entry& e, const std::string& version) {
  if (e.key.empty()) return "(unreadable: replaced when next used)";
  std::string k = e.key.substr(0, e.key.find('\n'));
  if (k.size() > 70) k = k.substr(0, 67) + "...";
  return (e.version == version ? "" : "[other build] ") + k;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The disk cache of attnforge's JIT: where it is, what it holds; clear or trim it.", "attn-cache"};
  std::string dir_option;
  app.add_option("-d,--dir", dir_option, "the cache folder (default: $ATTN_CACHE_DIR, $XDG_CACHE_HOME/attnforge or ~/.cache/attnforge)");
  app.require_subcommand(1);
  app.add_subcommand("where", "print the folder, its size limit and whether attnforge uses it");
  app.add_subcommand("list", "list the entries, least recently used first");
  bool stale = false;
  app.add_subcommand("clear", "remove the entries (and leftovers of killed compiles)")
      ->add_flag("--stale", stale, "only those written by other builds of attnforge or Halide");
  std::string limit_text;
  app.add_subcommand("trim", "remove least recently used entries until the rest fit the limit")
      ->add_option("--limit", limit_text, "bytes, optionally with K, M or G (default: ATTN_CACHE_SIZE_LIMIT or 2G)");
  CLI11_PARSE(app, argc, argv);
  const std::string command = app.get_subcommands().front()->get_name();

  std::optional<fs::path> dir = dir_option.empty() ? attn::detail::kernel_cache_dir() : std::optional<fs::path>(dir_option);
  if (!dir) {
    std::fprintf(stderr, "attn-cache: the disk cache is off (ATTN_CACHE_DIR=off) or no home folder is known; give --dir\n");
    return 2;
  }
  std::error_code ec;
  if (!fs::exists(*dir, ec)) {
    std::printf("%s: no cache there yet\n", dir->c_str());
    return 0;
  }
  const auto cache = disk_cache::open(*dir, attn::detail::disk_cache_version());  // reports why it is not used
  if (!cache) return 1;

  if (command == "where") {
    std::uint64_t total = 0;
    const auto entries = cache->entries();
    for (const cache_entry& e : entries) total += e.bytes;
    std::printf("%s\n  %zu entries, %s of %s allowed (ATTN_CACHE_SIZE_LIMIT)\n  this build: %s\n", cache->dir().c_str(),
                entries.size(), megabytes(total).c_str(), megabytes(disk_cache::size_limit()).c_str(), cache->version().c_str());
  } else if (command == "list") {
    for (const cache_entry& e : cache->entries())
      std::printf("%s  %9s  %s  %s\n", e.path.filename().c_str(), megabytes(e.bytes).c_str(), when(e.last_used).c_str(),
                  what(e, cache->version()).c_str());
  } else if (command == "clear") {
    std::printf("removed %zu entries\n", cache->clear(stale));
  } else {
    std::uint64_t limit = disk_cache::size_limit();
    if (!limit_text.empty()) {
      const auto n = attn::detail::parse_quantity(limit_text, attn::detail::quantity::bytes);
      if (!n) {
        std::fprintf(stderr, "attn-cache: --limit %s: expected bytes, a whole number >= 0, optionally with K, M or G\n",
                     limit_text.c_str());
        return 2;
      }
      limit = *n;
    }
    const std::size_t before = cache->entries().size();
    cache->trim(limit);
    std::printf("removed %zu entries\n", before - cache->entries().size());
  }
  return 0;
}
