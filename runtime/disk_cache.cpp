#include "disk_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <vector>
#include "environment.hpp"
#include "errors.hpp"
#include "private_folder.hpp"
#include "private_temp_dir.hpp"

namespace attn {

namespace {

std::mutex report_mutex;
std::function<void(const std::string&)> reporter;  // guarded by report_mutex
std::set<std::string> reported;                    // guarded by report_mutex

}  // namespace

void set_disk_cache_reporter(std::function<void(const std::string&)> r) {
  std::lock_guard lock(report_mutex);
  reporter = std::move(r);
}

}  // namespace attn

namespace attn::detail {

void report_once(const std::string& once_key, const std::string& message) {
  std::lock_guard lock(report_mutex);
  if (!reported.insert(once_key).second) return;
  if (reporter) reporter(message);
  else std::fprintf(stderr, "attnforge: kernel cache: %s\n", message.c_str());
}

std::uint64_t fnv1a(std::string_view bytes, std::uint64_t h) {
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

namespace {

// Trailer: key bytes, version bytes, then five little-endian u64: payload size, key size,
// version size, checksum of payload + key + version, magic.
constexpr std::uint64_t magic = 0x31304b4e54544100ull;  // "\0ATTNK01" read as a little-endian u64
constexpr std::size_t fixed_trailer = 5 * sizeof(std::uint64_t);

std::string hex(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint64_t get_u64(const char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// Reads the whole of an opened file known to hold at most largest_entry bytes.
bool read_all(int fd, std::uint64_t size, std::string& out) {
  out.resize(static_cast<std::size_t>(size));
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// Opens a cache file for reading without following a link or blocking on a FIFO.
int open_entry(const std::filesystem::path& path) { return open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC); }

// "<16 hex digits of the key's hash>-<8 of the version's>.so"
constexpr std::size_t entry_name_size = 16 + 1 + 8 + 3;
bool is_entry_name(const std::string& name) {
  if (name.size() != entry_name_size || !name.ends_with(".so") || name[16] != '-') return false;
  for (std::size_t i = 0; i < 25; ++i)
    if (i != 16 && !std::isxdigit(static_cast<unsigned char>(name[i]))) return false;
  return true;
}

// Temporary files of a store in progress: ".tmp-<entry name>.XXXXXX".
constexpr std::string_view temp_prefix = ".tmp-";
// Work folders of a compile in progress (private_temp_dir.hpp).
constexpr std::string_view work_prefix = ".work-";

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace

std::optional<entry_parts> parse_entry(std::string_view bytes, std::string& why) {
  if (bytes.size() < fixed_trailer || get_u64(bytes.data() + bytes.size() - 8) != magic) {
    why = "is truncated or not an attnforge entry";
    return std::nullopt;
  }
  const char* t = bytes.data() + bytes.size() - fixed_trailer;
  const std::uint64_t payload = get_u64(t), key_size = get_u64(t + 8), version_size = get_u64(t + 16), sum = get_u64(t + 24);
  const std::uint64_t body = bytes.size() - fixed_trailer;
  if (payload > body || key_size > body || version_size > body || payload + key_size + version_size != body) {
    why = "is truncated (sizes in its trailer do not add up)";
    return std::nullopt;
  }
  if (fnv1a(bytes.substr(0, body)) != sum) {
    why = "is corrupt (checksum differs)";
    return std::nullopt;
  }
  return entry_parts{bytes.substr(0, payload), bytes.substr(payload, key_size), bytes.substr(payload + key_size, version_size)};
}

std::optional<disk_cache> disk_cache::open(const std::filesystem::path& dir, std::string version) {
  if (auto why = make_private_folder(dir)) {
    report_once("trust:" + dir.string(), "not using " + dir.string() + ": " + *why +
                                             "; kernels are compiled in this process (the folder must be writable by this user alone)");
    return std::nullopt;
  }
  return disk_cache(dir, std::move(version));
}

std::filesystem::path disk_cache::entry_path(const std::string& key) const {
  return dir_ / (hex(fnv1a(key)) + "-" + hex(fnv1a(version_)).substr(8) + ".so");
}

std::optional<std::filesystem::path> disk_cache::find(const std::string& key) const {
  const std::filesystem::path path = entry_path(key);
  const int fd = open_entry(path);
  if (fd < 0 && (errno == ENOENT || errno == ENOTDIR)) return std::nullopt;  // a plain miss
  auto bad = [&](const std::string& why) -> std::optional<std::filesystem::path> {
    if (fd >= 0) close(fd);
    report_once("bad:" + path.string() + ":" + why, "entry " + path.string() + " " + why + ": recompiling");
    return std::nullopt;
  };
  if (fd < 0) return bad(errno == ELOOP ? "is a symbolic link" : std::string("cannot be opened (") + std::strerror(errno) + ")");
  std::string why;
  if (!trusted_file(fd, why)) return bad(why);
  struct stat st {};
  if (fstat(fd, &st) != 0) return bad("cannot be inspected");
  if (static_cast<std::uint64_t>(st.st_size) > largest_entry) return bad("is larger than any kernel (" + std::to_string(st.st_size) + " bytes)");
  std::string bytes;
  if (!read_all(fd, static_cast<std::uint64_t>(st.st_size), bytes)) return bad("cannot be read");
  const auto parts = parse_entry(bytes, why);
  if (!parts) return bad(why);
  if (parts->version != version_) return bad("was written by " + std::string(parts->version) + ", this is " + version_);
  if (parts->key != key) return bad("holds another kernel (name collision)");
  futimens(fd, nullptr);  // used now: the last to be trimmed (fails harmlessly in a folder of root's)
  close(fd);
  return path;
}

namespace {

// One report per folder for every way of failing to write in it.
bool cannot_write(const std::filesystem::path& dir, const std::string& what) {
  report_once("write:" + dir.string(), "cannot " + what + " (" + std::strerror(errno) + "): kernels are compiled in this process and not kept");
  return false;
}

}  // namespace

std::unique_ptr<private_temp_dir> disk_cache::work_folder() const {
  try {
    return std::make_unique<private_temp_dir>(dir_, work_prefix);
  } catch (const error&) {
    cannot_write(dir_, "write in " + dir_.string());
    return nullptr;
  }
}

bool disk_cache::store(const std::string& key, const std::filesystem::path& payload) const {
  auto fail = [&](const std::string& what) { return cannot_write(dir_, what); };
  std::string bytes;
  {
    std::ifstream in(payload, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    bytes = s.str();
  }
  const std::size_t payload_size = bytes.size();
  bytes += key;
  bytes += version_;
  const std::uint64_t sum = fnv1a(bytes);
  put_u64(bytes, payload_size);
  put_u64(bytes, key.size());
  put_u64(bytes, version_.size());
  put_u64(bytes, sum);
  put_u64(bytes, magic);

  const std::filesystem::path final_path = entry_path(key);
  std::string temp = (dir_ / (std::string(temp_prefix) + final_path.filename().string() + ".XXXXXX")).string();
  const int fd = mkostemp(temp.data(), O_CLOEXEC);  // mode 0600
  if (fd < 0) return fail("write in " + dir_.string());
  const bool written = write_all(fd, bytes) && fsync(fd) == 0;
  const int saved = errno;
  close(fd);
  if (!written || std::rename(temp.c_str(), final_path.c_str()) != 0) {
    const int why = written ? errno : saved;
    unlink(temp.c_str());
    errno = why;
    return fail("write " + final_path.string());
  }
  // The rename itself survives a crash once the folder is synced.
  if (const int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  trim(size_limit(), final_path);
  return true;
}

std::vector<cache_entry> disk_cache::entries() const {
  std::vector<cache_entry> found;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    if (!is_entry_name(it->path().filename().string())) continue;
    const int fd = open_entry(it->path());
    if (fd < 0) continue;
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      close(fd);
      continue;
    }
    std::error_code t;
    cache_entry e{it->path(), static_cast<std::uint64_t>(st.st_size), std::filesystem::last_write_time(it->path(), t), {}, {}};
    // The key and version sit just before the fixed trailer; the payload need not be read.
    char trailer[fixed_trailer];
    if (e.bytes >= fixed_trailer &&
        pread(fd, trailer, fixed_trailer, static_cast<off_t>(e.bytes - fixed_trailer)) == static_cast<ssize_t>(fixed_trailer) &&
        get_u64(trailer + 32) == magic) {
      const std::uint64_t key_size = get_u64(trailer + 8), version_size = get_u64(trailer + 16);
      constexpr std::uint64_t longest = std::uint64_t(1) << 20;  // each; a key is a few KB
      if (key_size < longest && version_size < longest && key_size + version_size <= e.bytes - fixed_trailer) {
        std::string text(static_cast<std::size_t>(key_size + version_size), '\0');
        if (pread(fd, text.data(), text.size(), static_cast<off_t>(e.bytes - fixed_trailer - text.size())) == static_cast<ssize_t>(text.size())) {
          e.key = text.substr(0, key_size);
          e.version = text.substr(key_size);
        }
      }
    }
    close(fd);
    found.push_back(std::move(e));
  }
  std::sort(found.begin(), found.end(), [](const cache_entry& a, const cache_entry& b) { return a.last_used < b.last_used; });
  return found;
}

void disk_cache::remove_leftovers() const {
  remove_dead_temp_dirs(dir_, work_prefix);
  // A store's temporary file lives for the seconds of one write: an hour-old one was abandoned.
  const auto now = std::filesystem::file_time_type::clock::now();
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code t;
    if (it->path().filename().string().starts_with(temp_prefix) && it->is_regular_file(t) &&
        now - std::filesystem::last_write_time(it->path(), t) > std::chrono::hours(1) && !t)
      unlink(it->path().c_str());
  }
}

std::size_t disk_cache::clear(bool only_stale) const {
  std::size_t removed = 0;
  for (const cache_entry& e : entries())
    if ((!only_stale || e.version != version_) && unlink(e.path.c_str()) == 0) ++removed;
  remove_leftovers();
  return removed;
}

void disk_cache::trim(std::uint64_t limit, const std::filesystem::path& keep) const {
  const std::vector<cache_entry> all = entries();
  std::uint64_t total = 0;
  for (const cache_entry& e : all) total += e.bytes;
  for (const cache_entry& e : all) {  // least recently used first
    if (total <= limit) break;
    if (e.path == keep) continue;
    if (unlink(e.path.c_str()) == 0 || errno == ENOENT) total -= e.bytes;  // another process may trim too
  }
  remove_leftovers();
}

std::uint64_t disk_cache::size_limit() {
  return number_from_environment("ATTN_CACHE_SIZE_LIMIT", quantity::bytes).value_or(std::uint64_t(2) << 30);
}

}  // namespace attn::detail
