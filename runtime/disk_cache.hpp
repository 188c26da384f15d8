#pragma once
// Compiled kernels kept on disk across processes, one file per key and writer version: the
// kernel's shared object followed by a trailer (key, writer's version, checksum, magic). ELF
// loaders ignore bytes after the sections, so one file is both the loadable kernel and its own
// validation record, and one rename publishes both at once.
//
// What the cache trusts: the folder, never the files' contents. Entries are loaded (and their
// code runs) only from a folder writable by this user alone (private_folder.hpp); one that is
// not is reported once and not used. The checksum detects corruption (a torn write, a bad disk),
// not forgery: anyone who can write the folder can run code in every process that uses it.
// An entry must be a regular file (never a link), owned by this user or root, not writable by
// others, and at most `largest_entry` bytes; it is checked before it is read.
//
// Writes go to a fresh temporary file (mode 0600) in the same folder, are fsync'ed and renamed
// over the entry: readers see the old entry or the new one, never half of one, and two processes
// writing the same key both succeed (the last rename wins; both wrote valid entries). Entry
// names carry the writer's version, so builds of attnforge sharing a folder keep their own.
// A corrupt, truncated or colliding entry is reported once and treated as a miss; a folder that
// cannot be written is reported once and the cache only reads.
//
// Size: after each store the least recently used entries (by modification time, renewed on
// every hit) are removed until the folder holds at most size_limit() bytes of entries; leftovers
// of writers that died (temporary files, work folders) are removed with them.
#include <sys/types.h>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attn {

// Receives the disk cache's one-line reports (a bad entry, a folder it cannot write or trust).
// Default (or an empty function): a line on stderr. Thread-safe.
void set_disk_cache_reporter(std::function<void(const std::string&)> reporter);

}  // namespace attn

namespace attn::detail {

class private_temp_dir;

// Reports `message` through the reporter, once per process for each distinct `once_key`.
void report_once(const std::string& once_key, const std::string& message);

// What this build writes entries under: Halide's version and a digest of attnforge's lowering
// sources (disk_kernel.cpp). An entry written under another is not used.
std::string disk_cache_version();

inline constexpr std::uint64_t largest_entry = std::uint64_t(256) << 20;

// An attnforge file in a cache folder, as attn-cache lists it.
struct cache_entry {
  std::filesystem::path path;
  std::uint64_t bytes = 0;
  std::filesystem::file_time_type last_used;
  std::string key, version;  // empty when the trailer cannot be read
};

class disk_cache {
 public:
  // The cache in `dir` (created with mode 0700 if missing), written and read under `version`
  // (Halide's and attnforge's: an entry written under another is not used). nullopt, reported
  // once, when the folder cannot be created or is not trusted (private_folder.hpp).
  static std::optional<disk_cache> open(const std::filesystem::path& dir, std::string version);

  // The entry's path if it exists and is intact, written under this version, for this key; a
  // hit marks the entry as used now.
  std::optional<std::filesystem::path> find(const std::string& key) const;

  // Publishes the file at `payload` as the entry for `key`, then trims the folder to the size
  // limit (never removing this entry). False (and reported once) if the folder cannot be
  // written; the caller then simply runs without caching.
  bool store(const std::string& key, const std::filesystem::path& payload) const;

  // A private folder for compile work inside the cache folder (on the entries' file system,
  // whatever $TMPDIR says; a killed compile's is removed by a later trim). nullptr, reported
  // once, when the folder cannot be written.
  std::unique_ptr<private_temp_dir> work_folder() const;

  std::filesystem::path entry_path(const std::string& key) const;
  const std::filesystem::path& dir() const { return dir_; }
  const std::string& version() const { return version_; }

  // Every attnforge entry in the folder, least recently used first. Other files are not listed.
  std::vector<cache_entry> entries() const;
  // Removes the entries (only those of other versions when `only_stale`) and the leftovers of
  // dead writers; nothing else. Returns how many entries it removed.
  std::size_t clear(bool only_stale) const;
  // Removes least recently used entries until they total at most `limit` bytes, sparing `keep`.
  void trim(std::uint64_t limit, const std::filesystem::path& keep = {}) const;

  // Bytes of entries a folder keeps: ATTN_CACHE_SIZE_LIMIT (bytes, K/M/G), default 2 GiB.
  static std::uint64_t size_limit();

 private:
  disk_cache(std::filesystem::path dir, std::string version) : dir_(std::move(dir)), version_(std::move(version)) {}
  void remove_leftovers() const;

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
