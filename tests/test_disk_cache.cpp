// The JIT's disk kernel cache (runtime/disk_cache.*, runtime/disk_kernel.*): hits, misses, bad
// entries (corrupt, truncated, foreign version, links, FIFOs, huge files), two processes writing
// one entry, a folder that cannot be written, folders that cannot be trusted, the size limit,
// leftovers of killed writers, one thread pool and unloading. Every kernel loaded from disk must
// give the in-process JIT's result bit for bit. Each test uses a private folder (ATTN_CACHE_DIR),
// never the user's cache; the in-memory cache is turned off so that every jit() goes to the disk.
#define BOOST_TEST_MODULE disk_cache
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/disk_cache.hpp"
#include "runtime/limits.hpp"
#include "runtime/private_temp_dir.hpp"
#include "support/disk_cache_kernel.hpp"
#include "support/scoped_env.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using disk_cache_test::run;

// ctest runs this program as two tests that each core can take (tests/CMakeLists.txt): the test
// cases with this label, then the others.
const auto first_half = boost::unit_test::label("first_half");

// Pools of six threads, whatever the machine: a kernel with a pool of its own would show.
constexpr int pool_threads = 6;
struct thread_pools_of_six {
  thread_pools_of_six() { setenv("HL_NUM_THREADS", std::to_string(pool_threads).c_str(), 1); }
};
BOOST_TEST_GLOBAL_FIXTURE(thread_pools_of_six);

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

  // The kernels' entries (not the thread pool's, not other files), least recently used first.
  std::vector<fs::path> entries() const {
    std::vector<fs::path> e;
    if (auto cache = attn::detail::disk_cache::open(dir, attn::detail::disk_cache_version()))
      for (const auto& entry : cache->entries())
        if (!entry.key.starts_with("parallel runtime|")) e.push_back(entry.path);
    return e;
  }
  // Every file and folder in the cache folder.
  std::vector<fs::path> files() const {
    std::vector<fs::path> f;
    if (fs::exists(dir))
      for (const auto& e : fs::directory_iterator(dir)) f.push_back(e.path());
    return f;
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

// Two builds of attnforge sharing a folder keep their own entries: the names carry the version.
BOOST_AUTO_TEST_CASE(builds_sharing_a_folder_keep_their_own_entries) {
  fresh_cache c;
  run();
  const fs::path entry = c.only_entry();
  const std::string bytes = read_bytes(entry);
  std::string why;
  const auto parts = attn::detail::parse_entry(bytes, why);
  BOOST_TEST_REQUIRE(parts.has_value());
  const fs::path payload = c.temp.path() / "payload.so";
  write_bytes(payload, std::string(parts->payload));
  const auto other = attn::detail::disk_cache::open(c.dir, "halide-20.0.0 attnforge-0000");
  BOOST_TEST_REQUIRE(other.has_value());
  BOOST_TEST_REQUIRE(other->store(std::string(parts->key), payload));
  const fs::path theirs = other->entry_path(std::string(parts->key));
  BOOST_TEST(theirs != entry);
  const ino_t ours = inode(entry), their_inode = inode(theirs);
  BOOST_TEST(run() == jit_result());  // a hit on our own entry
  BOOST_TEST(inode(entry) == ours);
  BOOST_TEST(inode(theirs) == their_inode);
  BOOST_TEST(taken_reports().empty());

  // An entry of another version under our name (a clash of the versions' short hashes).
  fs::rename(theirs, entry);
  BOOST_TEST(run() == jit_result());
  BOOST_TEST(reported("was written by halide-20.0.0 attnforge-0000"));
  const std::string fixed = read_bytes(entry);
  BOOST_TEST(attn::detail::parse_entry(fixed, why)->version == attn::detail::disk_cache_version());
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
  const fs::path entry = c.only_entry();
  BOOST_TEST(c.files().size() == 2u);  // and the thread pool's: no temporary files left behind
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
  setenv("ATTN_CACHE_DIR", "off", 1);
  const std::vector<float> generic = run({.path = attn::lowering::generic});
  setenv("ATTN_CACHE_DIR", dir.c_str(), 1);
  BOOST_TEST(run() == jit_result());
  BOOST_TEST(run({.path = attn::lowering::generic}) == generic);
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

// ---- What the cache trusts: folders only this user can write, regular files of its own. ----

namespace {

// Runs `argv` (a program and its arguments) with `env` added to this process's environment;
// its stdout and stderr go to `log`. Returns its exit status, or -1 if it did not exit.
int spawn(std::vector<std::string> argv, const std::vector<std::string>& env, const fs::path& log) {
  std::vector<std::string> environment(env);
  for (char** e = environ; *e; ++e) environment.emplace_back(*e);
  std::vector<char*> args, envp;
  for (auto& a : argv) args.push_back(a.data());
  for (auto& e : environment) envp.push_back(e.data());
  args.push_back(nullptr);
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  BOOST_TEST_REQUIRE(spawned == 0);
  int status = 0;
  BOOST_TEST_REQUIRE(waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Puts a forged entry into `folder` under the test kernel's entry name: a valid trailer (key,
// version, checksum) around forged_entry's code. Loading it would create `marker`.
void plant_forged_entry(fresh_cache& c, const fs::path& folder) {
  run();
  const std::string bytes = read_bytes(c.only_entry());
  std::string why;
  const auto parts = attn::detail::parse_entry(bytes, why);
  BOOST_TEST_REQUIRE(parts.has_value());
  const auto forger = attn::detail::disk_cache::open(c.temp.path() / "forger", std::string(parts->version));
  BOOST_TEST_REQUIRE(forger.has_value());
  BOOST_TEST_REQUIRE(forger->store(std::string(parts->key), ATTN_FORGED_ENTRY));
  fs::create_directories(folder);
  fs::copy_file(forger->entry_path(std::string(parts->key)), folder / c.only_entry().filename());
}

}  // namespace

BOOST_AUTO_TEST_CASE(folders_others_can_write_are_never_loaded_from, *first_half) {
  fresh_cache c;
  const fs::path marker = c.temp.path() / "forged_entry_ran";
  setenv("ATTN_TEST_FORGED_MARKER", marker.c_str(), 1);
  // The forged entry would run if it were loaded: a control, in a folder only we can write.
  const fs::path control = c.temp.path() / "control";
  plant_forged_entry(c, control);
  setenv("ATTN_CACHE_DIR", control.c_str(), 1);
  BOOST_TEST(run() == jit_result());
  BOOST_TEST_REQUIRE(fs::exists(marker));
  fs::remove(marker);
  taken_reports();

  struct untrusted {
    fs::path cache;
    std::string why;
  };
  const fs::path open_parent = c.temp.path() / "open_parent";
  std::vector<untrusted> cases{{c.temp.path() / "world_writable", "writable by others (mode 0777)"},
                               {c.temp.path() / "group_writable", "writable by its group (mode 0770)"},
                               {open_parent / "cache", open_parent.string() + " is writable by others"}};
  setenv("ATTN_CACHE_DIR", c.dir.c_str(), 1);
  for (const auto& u : cases) plant_forged_entry(c, u.cache);
  fs::permissions(cases[0].cache, fs::perms::all);
  fs::permissions(cases[1].cache, fs::perms::owner_all | fs::perms::group_all);
  fs::permissions(open_parent, fs::perms::all);
  if (geteuid() == 0) {  // only root can give a folder away
    cases.push_back({c.temp.path() / "theirs", "is owned by user 65534"});
    plant_forged_entry(c, cases.back().cache);
    BOOST_TEST_REQUIRE(chown(cases.back().cache.c_str(), 65534, 65534) == 0);
  }
  fs::create_directory_symlink(cases[0].cache, c.temp.path() / "link_to_world_writable");
  cases.push_back({c.temp.path() / "link_to_world_writable", "world_writable is writable by others"});

  for (const auto& u : cases) {
    BOOST_TEST_CONTEXT(u.cache) {
      setenv("ATTN_CACHE_DIR", u.cache.c_str(), 1);
      const auto before = std::distance(fs::directory_iterator(u.cache), {});
      BOOST_TEST(run() == jit_result());
      BOOST_TEST(!fs::exists(marker));
      const std::vector<std::string> r = taken_reports();
      BOOST_TEST_REQUIRE(r.size() == 1u);
      BOOST_TEST(r.front().find(u.why) != std::string::npos, r.front());
      BOOST_TEST(std::distance(fs::directory_iterator(u.cache), {}) == before);  // nothing written there
    }
  }
}

BOOST_AUTO_TEST_CASE(folders_and_entries_are_private_whatever_the_umask) {
  fresh_cache c;
  const fs::path dir = c.temp.path() / "new" / "cache";
  setenv("ATTN_CACHE_DIR", dir.c_str(), 1);
  const mode_t old = umask(0);
  BOOST_TEST(run() == jit_result());
  umask(old);
  for (const fs::path& p : {dir.parent_path(), dir}) BOOST_TEST((fs::status(p).permissions() == fs::perms::owner_all), p);
  for (const auto& f : fs::directory_iterator(dir))
    BOOST_TEST((fs::status(f.path()).permissions() == (fs::perms::owner_read | fs::perms::owner_write)), f.path());
  BOOST_TEST(taken_reports().empty());
}

BOOST_AUTO_TEST_CASE(links_fifos_and_huge_files_are_rejected_without_reading, *first_half) {
  fresh_cache c;
  run();
  const fs::path entry = c.only_entry(), real = c.temp.path() / "real_entry";
  fs::copy_file(entry, real);
  fs::remove(entry);
  fs::create_symlink(real, entry);
  BOOST_TEST(run() == jit_result());
  BOOST_TEST(reported("is a symbolic link"));
  BOOST_TEST(fs::is_regular_file(fs::symlink_status(entry)));  // replaced by a compiled entry

  fs::remove(entry);
  BOOST_TEST_REQUIRE(mkfifo(entry.c_str(), 0600) == 0);
  BOOST_TEST(run() == jit_result());  // returns: a FIFO is never opened for a blocking read
  BOOST_TEST(reported("is not a regular file"));

  replace_entry(entry, "");
  BOOST_TEST_REQUIRE(truncate(entry.c_str(), std::int64_t(100) << 30) == 0);  // 100 GiB, sparse
  BOOST_TEST(run() == jit_result());
  BOOST_TEST(reported("is larger than any kernel"));
  check_entry_valid(entry);
}

BOOST_AUTO_TEST_CASE(a_missing_tmpdir_changes_nothing) {
  fresh_cache c;
  {
    const attn::ref::scoped_env tmpdir("TMPDIR", (c.temp.path() / "no_such_folder").c_str());
    BOOST_TEST(run() == jit_result());
    BOOST_TEST(run() == jit_result());
  }
  BOOST_TEST(c.entries().size() == 1u);
  BOOST_TEST(taken_reports().empty());
}

BOOST_AUTO_TEST_CASE(leftovers_of_killed_writers_are_removed) {
  fresh_cache c;
  run();
  // What a compile or a store killed mid-way leaves: its work folder and temporary file. No
  // process has a pid this large (pid_max is at most 2^22).
  const fs::path dead_work = c.dir / ".work-99999999-a1b2c3", live_work = c.dir / (".work-1-a1b2c3"),
                 old_temp = c.dir / ".tmp-0123456789abcdef-01234567.so.a1b2c3", new_temp = c.dir / ".tmp-fedc.so.a1b2c3",
                 foreign = c.dir / "notes.txt";
  for (const fs::path& d : {dead_work, live_work}) fs::create_directories(d / "inside");
  for (const fs::path& f : {old_temp, new_temp, foreign}) write_bytes(f, "x");
  fs::last_write_time(old_temp, fs::file_time_type::clock::now() - std::chrono::hours(2));
  run({.path = attn::lowering::generic});  // a store: the folder is trimmed after it
  BOOST_TEST(!fs::exists(dead_work));
  BOOST_TEST(!fs::exists(old_temp));
  BOOST_TEST(fs::exists(live_work));  // pid 1 lives (and is not ours when the test is not root)
  BOOST_TEST(fs::exists(new_temp));   // may be a store in progress
  BOOST_TEST(fs::exists(foreign));    // not attnforge's

  // The same for the private folders in $TMPDIR (Halide's listings, the tuner's children).
  const fs::path tmp = c.temp.path() / "tmp";
  fs::create_directories(tmp / "attnforge_99999999-a1b2c3");
  fs::create_directories(tmp / "attnforge_1-a1b2c3");
  attn::detail::remove_dead_temp_dirs(tmp, "attnforge_");
  BOOST_TEST(!fs::exists(tmp / "attnforge_99999999-a1b2c3"));
  BOOST_TEST(fs::exists(tmp / "attnforge_1-a1b2c3"));
}

BOOST_AUTO_TEST_CASE(the_size_limit_drops_least_recently_used_entries) {
  fresh_cache c;
  // Entries of made-up payloads, 1000 bytes each, used one minute apart.
  const auto cache = attn::detail::disk_cache::open(c.dir, "v");
  BOOST_TEST_REQUIRE(cache.has_value());
  const fs::path payload = c.temp.path() / "payload";
  write_bytes(payload, std::string(1000, 'p'));
  std::vector<fs::path> e;
  for (int i = 0; i < 4; ++i) {
    BOOST_TEST_REQUIRE(cache->store("key" + std::to_string(i), payload));
    e.push_back(cache->entry_path("key" + std::to_string(i)));
    fs::last_write_time(e.back(), fs::file_time_type::clock::now() - std::chrono::minutes(10 - i));
  }
  BOOST_TEST_REQUIRE(cache->find("key0").has_value());  // a hit: key0 is now the most recently used
  const std::uint64_t each = fs::file_size(e[0]);
  cache->trim(2 * each);
  BOOST_TEST(fs::exists(e[0]));
  BOOST_TEST(!fs::exists(e[1]));
  BOOST_TEST(!fs::exists(e[2]));
  BOOST_TEST(fs::exists(e[3]));

  // Through the environment: 0 keeps only the entry just stored.
  setenv("ATTN_CACHE_SIZE_LIMIT", "0", 1);
  BOOST_TEST(cache->store("key4", payload));
  unsetenv("ATTN_CACHE_SIZE_LIMIT");
  BOOST_TEST(cache->entries().size() == 1u);
  BOOST_TEST(fs::exists(cache->entry_path("key4")));
}

BOOST_AUTO_TEST_CASE(attn_cache_lists_clears_and_trims_only_attnforge_files, *first_half) {
  fresh_cache c;
  run();
  run({.path = attn::lowering::generic});
  const auto other = attn::detail::disk_cache::open(c.dir, "another build");
  const fs::path payload = c.temp.path() / "payload";
  write_bytes(payload, std::string(1000, 'p'));
  BOOST_TEST_REQUIRE(other->store("their kernel", payload));
  write_bytes(c.dir / "notes.txt", "mine");
  const fs::path log = c.temp.path() / "log";
  auto tool = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {ATTN_CACHE_TOOL, "--dir", c.dir.string()});
    const int rc = spawn(args, {}, log);
    return std::make_pair(rc, read_bytes(log));
  };
  auto [rc, out] = tool({"list"});
  BOOST_TEST(rc == 0);
  BOOST_TEST(out.find("[other build] their kernel") != std::string::npos, out);
  for (const fs::path& e : c.entries()) BOOST_TEST(out.find(e.filename().string()) != std::string::npos, out);

  std::tie(rc, out) = tool({"clear", "--stale"});
  BOOST_TEST(rc == 0);
  BOOST_TEST(out == "removed 1 entries\n");
  BOOST_TEST(c.entries().size() == 2u);
  BOOST_TEST(!fs::exists(other->entry_path("their kernel")));

  std::tie(rc, out) = tool({"trim", "--limit", "-1"});
  BOOST_TEST(rc == 2);
  BOOST_TEST(out.find("--limit -1: expected bytes") != std::string::npos, out);
  std::tie(rc, out) = tool({"trim", "--limit", "0"});
  BOOST_TEST(rc == 0);
  BOOST_TEST(attn::detail::disk_cache::open(c.dir, "")->entries().empty());

  run();
  std::tie(rc, out) = tool({"clear"});
  BOOST_TEST(rc == 0);
  BOOST_TEST(c.entries().empty());
  BOOST_TEST(c.files() == std::vector<fs::path>{c.dir / "notes.txt"});
}

namespace {

int threads_now() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.starts_with("Threads:")) return std::stoi(line.substr(8));
  return -1;
}

// How many objects from the cache folder are mapped into this process.
std::size_t kernels_mapped(const fs::path& dir) {
  std::ifstream maps("/proc/self/maps");
  std::set<std::string> objects;
  for (std::string line; std::getline(maps, line);)
    if (const auto at = line.find(dir.string()); at != std::string::npos) objects.insert(line.substr(at));
  return objects.size();
}

}  // namespace

BOOST_AUTO_TEST_CASE(kernels_share_one_thread_pool_and_are_unloaded_when_dropped, *first_half) {
  fresh_cache c;
  attn::set_kernel_cache_limit(4);
  run();  // the pool exists from here on
  const int threads_before = threads_now();
  std::mt19937 rng(3);
  const auto W = attn::ref::random_tensor({16, 8}, rng, 0.5f);
  auto X = [&](int t) { return attn::ref::random_tensor({t, 16}, rng); };
  auto run_bound = [&](int t, const attn::tensor<float>& x) {
    return attn::jit(disk_cache_test::y, {.bind = {{"T", t}}})(x, W, W, W).values();
  };
  const auto x64 = X(64);
  const std::vector<float> first = run_bound(64, x64);
  for (int t = 65; t < 80; ++t) run_bound(t, X(t));  // 16 kernels, bound to different sizes
  BOOST_TEST(c.entries().size() == 17u);
  BOOST_TEST(run_bound(64, x64) == first);  // unloaded, then loaded again
  BOOST_TEST(threads_now() <= threads_before + pool_threads, threads_now() << " threads, " << threads_before << " before");
  // The four kernels the in-memory cache holds and the pool (if it was built in this folder).
  BOOST_TEST(kernels_mapped(c.dir) <= 5u);
  attn::set_kernel_cache_limit(0);
  BOOST_TEST(kernels_mapped(c.dir) <= 1u);
}

BOOST_AUTO_TEST_CASE(as_another_user_shared_folders_are_never_loaded_from, *first_half) {
  // The trust rule for a user without root's privileges: CI runs as root, so the kernel runs in
  // disk_cache_writer under setpriv as "nobody" (uid 65534).
  const fs::path writer = fs::path(ATTN_TEST_BINARY_DIR) / "disk_cache_writer";
  if (geteuid() != 0 || !fs::exists("/usr/bin/setpriv")) {
    BOOST_TEST_MESSAGE("not root, or no setpriv: the in-process trust tests above stand for this one");
    return;
  }
  fresh_cache c;
  const std::vector<std::string> as_nobody{"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
  const fs::path base = fs::temp_directory_path() / ("attn_as_nobody_" + std::to_string(getpid()));
  fs::create_directories(base);
  fs::permissions(base, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                            fs::perms::others_exec);
  const fs::path out = base / "out", marker = out / "forged_entry_ran", log = c.temp.path() / "log";
  fs::create_directories(out);
  fs::permissions(out, fs::perms::all);
  {
    std::vector<std::string> probe(as_nobody);
    probe.push_back(writer.string());  // no arguments: it prints its usage
    if (spawn(probe, {}, log) != 2 || read_bytes(log).find("usage") == std::string::npos) {
      BOOST_TEST_MESSAGE("nobody cannot run " << writer << " from this build folder: " << read_bytes(log));
      fs::remove_all(base);
      return;
    }
  }
  struct shared {
    fs::path dir;
    std::string why;
  };
  const std::vector<shared> cases{{base / "world_writable", "writable by others (mode 0777)"},
                                  {base / "daemons", "is owned by user 1, not by this user (65534) or root"}};
  for (const auto& s : cases) plant_forged_entry(c, s.dir);
  fs::permissions(cases[0].dir, fs::perms::all);
  BOOST_TEST_REQUIRE(chown(cases[1].dir.c_str(), 1, 1) == 0);
  for (const auto& s : cases) {
    BOOST_TEST_CONTEXT(s.dir) {
      std::vector<std::string> args(as_nobody);
      args.insert(args.end(), {writer.string(), (out / "result").string()});
      const int rc = spawn(args, {"ATTN_CACHE_DIR=" + s.dir.string(), "ATTN_TEST_FORGED_MARKER=" + marker.string()}, log);
      const std::string said = read_bytes(log);
      BOOST_TEST(rc == 0, said);
      BOOST_TEST(!fs::exists(marker));
      BOOST_TEST(said.find(s.why) != std::string::npos, said);
      const std::string expected(reinterpret_cast<const char*>(jit_result().data()), jit_result().size() * sizeof(float));
      BOOST_TEST(read_bytes(out / "result") == expected);
    }
  }
  fs::remove_all(base);
}
