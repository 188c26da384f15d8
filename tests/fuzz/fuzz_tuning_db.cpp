// libFuzzer target: the input is the text of a tuning database file (runtime/tuning_db.hpp).
// The promise checked:
//   - reading it never throws; a good database has records whose times are finite and that read
//     back the same once written (format, then parse); a bad one has no records;
//   - the file read from disk gives what the text gives;
//   - the lookup jit() makes (detail::apply_tuning_record, for a small attention with its dims
//     bound, on a CPU and a GPU target) never throws, and takes a schedule only from a good
//     database, one of its records'.
// Anything else aborts: a finding. The corpus (tests/fuzz/corpus_tuning_db/) names the kernel's
// key with placeholders, replaced before reading, so its records match whatever the signature is:
// @SIGNATURE@, @BUCKET@, @CPU@ and @GPU@ (the two targets' key strings).
// Built with clang -fsanitize=fuzzer (scripts/fuzz.sh) and, as fuzz_tuning_db_replay, with any
// compiler to replay the corpus under ctest (label fuzz).
#include <fcntl.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "runtime/jit.hpp"
#include "runtime/private_temp_dir.hpp"
#include "runtime/tuned_schedule.hpp"
#include "runtime/tuning_db.hpp"
#include "runtime/tuning_db_format.hpp"
#include "runtime/tuning_key.hpp"

namespace {

using namespace attn::dsl;

constexpr auto T = dim<"T">;
constexpr auto D = dim<"D", 8>;
constexpr auto q = input<"q">(T, D);
constexpr auto k = input<"k">(T, D);
constexpr auto v = input<"v">(T, D);
constexpr auto attention = combine(softmax(causal(scaled_scores(q, k))), v);

constexpr const char* cpu_target = "x86-64-linux-avx2";
constexpr const char* gpu_target = "x86-64-linux-avx2-cuda";

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "FUZZ FINDING: %s\n", what.c_str());
  std::abort();
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (std::size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size()) s.replace(at, from.size(), to);
}

struct fixture {
  attn::ir::graph graph = to_ir(attention);
  attn::detail::dim_sizes bound{{"T", 100}};
  attn::detail::private_temp_dir dir;
  std::filesystem::path file = dir.path() / "tuning.json";
  long long writes = 0;

  fixture() { setenv("ATTN_TUNING_DB", file.c_str(), 1); }

  std::string with_key(std::string text) const {
    replace_all(text, "@SIGNATURE@", attn::tuning_signature(graph, {}));
    replace_all(text, "@BUCKET@", *attn::shape_bucket(graph, bound));
    replace_all(text, "@CPU@", attn::tuning_target(cpu_target));
    replace_all(text, "@GPU@", attn::tuning_target(gpu_target));
    return text;
  }

  // Each input gets a modification time of its own: the lookup's cache reads every one.
  void write(const std::string& text) {
    std::ofstream(file, std::ios::binary | std::ios::trunc) << text;
    const timespec times[2] = {{++writes, 0}, {writes, 0}};
    ::utimensat(AT_FDCWD, file.c_str(), times, 0);
  }
};

void check_lookup(const fixture& f, const char* target, const attn::tuning_db_contents& db) {
  attn::jit_options o{.target = target, .bind = {T = 100}};
  bool applied = false;
  try {
    applied = attn::detail::apply_tuning_record(f.graph, o, f.bound);
  } catch (const std::exception& e) {
    finding(std::string("the lookup threw: ") + e.what());
  }
  if (!applied) {
    if (o.schedule != "default") finding("no record applied, yet the schedule changed to " + o.schedule);
    return;
  }
  if (!db.problem.empty()) finding("a record applied from a bad database: " + db.problem);
  bool found = false;
  for (const attn::tuning_record& r : db.records) found = found || r.schedule == o.schedule;
  if (!found) finding("the schedule applied is no record's: " + o.schedule);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fixture f;
  const std::string text = f.with_key(std::string(reinterpret_cast<const char*>(data), size));

  attn::tuning_db_contents parsed;
  try {
    parsed = attn::detail::parse_tuning_db(text);
  } catch (const std::exception& e) {
    finding(std::string("parsing threw: ") + e.what());
  }
  if (parsed.problem.empty()) {
    for (const attn::tuning_record& r : parsed.records)
      if (!attn::detail::tuning_record_problem(r).empty()) finding("a good record cannot be written: " + attn::detail::tuning_record_problem(r));
    const attn::tuning_db_contents again = attn::detail::parse_tuning_db(attn::detail::format_tuning_db(parsed.records));
    if (!again.problem.empty() || again.records != parsed.records) finding("records do not read back as written: " + again.problem);
  } else if (!parsed.records.empty()) {
    finding("a bad database has records: " + parsed.problem);
  }

  f.write(text);
  const attn::tuning_db_contents read = attn::read_tuning_db(f.file);
  const bool same = read.problem == parsed.problem && read.records == parsed.records;
  if (!same && text.size() <= attn::detail::tuning_db_max_bytes) finding("the file reads differently from its text: " + read.problem);
  check_lookup(f, cpu_target, parsed);
  check_lookup(f, gpu_target, parsed);
  return 0;
}
