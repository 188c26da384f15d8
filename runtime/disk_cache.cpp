#include "disk_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <vector>

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

bool read_all(int fd, std::string& out) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return false;
  out.resize(static_cast<std::size_t>(st.st_size));
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

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

disk_cache::disk_cache(std::filesystem::path dir, std::string version) : dir_(std::move(dir)), version_(std::move(version)) {}

std::filesystem::path disk_cache::entry_path(const std::string& key) const { return dir_ / (hex(fnv1a(key)) + ".so"); }

std::optional<std::filesystem::path> disk_cache::find(const std::string& key) const {
  const std::filesystem::path path = entry_path(key);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;  // a plain miss
  std::string bytes;
  const bool read = read_all(fd, bytes);
  close(fd);
  auto bad = [&](const std::string& why) -> std::optional<std::filesystem::path> {
    report_once("bad:" + path.string(), "entry " + path.string() + " " + why + ": recompiling");
    return std::nullopt;
  };
  if (!read) return bad("cannot be read");
  std::string why;
  const auto parts = parse_entry(bytes, why);
  if (!parts) return bad(why);
  const std::string_view stored_key = parts->key, stored_version = parts->version;
  if (stored_version != version_) return bad("was written by " + std::string(stored_version) + ", this is " + version_);
  if (stored_key != key) return bad("holds another kernel (name collision)");
  return path;
}

bool disk_cache::store(const std::string& key, const std::filesystem::path& payload) const {
  auto fail = [&](const std::string& what) {
    report_once("write:" + dir_.string(), "cannot " + what + " (" + std::strerror(errno) +
                                              "): kernels are compiled in this process and not kept");
    return false;
  };
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) {
    errno = ec.value();
    return fail("create " + dir_.string());
  }
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
  std::string temp = (dir_ / ("." + final_path.filename().string() + ".XXXXXX")).string();
  const int fd = mkostemp(temp.data(), O_CLOEXEC);
  if (fd < 0) return fail("write in " + dir_.string());
  const bool written = fchmod(fd, 0644) == 0 && write_all(fd, bytes) && fsync(fd) == 0;
  const int saved = errno;
  close(fd);
  if (!written || std::rename(temp.c_str(), final_path.c_str()) != 0) {
    const int why = written ? errno : saved;
    unlink(temp.c_str());
    errno = why;
    return fail("write " + final_path.string());
  }
  // The rename itself survives a crash once the folder is synced.
  if (const int dfd = open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  return true;
}

}  // namespace attn::detail
