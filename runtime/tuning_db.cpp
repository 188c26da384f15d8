#include "tuning_db.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <mutex>
#include <Halide.h>
#include "errors.hpp"
#include "tuning_db_format.hpp"

namespace attn {

namespace {

namespace fs = std::filesystem;

std::string system_error() { return std::strerror(errno); }

void report(const fs::path& file, const std::string& problem, const std::string& consequence) {
  std::cerr << "attnforge: tuning database " << file.string() << ": " << problem << "; " << consequence << "\n";
}

[[noreturn]] void refuse(const fs::path& file, const std::string& why) {
  throw error("tuning database " + file.string() + ": " + why + "; nothing written (give another file)");
}

// Why a file of this type is not a database, or empty for a regular file.
std::string not_regular(mode_t mode) {
  if (S_ISREG(mode)) return {};
  const char* what = S_ISDIR(mode) ? "a directory" : S_ISFIFO(mode) ? "a FIFO" : S_ISCHR(mode) ? "a character device"
                     : S_ISBLK(mode) ? "a block device" : S_ISSOCK(mode) ? "a socket" : S_ISLNK(mode) ? "a symbolic link"
                                                                                       : "not a regular file";
  return std::string("is ") + what + ", not a regular file";
}

std::string too_large(std::uintmax_t size) {
  if (size <= detail::tuning_db_max_bytes) return {};
  return "is " + std::to_string(size) + " bytes; a tuning database is at most " +
         std::to_string(detail::tuning_db_max_bytes >> 20) + " MiB";
}

// A database file's text, or why it cannot be read (absent: there is no file).
struct file_text {
  bool absent = false;
  std::string problem;
  std::string text;
};

// Type and size are checked on the path first (no open of a device or FIFO at all), then on the
// opened descriptor (the path may have changed in between; O_NONBLOCK: opening a FIFO swapped in
// does not wait for a writer). At most tuning_db_max_bytes are read whatever the file claims.
file_text read_text(const fs::path& file, bool follow_link) {
  file_text t;
  struct stat st {};
  if ((follow_link ? ::stat(file.c_str(), &st) : ::lstat(file.c_str(), &st)) != 0) {
    t.absent = errno == ENOENT;
    if (!t.absent) t.problem = "cannot be read (" + system_error() + ")";
    return t;
  }
  if (t.problem = not_regular(st.st_mode); !t.problem.empty()) return t;
  if (t.problem = too_large(std::uintmax_t(st.st_size)); !t.problem.empty()) return t;
  const int fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | (follow_link ? 0 : O_NOFOLLOW));
  if (fd < 0) {
    t.absent = errno == ENOENT;
    if (!t.absent) t.problem = errno == ELOOP ? not_regular(S_IFLNK) : "cannot be read (" + system_error() + ")";
    return t;
  }
  if (::fstat(fd, &st) != 0) t.problem = "cannot be read (" + system_error() + ")";
  else if (t.problem = not_regular(st.st_mode); t.problem.empty()) t.problem = too_large(std::uintmax_t(st.st_size));
  if (t.problem.empty()) {
    t.text.resize(std::size_t(st.st_size) + 1);  // one more: a file that grew is seen to
    std::size_t done = 0;
    while (done < t.text.size()) {
      const ssize_t n = ::read(fd, t.text.data() + done, t.text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) t.problem = "cannot be read (" + system_error() + ")";
      if (n <= 0) break;
      done += std::size_t(n);
    }
    t.text.resize(done);
    if (t.problem.empty()) t.problem = too_large(done);
  }
  ::close(fd);
  if (!t.problem.empty()) t.text.clear();
  return t;
}

// What a write does with the file at the path: the records to keep, and, for a bad database of
// attnforge's, why it is set aside. Throws attn::error for anything attnforge may not replace.
struct existing_database {
  std::vector<tuning_record> records;
  std::string bad;
};

existing_database inspect_for_write(const fs::path& file) {
  const file_text t = read_text(file, /*follow_link=*/false);
  if (t.absent) return {};
  if (!t.problem.empty()) refuse(file, t.problem);
  tuning_db_contents db = detail::parse_tuning_db(t.text);
  if (db.problem.empty()) return {std::move(db.records), {}};
  if (t.text.find("\"attnforge-tuning\"") == std::string::npos)
    refuse(file, db.problem + "; not recognisably attnforge's, so it is not replaced");
  return {{}, db.problem};
}

// Folders from the nearest existing one down, each 0700 (chmod after mkdir: the umask may have
// taken bits away; it never adds any).
void create_folders(const fs::path& dir) {
  if (dir.empty()) return;
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) throw error("tuning database: " + dir.string() + " is not a folder");
    return;
  }
  if (errno != ENOENT) throw error("tuning database: cannot use the folder " + dir.string() + " (" + system_error() + ")");
  if (dir.has_parent_path() && dir.parent_path() != dir) create_folders(dir.parent_path());
  if (::mkdir(dir.c_str(), 0700) == 0) ::chmod(dir.c_str(), 0700);
  else if (errno != EEXIST) throw error("tuning database: cannot create the folder " + dir.string() + " (" + system_error() + ")");
}

// Why the folder that will hold `file` cannot be used: the nearest existing one must be a folder.
void check_folder(const fs::path& file) {
  for (fs::path dir = file.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) refuse(file, dir.string() + " is not a folder");
      if (::access(dir.c_str(), W_OK | X_OK) != 0) refuse(file, "the folder " + dir.string() + " is not writable (" + system_error() + ")");
      return;
    }
    if (errno != ENOENT) refuse(file, "cannot use the folder " + dir.string() + " (" + system_error() + ")");
    if (dir == dir.parent_path()) return;
  }
}

// Renames a bad database to the first of "<file>.bad", "<file>.bad.1" ... ".bad.9" that does not
// exist (under the database's lock, so no other attnforge takes the name meanwhile).
std::string set_aside(const fs::path& file) {
  for (int n = 0; n < 10; ++n) {
    const std::string bad = file.string() + ".bad" + (n == 0 ? "" : "." + std::to_string(n));
    struct stat st {};
    if (::lstat(bad.c_str(), &st) == 0) continue;
    if (errno != ENOENT) refuse(file, "cannot look at " + bad + " (" + system_error() + ")");
    if (std::rename(file.c_str(), bad.c_str()) != 0) refuse(file, "cannot be moved to " + bad + " (" + system_error() + ")");
    return bad;
  }
  refuse(file, "it is bad, and " + file.string() + ".bad ... .bad.9 are taken; remove some");
}

// Holds an exclusive flock on "<file>.lock" for its lifetime. The lock file is never opened
// through a symbolic link (one planted there would have us create or open another file).
class file_lock {
 public:
  explicit file_lock(const fs::path& file) {
    const std::string lock = file.string() + ".lock";
    fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
    if (fd_ < 0) {
      const std::string why = errno == ELOOP ? "it is a symbolic link" : system_error();
      throw error("tuning database: cannot open the lock file " + lock + " (" + why + ")");
    }
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd_);
      throw error("tuning database: the lock file " + lock + " is not a regular file");
    }
    while (::flock(fd_, LOCK_EX) != 0)
      if (errno != EINTR) {
        const std::string why = system_error();
        ::close(fd_);
        throw error("tuning database: cannot lock " + lock + " (" + why + ")");
      }
  }
  ~file_lock() { ::close(fd_); }  // closing releases the lock
  file_lock(const file_lock&) = delete;
  file_lock& operator=(const file_lock&) = delete;

 private:
  int fd_ = -1;
};

// Writes `text` to a new file beside `file` and renames it over `file`.
void replace_file(const fs::path& file, const std::string& text) {
  std::string temp = file.string() + ".XXXXXX";
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) throw error("tuning database: cannot create a file beside " + file.string() + " (" + system_error() + ")");
  bool ok = true;
  for (std::size_t done = 0; ok && done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += std::size_t(n);
  }
  ok = ok && ::fchmod(fd, 0644) == 0 && ::fsync(fd) == 0;
  const std::string why = system_error();
  ::close(fd);
  if (!ok || std::rename(temp.c_str(), file.c_str()) != 0) {
    const std::string rename_why = ok ? system_error() : why;
    std::remove(temp.c_str());
    throw error("tuning database: cannot write " + file.string() + " (" + rename_why + ")");
  }
}

// What find_tuning_record compares to decide whether the file changed.
struct file_state {
  int stat_error = 0;
  dev_t device = 0;
  ino_t inode = 0;
  off_t size = 0;
  std::int64_t seconds = 0, nanoseconds = 0;
  mode_t mode = 0;
  bool operator==(const file_state&) const = default;
};

}  // namespace

std::optional<std::filesystem::path> tuning_db_path() {
  if (const char* p = std::getenv("ATTN_TUNING_DB"); p && *p) {
    if (std::string(p) == "off") return std::nullopt;
    return std::filesystem::path(p);
  }
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x == '/') return std::filesystem::path(x) / "attnforge" / "tuning.json";
  if (const char* h = std::getenv("HOME"); h && *h) return std::filesystem::path(h) / ".cache" / "attnforge" / "tuning.json";
  return std::nullopt;
}

std::string attnforge_version() { return ATTN_VERSION; }

std::string halide_version() {
  return std::to_string(HALIDE_VERSION_MAJOR) + "." + std::to_string(HALIDE_VERSION_MINOR) + "." +
         std::to_string(HALIDE_VERSION_PATCH);
}

tuning_db_contents read_tuning_db(const std::filesystem::path& file) {
  const file_text t = read_text(file, /*follow_link=*/true);
  if (!t.problem.empty()) return {{}, t.problem};
  return t.absent ? tuning_db_contents{} : detail::parse_tuning_db(t.text);
}

void check_tuning_db_writable(const std::filesystem::path& file) {
  check_folder(file);
  inspect_for_write(file);
}

void write_tuning_records(const std::filesystem::path& file, const std::vector<tuning_record>& add) {
  for (const tuning_record& r : add)
    if (const std::string why = detail::tuning_record_problem(r); !why.empty())
      throw argument_error("tuning record " + r.signature + " " + r.bucket + ": " + why);
  create_folders(file.parent_path());
  const file_lock lock(file);
  existing_database db = inspect_for_write(file);
  if (!db.bad.empty()) report(file, db.bad, "moved to " + set_aside(file));
  for (const tuning_record& r : add) {
    std::erase_if(db.records, [&](const tuning_record& old) {
      return old.signature == r.signature && old.bucket == r.bucket && old.target == r.target;
    });
    db.records.push_back(r);
  }
  replace_file(file, detail::format_tuning_db(db.records));
}

std::optional<tuning_record> find_tuning_record(const std::filesystem::path& file, const std::string& signature,
                                                const std::string& bucket, const std::string& target) {
  struct cached {
    file_state state;
    std::vector<tuning_record> records;
  };
  static std::mutex m;
  static std::map<std::filesystem::path, cached> files;
  struct stat st {};
  file_state state;
  if (::stat(file.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::nullopt;  // no database yet
    state.stat_error = errno;
  } else {
    state = {0, st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec, st.st_mode};
  }
  try {
    const std::lock_guard lock(m);
    auto it = files.find(file);
    if (it == files.end() || it->second.state != state) {
      tuning_db_contents db = read_tuning_db(file);
      if (!db.problem.empty()) report(file, db.problem, "ignored");
      it = files.insert_or_assign(file, cached{state, std::move(db.records)}).first;
    }
    for (const tuning_record& r : it->second.records)
      if (r.signature == signature && r.bucket == bucket && r.target == target) return r;
  } catch (const std::exception& e) {  // out of memory: as good as no database
    report(file, e.what(), "ignored");
  }
  return std::nullopt;
}

}  // namespace attn
