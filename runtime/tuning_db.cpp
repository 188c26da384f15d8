#include "tuning_db.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <Halide.h>
#include <nlohmann/json.hpp>

namespace attn {

namespace {

using nlohmann::json;
constexpr const char* format_name = "attnforge-tuning";

json to_json(const tuning_record& r) {
  return json{{"signature", r.signature}, {"bucket", r.bucket}, {"target", r.target}, {"schedule", r.schedule},
              {"expression", r.expression}, {"sizes", r.sizes}, {"median_ms", r.median_ms}, {"default_ms", r.default_ms},
              {"date", r.date}, {"attnforge_version", r.attnforge_version}, {"halide_version", r.halide_version}};
}

tuning_record from_json(const json& j) {
  tuning_record r;
  r.signature = j.at("signature").get<std::string>();
  r.bucket = j.at("bucket").get<std::string>();
  r.target = j.at("target").get<std::string>();
  r.schedule = j.at("schedule").get<std::string>();
  r.expression = j.value("expression", "");
  r.sizes = j.value("sizes", "");
  r.median_ms = j.value("median_ms", 0.0);
  r.default_ms = j.value("default_ms", 0.0);
  r.date = j.value("date", "");
  r.attnforge_version = j.value("attnforge_version", "");
  r.halide_version = j.value("halide_version", "");
  return r;
}

bool same_key(const tuning_record& a, const tuning_record& b) {
  return a.signature == b.signature && a.bucket == b.bucket && a.target == b.target;
}

void report(const std::filesystem::path& file, const std::string& problem) {
  std::cerr << "attnforge: tuning database " << file.string() << ": " << problem << "; ignored\n";
}

// Holds an exclusive flock on "<file>.lock" for its lifetime.
class file_lock {
 public:
  explicit file_lock(const std::filesystem::path& file) {
    const std::string lock = file.string() + ".lock";
    fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw std::runtime_error("tuning database: cannot open " + lock + ": " + std::strerror(errno));
    while (::flock(fd_, LOCK_EX) != 0)
      if (errno != EINTR) throw std::runtime_error("tuning database: cannot lock " + lock + ": " + std::strerror(errno));
  }
  ~file_lock() { ::close(fd_); }  // closing releases the lock
  file_lock(const file_lock&) = delete;
  file_lock& operator=(const file_lock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace

std::optional<std::filesystem::path> tuning_db_path() {
  if (const char* p = std::getenv("ATTN_TUNING_DB"); p && *p) {
    if (std::string(p) == "off") return std::nullopt;
    return std::filesystem::path(p);
  }
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::filesystem::path(x) / "attnforge" / "tuning.json";
  if (const char* h = std::getenv("HOME"); h && *h) return std::filesystem::path(h) / ".cache" / "attnforge" / "tuning.json";
  return std::nullopt;
}

std::string attnforge_version() { return ATTN_VERSION; }

std::string halide_version() {
  return std::to_string(HALIDE_VERSION_MAJOR) + "." + std::to_string(HALIDE_VERSION_MINOR) + "." +
         std::to_string(HALIDE_VERSION_PATCH);
}

tuning_db_contents read_tuning_db(const std::filesystem::path& file) {
  tuning_db_contents c;
  std::ifstream in(file);
  if (!in) {
    std::error_code ec;
    if (std::filesystem::exists(file, ec)) c.problem = "cannot be read";
    return c;
  }
  std::stringstream text;
  text << in.rdbuf();
  const json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    c.problem = "not valid JSON (corrupt or truncated)";
  } else if (!j.is_object() || j.value("format", "") != format_name) {
    c.problem = std::string("not an attnforge tuning database (no \"format\": \"") + format_name + "\")";
  } else if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int>() != tuning_db_version) {
    c.problem = "format version " + (j.contains("version") ? j["version"].dump() : std::string("missing")) +
                ", this attnforge reads version " + std::to_string(tuning_db_version);
  } else {
    try {
      for (const json& r : j.at("records")) c.records.push_back(from_json(r));
    } catch (const json::exception& e) {
      c.records.clear();
      c.problem = std::string("malformed record: ") + e.what();
    }
  }
  return c;
}

void write_tuning_records(const std::filesystem::path& file, const std::vector<tuning_record>& add) {
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path());
  const file_lock lock(file);
  tuning_db_contents db = read_tuning_db(file);
  if (!db.problem.empty()) {
    report(file, db.problem);
    std::error_code ec;
    std::filesystem::rename(file, file.string() + ".bad", ec);  // kept for a human, never parsed again
  }
  for (const tuning_record& r : add) {
    std::erase_if(db.records, [&](const tuning_record& old) { return same_key(old, r); });
    db.records.push_back(r);
  }
  json records = json::array();
  for (const tuning_record& r : db.records) records.push_back(to_json(r));
  const json j{{"format", format_name}, {"version", tuning_db_version}, {"records", records}};

  std::string temp = file.string() + ".XXXXXX";
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) throw std::runtime_error("tuning database: cannot create a file beside " + file.string() + ": " + std::strerror(errno));
  const std::string text = j.dump(2) + "\n";
  bool ok = true;
  for (std::size_t done = 0; ok && done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += std::size_t(n);
  }
  ok = ok && ::fchmod(fd, 0644) == 0 && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || std::rename(temp.c_str(), file.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(temp.c_str());
    throw std::runtime_error("tuning database: cannot write " + file.string() + ": " + why);
  }
}

std::optional<tuning_record> find_tuning_record(const std::filesystem::path& file, const std::string& signature,
                                                const std::string& bucket, const std::string& target) {
  struct cached {
    std::filesystem::file_time_type time;
    std::uintmax_t size = 0;
    std::vector<tuning_record> records;
  };
  static std::mutex m;
  static std::map<std::filesystem::path, cached> files;
  std::error_code ec;
  const auto time = std::filesystem::last_write_time(file, ec);
  if (ec) return std::nullopt;  // no database yet
  const auto size = std::filesystem::file_size(file, ec);
  if (ec) return std::nullopt;
  const std::lock_guard lock(m);
  auto it = files.find(file);
  if (it == files.end() || it->second.time != time || it->second.size != size) {
    tuning_db_contents db = read_tuning_db(file);
    if (!db.problem.empty()) report(file, db.problem);
    it = files.insert_or_assign(file, cached{time, size, std::move(db.records)}).first;
  }
  for (const tuning_record& r : it->second.records)
    if (r.signature == signature && r.bucket == bucket && r.target == target) return r;
  return std::nullopt;
}

}  // namespace attn
