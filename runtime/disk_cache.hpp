#pragma once
// Compiled kernels kept on disk across processes, one file per key: the kernel's shared object
// followed by a trailer (key, writer's version, checksum, magic). ELF loaders ignore bytes after
// the sections, so one file is both the loadable kernel and its own validation record, and one
// rename publishes both at once.
//
// Writes go to a fresh temporary file in the same folder, are fsync'ed and renamed over the
// entry: readers see the old entry or the new one, never half of one, and two processes
// writing the same key both succeed (the last rename wins; both wrote valid entries).
// A corrupt, truncated, foreign-version or colliding entry is reported once and treated as a
// miss; a folder that cannot be written is reported once and the cache only reads.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace attn {

// Receives the disk cache's one-line reports (a bad entry, a folder it cannot write). Default
// (or an empty function): a line on stderr. Thread-safe.
void set_disk_cache_reporter(std::function<void(const std::string&)> reporter);

}  // namespace attn

namespace attn::detail {

// Reports `message` through the reporter, once per process for each distinct `once_key`.
void report_once(const std::string& once_key, const std::string& message);

class disk_cache {
 public:
  // `version`: what produced the entries (Halide's and attnforge's versions); an entry written
  // under another is stale.
  disk_cache(std::filesystem::path dir, std::string version);

  // The entry's path if it exists and is intact, written under this version, for this key.
  std::optional<std::filesystem::path> find(const std::string& key) const;

  // Publishes the file at `payload` as the entry for `key`. False (and reported once) if the
  // folder cannot be created or written; the caller then simply runs without caching.
  bool store(const std::string& key, const std::filesystem::path& payload) const;

  std::filesystem::path entry_path(const std::string& key) const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  std::string version_;
};

// An entry's parts. nullopt, with `why` set, for bytes that are truncated, corrupt or not an entry.
struct entry_parts {
  std::string_view payload, key, version;
};
std::optional<entry_parts> parse_entry(std::string_view bytes, std::string& why);

// FNV-1a, 64 bits: entry names from keys, and the entries' checksums (corruption, not attacks).
std::uint64_t fnv1a(std::string_view bytes, std::uint64_t h = 0xcbf29ce484222325ull);

}  // namespace attn::detail
