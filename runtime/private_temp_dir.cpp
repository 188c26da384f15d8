#include "private_temp_dir.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>
#include "errors.hpp"

namespace attn::detail {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view default_prefix = "attnforge_";

// The pid in "<prefix><pid>-XXXXXX", or 0 when the name is not of that form.
pid_t writer_pid(std::string_view name, std::string_view prefix) {
  if (!name.starts_with(prefix)) return 0;
  name.remove_prefix(prefix.size());
  const auto dash = name.find('-');
  if (dash == 0 || dash == std::string_view::npos || name.size() - dash - 1 != 6) return 0;
  long long pid = 0;
  for (char c : name.substr(0, dash)) {
    if (c < '0' || c > '9' || pid > 1'000'000'000) return 0;
    pid = pid * 10 + (c - '0');
  }
  return static_cast<pid_t>(pid);
}

}  // namespace

fs::path temp_folder() {
  std::error_code ec;
  if (const char* t = std::getenv("TMPDIR"); t && *t == '/' && fs::is_directory(t, ec)) return t;
  return "/tmp";
}

private_temp_dir::private_temp_dir() : private_temp_dir(temp_folder(), default_prefix) {}

private_temp_dir::private_temp_dir(const fs::path& parent, std::string_view prefix) {
  static std::once_flag swept;
  if (prefix == default_prefix) std::call_once(swept, [&] { remove_dead_temp_dirs(parent, prefix); });
  const std::string pattern = (parent / (std::string(prefix) + std::to_string(::getpid()) + "-XXXXXX")).string();
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  if (::mkdtemp(name.data()) == nullptr)
    throw error("cannot create a private temporary directory from '" + pattern + "': " + std::strerror(errno));
  path_ = name.data();
}

private_temp_dir::~private_temp_dir() {
  std::error_code ignored;  // nothing useful to do if removal fails while unwinding
  fs::remove_all(path_, ignored);
}

void remove_dead_temp_dirs(const fs::path& parent, std::string_view prefix) {
  const auto now = fs::file_time_type::clock::now();
  std::error_code ec;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const pid_t pid = writer_pid(it->path().filename().native(), prefix);
    struct stat st {};
    if (pid <= 0 || ::lstat(it->path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) continue;
    const bool dead = ::kill(pid, 0) != 0 && errno == ESRCH;
    std::error_code t;
    const bool old = now - fs::last_write_time(it->path(), t) > std::chrono::hours(24);
    if (pid != ::getpid() && (dead || (!t && old))) {
      std::error_code ignored;
      fs::remove_all(it->path(), ignored);
    }
  }
}

}  // namespace attn::detail
