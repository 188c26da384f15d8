// The JIT's disk kernel cache (runtime/disk_cache.*, runtime/disk_kernel.*): hits, misses, bad
// entries (corrupt, truncated, foreign version), two processes writing one entry, a folder that
// cannot be written. Every kernel loaded from disk must give the in-process JIT's result bit for
// bit. Each test uses a private folder (ATTN_CACHE_DIR), never the user's cache; the in-memory
// cache is turned off so that every jit() goes to the disk.
#define BOOST_TEST_MODULE disk_cache
#include <boost/test/unit_test.hpp>

#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "disk_cache_kernel.hpp"
#include "runtime/disk_cache.hpp"
#include "runtime/limits.hpp"
#include "runtime/private_temp_dir.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using disk_cache_test::run;

// What the kernel computes without the disk cache: the reference for every test.
const std::vector<float>& jit_result() {
  static const std::vector<float> r = [] {
    setenv("ATTN_CACHE_DIR", "off", 1);
    return run();
  }();
  return r;
}

std::mutex reports_mutex;
std::vector<std::string> reports;

// A private cache folder for one test, with the reports collected and in-memory caching off.
struct fresh_cache {
  attn::detail::private_temp_dir temp;
  fs::path dir = temp.path() / "cache";
  fresh_cache() {
    jit_result();
    setenv("ATTN_CACHE_DIR", dir.c_str(), 1);
    attn::set_kernel_cache_limit(0);
    std::lock_guard lock(reports_mutex);
    reports.clear();
    attn::set_disk_cache_reporter([](const std::string& m) {
      std::lock_guard l(reports_mutex);
      reports.push_back(m);
    });
  }
  ~fresh_cache() { setenv("ATTN_CACHE_DIR", "off", 1); }

  std::vector<fs::path> entries() const {
    std::vector<fs::path> e;
    if (fs::exists(dir))
      for (const auto& f : fs::directory_iterator(dir)) e.push_back(f.path());
    return e;
  }
  fs::path only_entry() const {
    const auto e = entries();
    BOOST_TEST_REQUIRE(e.size() == 1u);
    return e.front();
  }
};

std::vector<std::string> taken_reports() {
  std::lock_guard lock(reports_mutex);
  return std::exchange(reports, {});
}

bool reported(const std::string& phrase) {
  for (const std::string& r : taken_reports())
    if (r.find(phrase) != std::string::npos) return true;
  return false;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_bytes(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes; }

// Puts a damaged entry in place as another process (or a disk) would leave it for the next run.
// Through a rename: this process has the old file mapped, and changing a mapped file in place
// would fault this process, which the cache itself never does (it only ever renames).
void replace_entry(const fs::path& entry, const std::string& bytes) {
  const fs::path temp = entry.parent_path() / "damaged.tmp";
  write_bytes(temp, bytes);
  fs::rename(temp, entry);
}

ino_t inode(const fs::path& p) {
  struct stat st {};
  BOOST_TEST_REQUIRE(stat(p.c_str(), &st) == 0);
  return st.st_ino;
}

// The entry must be intact after a recompile: the next process would load it.
void check_entry_valid(const fs::path& p) {
  std::string why;
  const std::string bytes = read_bytes(p);
  BOOST_TEST(attn::detail::parse_entry(bytes, why).has_value(), why);
}

}  // namespace

BOOST_AUTO_TEST_CASE(miss_stores_then_hit_loads_without_compiling) {
  fresh_cache c;
  BOOST_TEST(c.entries().empty());
  BOOST_TEST(run() == jit_result());  // miss: compiled, stored
  const fs::path entry = c.only_entry();
  check_entry_valid(entry);
  const ino_t stored = inode(entry);
  BOOST_TEST(run() == jit_result());  // hit: loaded; a recompile would have renamed a new file in
  BOOST_TEST(inode(entry) == stored);
  BOOST_TEST(taken_reports().empty());
}

BOOST_AUTO_TEST_CASE(options_are_part_of_the_key) {
  fresh_cache c;
  run();
  run({.with_weights = true});
  run({.path = attn::lowering::generic});
  BOOST_TEST(c.entries().size() == 3u);
  BOOST_TEST(run({.path = attn::lowering::generic}) == run({.path = attn::lowering::generic}));
}

BOOST_AUTO_TEST_CASE(corrupt_entry_is_reported_and_recompiled) {
  fresh_cache c;
  run();
  const fs::path entry = c.only_entry();
  std::string bytes = read_bytes(entry);
  bytes[bytes.size() / 2] ^= 0x5a;  // in the machine code: only the checksum can tell
  replace_entry(entry, bytes);
  BOOST_TEST(run() == jit_result());
  BOOST_TEST(reported("corrupt"));
  check_entry_valid(entry);
}

BOOST_AUTO_TEST_CASE(truncated_entry_is_reported_and_recompiled) {
  fresh_cache c;
  run();
  const fs::path entry = c.only_entry();
  replace_entry(entry, read_bytes(entry).substr(0, fs::file_size(entry) / 3));
  BOOST_TEST(run() == jit_result());
  BOOST_TEST(reported("truncated"));
  check_entry_valid(entry);
  replace_entry(entry, "");  // empty, as a crash before any write would leave a file
  BOOST_TEST(run() == jit_result());
  check_entry_valid(entry);
}

BOOST_AUTO_TEST_CASE(foreign_version_is_reported_and_recompiled) {
  fresh_cache c;
  run();
  const fs::path entry = c.only_entry();
  // The same kernel and key, as another Halide or attnforge build would have written it.
  const std::string bytes = read_bytes(entry);
  std::string why;
  const auto parts = attn::detail::parse_entry(bytes, why);
  BOOST_TEST_REQUIRE(parts.has_value());
  const fs::path payload = c.temp.path() / "payload.so";
  write_bytes(payload, std::string(parts->payload));
  BOOST_TEST_REQUIRE(attn::detail::disk_cache(c.dir, "halide-20.0.0 attnforge-0000").store(std::string(parts->key), payload));
  BOOST_TEST_REQUIRE(attn::detail::disk_cache(c.dir, "x").entry_path(std::string(parts->key)) == entry);

  BOOST_TEST(run() == jit_result());
  BOOST_TEST(reported("was written by halide-20.0.0 attnforge-0000"));
  const std::string fixed = read_bytes(entry);
  BOOST_TEST(attn::detail::parse_entry(fixed, why)->version != "halide-20.0.0 attnforge-0000");
}

BOOST_AUTO_TEST_CASE(garbage_that_is_not_an_entry_never_crashes) {
  fresh_cache c;
  run();
  const fs::path entry = c.only_entry();
  replace_entry(entry, std::string(4096, 'x'));
  BOOST_TEST(run() == jit_result());
  BOOST_TEST(reported("not an attnforge entry"));
}

BOOST_AUTO_TEST_CASE(two_processes_writing_one_entry) {
  fresh_cache c;
  // Both start on an empty folder, so both compile and both rename their entry into place.
  const fs::path writer = fs::path(ATTN_TEST_BINARY_DIR) / "disk_cache_writer";
  std::vector<pid_t> pids;
  for (int i = 0; i < 2; ++i) {
    std::string out = (c.temp.path() / ("out" + std::to_string(i))).string();
    std::string exe = writer.string();
    char* argv[] = {exe.data(), out.data(), nullptr};
    pid_t pid = 0;
    BOOST_TEST_REQUIRE(posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv, environ) == 0);
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    BOOST_TEST_REQUIRE(waitpid(pid, &status, 0) == pid);
    BOOST_TEST(WIFEXITED(status));
    BOOST_TEST(WEXITSTATUS(status) == 0);
  }
  const std::string expected(reinterpret_cast<const char*>(jit_result().data()), jit_result().size() * sizeof(float));
  for (int i = 0; i < 2; ++i) BOOST_TEST(read_bytes(c.temp.path() / ("out" + std::to_string(i))) == expected);
  const fs::path entry = c.only_entry();  // one entry, no temporary files left behind
  check_entry_valid(entry);
  const ino_t stored = inode(entry);
  BOOST_TEST(run() == jit_result());  // and this process loads it
  BOOST_TEST(inode(entry) == stored);
  BOOST_TEST(taken_reports().empty());
}

BOOST_AUTO_TEST_CASE(folder_that_cannot_be_written_works_without_caching) {
  fresh_cache c;
  // Permissions do not stop root (CI may run as root); procfs refuses new files to everyone.
  const bool root = geteuid() == 0;
  const fs::path dir = root ? fs::path("/proc/self") : c.dir;
  if (!root) {
    fs::create_directories(dir);
    fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec);
  }
  setenv("ATTN_CACHE_DIR", dir.c_str(), 1);
  BOOST_TEST(run() == jit_result());
  BOOST_TEST(run({.path = attn::lowering::generic}) == run({.path = attn::lowering::generic}));
  const std::vector<std::string> r = taken_reports();
  BOOST_TEST(r.size() == 1u);  // one warning for the folder, not one per kernel
  BOOST_TEST(r.front().find("cannot write") != std::string::npos, r.front());
  if (!root) {
    BOOST_TEST(c.entries().empty());
    fs::permissions(dir, fs::perms::owner_all);
  }
}

BOOST_AUTO_TEST_CASE(off_means_no_files) {
  fresh_cache c;
  for (const char* off : {"off", ""}) {
    setenv("ATTN_CACHE_DIR", off, 1);
    BOOST_TEST(run() == jit_result());
  }
  BOOST_TEST(c.entries().empty());
}
