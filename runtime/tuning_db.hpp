#pragma once
// The tuning database: a human-readable JSON file of the schedules attn-tune found, one record
// per (signature, shape bucket, target) (tuning_key.hpp; the text: tuning_db_format.hpp):
//   {"format": "attnforge-tuning", "version": 1, "records": [{"signature": ..., "bucket": "T=1024",
//     "target": ..., "schedule": "q_tile=24 kv_tile=128 ...", "median_ms": ..., "default_ms": ..., ...}]}
// Location: $ATTN_TUNING_DB ("off": no database), else $XDG_CACHE_HOME/attnforge/tuning.json when
// XDG_CACHE_HOME is an absolute path (the XDG spec: relative values are ignored), else
// ~/.cache/attnforge/tuning.json.
//
// Reading: a file that is not a regular file (a directory, FIFO, device, socket), is larger than
// 16 MiB (tuning_db_max_bytes), cannot be read, or whose text is not a database this attnforge
// reads (corrupt, truncated, foreign, another version, any field of the wrong type) is reported
// (one line on stderr per state of the file) and ignored, as if there were no database. The type
// and size are checked before reading, on the opened file (opened non-blocking: a FIFO never
// hangs). Reading follows a symbolic link.
//
// Writing: read-merge-write under an advisory lock (flock on "<file>.lock", created 0600 and never
// through a symbolic link), then a temporary file in the same folder (0644) renamed over the file,
// so concurrent writers lose nothing and readers never see half a file. Folders that do not exist
// are created 0700, whatever the umask (usually ~/.cache/attnforge, shared with the kernel cache).
// attnforge replaces, or moves aside, only a file it wrote: the path must be absent, or a regular
// file (not a symbolic link) that is a database this attnforge reads, or a bad one that is still
// recognisably a tuning database (its text contains "attnforge-tuning": e.g. truncated, another
// version, a malformed record). Such a bad file is reported and renamed to "<file>.bad" (or
// "<file>.bad.1" ... ".bad.9", never over an existing file) and a new database written. Anything
// else (a directory, FIFO, device, symbolic link, a file over the size limit, unreadable, or one
// that is not recognisably a tuning database) is refused with attn::error and left untouched.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace attn {

struct tuning_record {
  std::string signature, bucket, target;  // the key
  std::string schedule;     // flash_schedule text, or "auto=<Halide autoscheduler>"
  std::string expression;   // for humans: the expression and the sizes it was tuned at
  std::string sizes;
  double median_ms = 0;     // the chosen schedule's median time, in the tuner's measurements
  double default_ms = 0;    // the default schedule's, same run
  std::string date;         // UTC, ISO 8601
  std::string attnforge_version, halide_version;
  bool operator==(const tuning_record&) const = default;
};

inline constexpr int tuning_db_version = 1;

// The database file to use; nullopt when ATTN_TUNING_DB=off (or no home folder is known).
std::optional<std::filesystem::path> tuning_db_path();

// The versions a new record carries.
std::string attnforge_version();
std::string halide_version();

struct tuning_db_contents {
  std::vector<tuning_record> records;
  std::string problem;  // non-empty: the file was unreadable, corrupt, foreign or another version (records empty)
};

// A missing file is an empty database, not a problem. Never throws; reports nothing.
tuning_db_contents read_tuning_db(const std::filesystem::path& file);

// Adds (or replaces, same key) the records: lock, read, merge, write a temporary file, rename.
// A bad file of attnforge's is reported, kept as "<file>.bad" and replaced (above). Throws
// attn::error when the file may not be replaced or the folder or file cannot be written,
// attn::argument_error for a record with a time that is not finite.
void write_tuning_records(const std::filesystem::path& file, const std::vector<tuning_record>& add);

// Throws the attn::error write_tuning_records would throw for what is at `file` now (a directory,
// a foreign file, a folder that is a file, ...), so a tool can refuse before working for minutes.
// Creates, moves and reports nothing.
void check_tuning_db_writable(const std::filesystem::path& file);

// The record for this key, if any. Never throws. Cheap when repeated: the file is parsed again only
// when its inode, size or modification time changed; a problem is reported once per file state.
std::optional<tuning_record> find_tuning_record(const std::filesystem::path& file, const std::string& signature,
                                                const std::string& bucket, const std::string& target);

}  // namespace attn
