#pragma once
// The tuning database: a human-readable JSON file of the schedules attn-tune found, one record
// per (signature, shape bucket, target) (tuning_key.hpp):
//   {"format": "attnforge-tuning", "version": 1, "records": [{"signature": ..., "bucket": "T=1024",
//     "target": ..., "schedule": "q_tile=24 kv_tile=128 ...", "median_ms": ..., "default_ms": ..., ...}]}
// Location: $ATTN_TUNING_DB ("off": no database), else $XDG_CACHE_HOME/attnforge/tuning.json, else
// ~/.cache/attnforge/tuning.json. Writes are atomic (a temporary file in the same folder, renamed)
// and read-merge-write under an advisory lock (flock on "<file>.lock"), so concurrent writers lose
// nothing. A corrupt, foreign or other-version file is reported (one line on stderr) and ignored;
// the next write moves it aside to "<file>.bad".
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

// A missing file is an empty database, not a problem.
tuning_db_contents read_tuning_db(const std::filesystem::path& file);

// Adds (or replaces, same key) the records: lock, read, merge, write a temporary file, rename.
// A bad existing file is reported, kept as "<file>.bad" and replaced. Throws std::runtime_error
// when the folder or file cannot be written.
void write_tuning_records(const std::filesystem::path& file, const std::vector<tuning_record>& add);

// The record for this key, if any. Cheap when repeated: the file is parsed again only when its
// size or modification time changed; a problem is reported once per file state.
std::optional<tuning_record> find_tuning_record(const std::filesystem::path& file, const std::string& signature,
                                                const std::string& bucket, const std::string& target);

}  // namespace attn
