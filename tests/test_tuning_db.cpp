// The tuning database as a file attnforge does not control: any text, of any shape, is read
// without an exception other than attnforge's, ignored with one warning when it is not a good
// database, and never makes jit() fail; the file is type- and size-checked before it is read (a
// FIFO does not hang, a huge sparse file costs nothing); a write replaces or moves aside only a
// file attnforge wrote (never a directory, FIFO, symbolic link or foreign file), creates its
// folders 0700 and its lock 0600 and never follows a link planted as the lock; a record that does
// not apply to the kernel on its target is reported and the default schedule used.
// ctest runs every test with ATTN_TUNING_DB=off; these tests point it at files of their own.
#define BOOST_TEST_MODULE tuning_db
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "runtime/errors.hpp"
#include "runtime/jit.hpp"
#include "runtime/private_temp_dir.hpp"
#include "runtime/tuned_schedule.hpp"
#include "runtime/tuning_db.hpp"
#include "runtime/tuning_key.hpp"
#include "support/error_checks.hpp"
#include "support/scoped_env.hpp"
#include "support/text_file.hpp"
#include "support/tuning_kernel.hpp"

namespace {

using namespace attn::dsl;
namespace fs = std::filesystem;
using attn::ref::read_text;
using attn::ref::scoped_env;
using attn::ref::write_text;
using tuning_test::causal_attention;
using tuning_test::T;

attn::tuning_record record(const std::string& signature, const std::string& bucket, const std::string& schedule,
                           const std::string& target = "x86-64-linux-avx2") {
  attn::tuning_record r;
  r.signature = signature;
  r.bucket = bucket;
  r.target = target;
  r.schedule = schedule;
  r.expression = "softmax(q·kᵀ)·v";
  r.sizes = "T=100";
  r.median_ms = 1.5;
  r.default_ms = 2.25;
  r.date = "2025-01-01T00:00:00Z";
  r.attnforge_version = attn::attnforge_version();
  r.halide_version = attn::halide_version();
  return r;
}

std::size_t count_lines(const std::string& s) { return std::size_t(std::count(s.begin(), s.end(), '\n')); }

// What this process writes to stderr (std::cerr is unbuffered) while it exists.
class stderr_capture {
 public:
  stderr_capture() : file_(dir_.path() / "stderr") {
    saved_ = ::dup(2);
    const int fd = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, 2);
    ::close(fd);
  }
  ~stderr_capture() { restore(); }
  std::string text() {
    restore();
    return read_text(file_);
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    saved_ = -1;
  }
  attn::detail::private_temp_dir dir_;
  fs::path file_;
  int saved_ = -1;
};

// This process's data segment, in bytes (/proc/self/status VmData; sanitizers reserve terabytes).
rlim_t data_in_use() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.starts_with("VmData:")) return rlim_t(std::stoull(line.substr(7))) << 10;
  return 0;
}

// Runs `body` in a child process with at most `seconds` and 1 GiB of data more than it has; true
// if it returned true. A hang or a huge allocation is a failure, not a stuck or exhausted machine.
bool in_child(int seconds, const std::function<bool()>& body) {
  const rlim_t data_limit = data_in_use() + (rlim_t(1) << 30);
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(unsigned(seconds));
    const rlimit data{data_limit, data_limit};
    setrlimit(RLIMIT_DATA, &data);
    bool ok = false;
    try {
      ok = body();
    } catch (...) {
    }
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::string mode_of(const fs::path& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) return "missing";
  char text[8];
  std::snprintf(text, sizeof text, "%04o", unsigned(st.st_mode & 07777));
  return text;
}

}  // namespace

BOOST_AUTO_TEST_CASE(database_round_trips_and_replaces_by_key) {
  const attn::detail::private_temp_dir dir;
  const fs::path file = dir.path() / "sub" / "tuning.json";  // folders are created
  const auto a = record("00000000000000aa", "T=128", "q_tile=24 kv_tile=128");
  const auto b = record("00000000000000bb", "T=128", "auto=Li2018");
  attn::write_tuning_records(file, {a, b});
  auto db = attn::read_tuning_db(file);
  BOOST_TEST(db.problem.empty());
  BOOST_REQUIRE_EQUAL(db.records.size(), 2u);
  BOOST_TEST((db.records[0] == a));
  BOOST_TEST((db.records[1] == b));
  auto a2 = a;  // same key: replaced, not added
  a2.schedule = "q_tile=96 kv_tile=64";
  attn::write_tuning_records(file, {a2});
  db = attn::read_tuning_db(file);
  BOOST_REQUIRE_EQUAL(db.records.size(), 2u);
  const auto found = attn::find_tuning_record(file, a.signature, a.bucket, a.target);
  BOOST_REQUIRE(found.has_value());
  BOOST_TEST(found->schedule == a2.schedule);
  BOOST_TEST(!attn::find_tuning_record(file, a.signature, "T=256", a.target).has_value());
  BOOST_TEST(attn::read_tuning_db(dir.path() / "missing.json").problem.empty());  // no file: empty, fine
  auto nan = a;  // a time that would not read back is refused, the file unchanged
  nan.median_ms = std::nan("");
  const std::string before = read_text(file);
  BOOST_CHECK_THROW(attn::write_tuning_records(file, {nan}), attn::argument_error);
  BOOST_TEST(read_text(file) == before);
}

// Bad files of attnforge's (still naming "attnforge-tuning") are ignored when read and moved
// aside by the next write; files that are not recognisably a tuning database are ignored when
// read and never replaced.
BOOST_AUTO_TEST_CASE(bad_databases_are_ignored_and_only_attnforge_files_are_moved_aside) {
  const attn::detail::private_temp_dir dir;
  attn::write_tuning_records(dir.path() / "good.json", {record("00000000000000aa", "T=64", "q_tile=12")});
  const std::string good = read_text(dir.path() / "good.json");
  struct bad_file {
    std::string what, text;
    bool ours;
  };
  const std::vector<bad_file> bad{
      {"corrupt", "{\"format\": \"attnforge-tuning\", \"version\": 1, \"records\": [}", true},
      {"truncated", good.substr(0, good.size() / 2), true},
      {"other version", "{\"format\": \"attnforge-tuning\", \"version\": 99, \"records\": []}", true},
      {"version past 32 bits", "{\"format\": \"attnforge-tuning\", \"version\": 4294967297, \"records\": []}", true},
      {"malformed record", "{\"format\": \"attnforge-tuning\", \"version\": 1, \"records\": [{\"bucket\": 3}]}", true},
      {"format a number", "{\"format\": 3, \"version\": 1, \"records\": []}", false},
      {"format null", "{\"format\": null, \"version\": 1, \"records\": []}", false},
      {"foreign", "{\"name\": \"some other tool\", \"records\": []}", false},
      {"binary", std::string("\x00\xff\x13", 3), false},
      {"empty", "", false},
  };
  for (const auto& [what, text, ours] : bad) {
    const fs::path file = dir.path() / (what + ".json");
    write_text(file, text);
    const auto db = attn::read_tuning_db(file);
    BOOST_TEST(!db.problem.empty(), what);
    BOOST_TEST(db.records.empty(), what);
    stderr_capture err;
    BOOST_TEST(!attn::find_tuning_record(file, "00000000000000aa", "T=64", "x86-64-linux-avx2").has_value(), what);
    BOOST_TEST(!attn::find_tuning_record(file, "00000000000000aa", "T=64", "x86-64-linux-avx2").has_value(), what);
    BOOST_TEST(count_lines(err.text()) == 1u, what + ": one warning per state of the file");
    if (ours) {  // replaced, the bad file kept beside it, the new record kept
      stderr_capture write_err;
      attn::write_tuning_records(file, {record("00000000000000cc", "T=64", "q_tile=24")});
      BOOST_TEST(count_lines(write_err.text()) == 1u, what);
      BOOST_TEST(read_text(file.string() + ".bad") == text, what);
      const auto after = attn::read_tuning_db(file);
      BOOST_TEST(after.problem.empty(), what);
      BOOST_TEST(after.records.size() == 1u, what);
    } else {  // not attnforge's: refused, untouched
      BOOST_CHECK_THROW(attn::check_tuning_db_writable(file), attn::error);
      BOOST_CHECK_THROW(attn::write_tuning_records(file, {record("00000000000000cc", "T=64", "q_tile=24")}), attn::error);
      BOOST_TEST(read_text(file) == text, what);
      BOOST_TEST(!fs::exists(file.string() + ".bad"), what);
    }
  }
}

BOOST_AUTO_TEST_CASE(concurrent_writers_lose_nothing) {
  const attn::detail::private_temp_dir dir;
  const fs::path file = dir.path() / "tuning.json";
  constexpr int writers = 2, each = 25;
  std::vector<pid_t> children;
  for (int w = 0; w < writers; ++w) {
    const pid_t pid = fork();
    BOOST_REQUIRE(pid >= 0);
    if (pid == 0) {  // a writer: one read-merge-write per record, racing the other
      int code = 0;
      try {
        for (int i = 0; i < each; ++i)
          attn::write_tuning_records(file, {record(std::to_string(w) + "-" + std::to_string(i), "T=64", "q_tile=12")});
      } catch (...) {
        code = 1;
      }
      _exit(code);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    BOOST_REQUIRE(waitpid(pid, &status, 0) == pid);
    BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }
  const auto db = attn::read_tuning_db(file);
  BOOST_TEST(db.problem.empty());
  BOOST_TEST(db.records.size() == std::size_t(writers * each));
}

BOOST_AUTO_TEST_CASE(the_version_is_compared_exactly) {
  const attn::detail::private_temp_dir dir;
  const fs::path file = dir.path() / "tuning.json";
  for (const std::string version : {"4294967297", "-4294967295", "1.0", "1e0", "18446744073709551617", "\"1\"", "true", "[1]", "null"}) {
    write_text(file, "{\"format\": \"attnforge-tuning\", \"version\": " + version +
                         ", \"records\": [{\"signature\": \"a\", \"bucket\": \"b\", \"target\": \"c\", \"schedule\": \"d\"}]}");
    const auto db = attn::read_tuning_db(file);
    BOOST_TEST(!db.problem.empty(), version);
    BOOST_TEST(db.records.empty(), version);
  }
}

// A moved-aside file never replaces an existing "<file>.bad" (it may be the user's).
BOOST_AUTO_TEST_CASE(setting_aside_never_overwrites) {
  const attn::detail::private_temp_dir dir;
  const fs::path file = dir.path() / "tuning.json";
  write_text(file.string() + ".bad", "the user's own file");
  const std::string bad = "{\"format\": \"attnforge-tuning\", \"version\": 2, \"records\": []}";
  write_text(file, bad);
  stderr_capture err;
  attn::write_tuning_records(file, {record("00000000000000aa", "T=64", "q_tile=12")});
  BOOST_TEST(read_text(file.string() + ".bad") == "the user's own file");
  BOOST_TEST(read_text(file.string() + ".bad.1") == bad);
  BOOST_TEST(err.text().find(".bad.1") != std::string::npos);
  BOOST_TEST(attn::read_tuning_db(file).records.size() == 1u);
}

// A directory, a FIFO, a symbolic link, a huge sparse file: read without hanging or allocating
// (in a child with a time and memory limit), reported, never replaced or moved.
BOOST_AUTO_TEST_CASE(only_regular_files_of_bounded_size_are_read_or_replaced) {
  const attn::detail::private_temp_dir dir;
  const fs::path folder = dir.path() / "folder.json", fifo = dir.path() / "fifo.json", sparse = dir.path() / "sparse.json";
  const fs::path good = dir.path() / "elsewhere.json", link = dir.path() / "link.json", link_to_fifo = dir.path() / "to_fifo.json";
  fs::create_directory(folder);
  write_text(folder / "keep", "mine");
  BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  {
    const int fd = ::open(sparse.c_str(), O_WRONLY | O_CREAT, 0600);
    BOOST_REQUIRE(fd >= 0);
    BOOST_REQUIRE(::ftruncate(fd, off_t(100) << 30) == 0);  // 100 GiB, no blocks
    ::close(fd);
  }
  attn::write_tuning_records(good, {record("00000000000000aa", "T=64", "q_tile=12")});
  const std::string good_text = read_text(good);
  fs::create_symlink(good, link);
  fs::create_symlink(fifo, link_to_fifo);
  for (const fs::path& p : {folder, fifo, sparse, link_to_fifo}) {
    BOOST_TEST(in_child(20, [&] {
      return !attn::read_tuning_db(p).problem.empty() &&
             !attn::find_tuning_record(p, "00000000000000aa", "T=64", "x86-64-linux-avx2").has_value();
    }), p.filename());
  }
  BOOST_TEST(attn::read_tuning_db(folder).problem.find("directory") != std::string::npos);
  BOOST_TEST(in_child(20, [&] { return attn::read_tuning_db(sparse).problem.find("MiB") != std::string::npos; }));
  BOOST_TEST(attn::read_tuning_db(link).records.size() == 1u);  // reading follows a link
  for (const fs::path& p : {folder, fifo, sparse, link, link_to_fifo}) {
    BOOST_CHECK_THROW(attn::check_tuning_db_writable(p), attn::error);
    BOOST_TEST(in_child(20, [&] {
      try {
        attn::write_tuning_records(p, {record("00000000000000cc", "T=64", "q_tile=24")});
      } catch (const attn::error&) {
        return true;
      }
      return false;
    }), p.filename());
    BOOST_TEST(!fs::exists(p.string() + ".bad"), p.filename());
  }
  BOOST_TEST(fs::is_directory(folder));
  BOOST_TEST(read_text(folder / "keep") == "mine");
  BOOST_TEST(fs::is_fifo(fifo));
  BOOST_TEST(fs::file_size(sparse) == std::uintmax_t(100) << 30);
  BOOST_TEST(fs::is_symlink(link));
  BOOST_TEST(read_text(good) == good_text);
  BOOST_CHECK_EXCEPTION(attn::write_tuning_records(folder, {}), attn::error, attn::ref::message_has<attn::error>({"is a directory"}));
}

BOOST_AUTO_TEST_CASE(the_lock_is_private_and_never_followed) {
  const attn::detail::private_temp_dir dir;
  const fs::path file = dir.path() / "tuning.json", victim = dir.path() / "victim";
  fs::create_symlink(victim, file.string() + ".lock");
  BOOST_CHECK_THROW(attn::write_tuning_records(file, {record("00000000000000aa", "T=64", "q_tile=12")}), attn::error);
  BOOST_TEST(!fs::exists(victim));
  BOOST_TEST(!fs::exists(file));
  fs::remove(file.string() + ".lock");
  const mode_t old = ::umask(0);
  attn::write_tuning_records(file, {record("00000000000000aa", "T=64", "q_tile=12")});
  ::umask(old);
  BOOST_TEST(mode_of(file.string() + ".lock") == "0600");
  BOOST_TEST(mode_of(file) == "0644");
}

BOOST_AUTO_TEST_CASE(new_folders_are_private_whatever_the_umask) {
  const attn::detail::private_temp_dir dir;
  for (const mode_t mask : {mode_t(0), mode_t(0277)}) {
    const fs::path top = dir.path() / ("umask" + std::to_string(mask)), file = top / "attnforge" / "tuning.json";
    const mode_t old = ::umask(mask);
    attn::write_tuning_records(file, {record("00000000000000aa", "T=64", "q_tile=12")});
    ::umask(old);
    BOOST_TEST(mode_of(top) == "0700");
    BOOST_TEST(mode_of(top / "attnforge") == "0700");
    BOOST_TEST(attn::read_tuning_db(file).records.size() == 1u);
  }
}

BOOST_AUTO_TEST_CASE(a_relative_xdg_cache_home_is_ignored) {
  const scoped_env db("ATTN_TUNING_DB", nullptr), home("HOME", "/home/someone");
  {
    const scoped_env xdg("XDG_CACHE_HOME", "relative/cache");
    BOOST_TEST(attn::tuning_db_path().value() == fs::path("/home/someone/.cache/attnforge/tuning.json"));
  }
  const scoped_env xdg("XDG_CACHE_HOME", "/var/cache/someone");
  BOOST_TEST(attn::tuning_db_path().value() == fs::path("/var/cache/someone/attnforge/tuning.json"));
}

// Many malformed documents, made from a good one by putting every kind of JSON value (and numbers
// past any integer type) in every place, dropping each field, truncating and flipping bytes: none
// throws, each bad one is one warning and no record, each good one gives its record to a lookup
// as jit() makes it (detail::apply_tuning_record).
BOOST_AUTO_TEST_CASE(malformed_documents_are_ignored_with_one_warning) {
  const attn::detail::private_temp_dir dir;
  const auto g = to_ir(causal_attention);
  const std::vector<attn::dsl::dim_binding> bind{T = 100};
  const attn::detail::dim_sizes bound{{"T", 100}};
  const attn::jit_options lookup{.target = "x86-64-linux-avx2", .bind = bind};
  const std::string target = attn::tuning_target(lookup.target);

  const std::map<std::string, std::string> good_record{
      {"signature", "\"" + attn::tuning_signature(g, lookup) + "\""}, {"bucket", "\"" + *attn::shape_bucket(g, bound) + "\""},
      {"target", "\"" + target + "\""}, {"schedule", "\"q_tile=24\""}, {"median_ms", "1.5"}, {"default_ms", "2"},
      {"expression", "\"e\""}, {"sizes", "\"T=100\""}, {"date", "\"d\""}, {"attnforge_version", "\"a\""},
      {"halide_version", "\"h\""}};
  const std::map<std::string, std::string> good_top{{"format", "\"attnforge-tuning\""}, {"version", "1"}};
  auto object = [](const std::map<std::string, std::string>& fields) {
    std::string s = "{";
    for (const auto& [key, value] : fields) s += (s.size() > 1 ? ", \"" : "\"") + key + "\": " + value;
    return s + "}";
  };
  auto document = [&](std::map<std::string, std::string> top, const std::string& records) {
    if (!records.empty()) top["records"] = records;
    return object(top);
  };
  const std::string good = document(good_top, "[" + object(good_record) + "]");

  const std::vector<std::string> values{"null", "true", "false", "0", "-1", "1", "1.5", "1.0", "4294967297", "-9223372036854775809",
                                        "18446744073709551616", "1e400", "-1e400", "1e-400", "\"\"", "\"x\"", "\"attnforge-tuning\"",
                                        "\"\\u0000\"", "[]", "{}", "[[[[[[]]]]]]", "{\"a\": {\"b\": [1, {}, \"c\"]}}"};
  auto is_finite_number = [](const std::string& v) {
    return v == "0" || v == "-1" || v == "1" || v == "1.5" || v == "1.0" || v == "4294967297" || v == "-9223372036854775809" ||
           v == "18446744073709551616" || v == "1e-400";
  };
  struct doc {
    std::string text;
    std::optional<bool> valid;    // unknown for flipped bytes
    std::optional<bool> applies;  // the lookup finds the record and takes its schedule (unknown: a changed schedule)
    std::size_t records = 1;      // when valid
  };
  auto bad = [](std::string text) { return doc{std::move(text), false, false, 0}; };
  std::vector<doc> docs{{good, true, true}};
  const std::set<std::string> key_fields{"signature", "bucket", "target"};
  for (const std::string& value : values) {
    // Numbers past double's range are not JSON to the parser: every document holding one is bad.
    const bool parses = !value.ends_with("e400");
    auto add = [&](doc d) { docs.push_back(parses ? std::move(d) : bad(std::move(d.text))); };
    add(bad(value));  // the whole document
    for (const auto& [field, old] : good_top) {
      auto top = good_top;
      top[field] = value;
      if (field == "format" ? value == old : value == "1") add({document(top, "[" + object(good_record) + "]"), true, true});
      else add(bad(document(top, "[" + object(good_record) + "]")));
    }
    if (value == "[]") add({document(good_top, value), true, false, 0});  // the records
    else add(bad(document(good_top, value)));
    add(bad(document(good_top, "[" + value + "]")));  // a record
    add(bad(document(good_top, "[" + object(good_record) + ", " + value + "]")));
    for (const auto& [field, old] : good_record) {
      auto r = good_record;
      r[field] = value;
      const bool text_field = !field.ends_with("_ms");
      const bool ok = text_field ? value.starts_with("\"") : is_finite_number(value);
      const std::string changed = document(good_top, "[" + object(r) + "]");
      if (!ok) add(bad(changed));
      else if (field == "schedule") add({changed, true, std::nullopt});
      else add({changed, true, !key_fields.contains(field) || value == old});
      r[field] = old;
      r["unknown"] = value;  // other keys are skipped, whatever they hold
      add({document(good_top, "[" + object(r) + "]"), true, true});
    }
  }
  for (const auto& [field, old] : good_record) {
    auto r = good_record;
    r.erase(field);
    if (key_fields.contains(field) || field == "schedule") docs.push_back(bad(document(good_top, "[" + object(r) + "]")));
    else docs.push_back({document(good_top, "[" + object(r) + "]"), true, true});
  }
  for (const auto& [field, old] : good_top) {
    auto top = good_top;
    top.erase(field);
    docs.push_back(bad(document(top, "[" + object(good_record) + "]")));
  }
  docs.push_back(bad(document(good_top, "")));  // no records
  for (std::size_t n = 0; n < good.size(); n += 5) docs.push_back(bad(good.substr(0, n)));
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {  // flipped bytes: anything may come out; nothing may throw
    std::string t = good;
    for (int f = 0; f < 3; ++f) t[rng() % t.size()] = char(rng());
    docs.push_back({t, std::nullopt, std::nullopt});
  }

  std::size_t n = 0;
  for (const doc& d : docs) {
    const fs::path file = dir.path() / ("db" + std::to_string(n++) + ".json");
    write_text(file, d.text);
    const scoped_env env("ATTN_TUNING_DB", file.c_str());
    stderr_capture err;
    attn::jit_options o = lookup;
    bool applied = false;
    BOOST_CHECK_NO_THROW(applied = attn::detail::apply_tuning_record(g, o, bound));
    attn::tuning_db_contents db;
    BOOST_CHECK_NO_THROW(db = attn::read_tuning_db(file));
    const std::string warnings = err.text();
    if (!d.valid) continue;
    BOOST_TEST(db.problem.empty() == *d.valid, d.text << "\n  " << db.problem);
    BOOST_TEST(db.records.size() == (*d.valid ? d.records : 0u), d.text);
    if (!*d.valid) BOOST_TEST(count_lines(warnings) == 1u, d.text << "\n  " << warnings);
    if (!d.applies) continue;
    if (*d.valid) BOOST_TEST(count_lines(warnings) == 0u, d.text << "\n  " << warnings);
    BOOST_TEST(applied == *d.applies, d.text);
    BOOST_TEST(o.schedule == (*d.applies ? "q_tile=24" : "default"), d.text);
  }
  BOOST_TEST(docs.size() > 500u);
}

// A record that does not apply to the kernel on the target it is used for (a GPU schedule for a
// CPU target; schedule parameters for a kernel that is not fused) is reported once and the
// default used: jit() compiles.
BOOST_AUTO_TEST_CASE(records_that_do_not_apply_leave_the_default) {
  const attn::detail::private_temp_dir dir;
  const fs::path file = dir.path() / "tuning.json";
  const auto g = to_ir(causal_attention);
  const std::string bucket = *attn::shape_bucket(g, {{"T", 90}}), host = attn::tuning_target("host");
  attn::write_tuning_records(file, {record(attn::tuning_signature(g, {}), bucket, "threads=32 q_tile=2", host),
                                    record(attn::tuning_signature(g, {.with_weights = true}), bucket, "q_tile=24", host)});
  const scoped_env env("ATTN_TUNING_DB", file.c_str());
  stderr_capture err;
  const auto gpu_schedule = attn::jit(causal_attention, {.bind = {T = 90}});
  BOOST_TEST(gpu_schedule.compiled().describe().find("source=default") != std::string::npos, gpu_schedule.compiled().describe());
  const auto again = attn::jit(causal_attention, {.bind = {T = 91}});
  const auto generic = attn::jit(causal_attention, {.bind = {T = 90}, .with_weights = true});
  BOOST_TEST(generic.compiled().describe() == "path=generic");
  const std::string warnings = err.text();
  BOOST_TEST(count_lines(warnings) == 2u, warnings);  // one per record, however often it is looked up
  BOOST_TEST(warnings.find("threads=32") != std::string::npos, warnings);
}
