// The tuner and its database: records round-trip; corrupt, truncated, foreign and other-version
// files are reported and ignored; concurrent writers (two processes) lose nothing; the tuner on a
// small kernel within a few seconds finishes, never picks something slower than the default in its
// own measurements nor a candidate whose output is wrong; attn::jit picks up the record it wrote.
// ctest runs every test with ATTN_TUNING_DB=off; these tests point it at files of their own.
#define BOOST_TEST_MODULE tuner
#include <boost/test/unit_test.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>

#include "runtime/jit.hpp"
#include "runtime/private_temp_dir.hpp"
#include "runtime/tuning_db.hpp"
#include "runtime/tuning_key.hpp"
#include "tuner/output_check.hpp"
#include "tuner/search_space.hpp"
#include "tuner/tuner.hpp"

namespace {

using namespace attn::dsl;
namespace fs = std::filesystem;

constexpr auto T = dim<"T">;
constexpr auto H = head_dim<"H", 2>;
constexpr auto Dh = dim<"Dh", 16>;
constexpr auto q = input<"q">(H, T, Dh);
constexpr auto k = input<"k">(H, T, Dh);
constexpr auto v = input<"v">(H, T, Dh);
constexpr auto causal_attention = combine(softmax(causal(scaled_scores(q, k))), v);

attn::tuning_record record(const std::string& signature, const std::string& bucket, const std::string& schedule) {
  attn::tuning_record r;
  r.signature = signature;
  r.bucket = bucket;
  r.target = "x86-64-linux-avx2";
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

void write_text(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

// Points ATTN_TUNING_DB at a file for the scope of a test.
struct db_env {
  explicit db_env(const fs::path& p) { setenv("ATTN_TUNING_DB", p.c_str(), 1); }
  ~db_env() { setenv("ATTN_TUNING_DB", "off", 1); }
};

attn::tensor<float> random_tensor(std::vector<std::int64_t> sizes, unsigned seed) {
  attn::tensor<float> t(std::move(sizes));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& x : t.values()) x = u(rng);
  return t;
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
}

BOOST_AUTO_TEST_CASE(bad_files_are_reported_and_ignored) {
  const attn::detail::private_temp_dir dir;
  attn::write_tuning_records(dir.path() / "good.json", {record("00000000000000aa", "T=64", "q_tile=12")});
  std::ifstream in(dir.path() / "good.json");
  const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::vector<std::pair<std::string, std::string>> bad{
      {"corrupt", "{\"format\": \"attnforge-tuning\", \"version\": 1, \"records\": [}"},
      {"truncated", good.substr(0, good.size() / 2)},
      {"foreign", "{\"name\": \"some other tool\", \"records\": []}"},
      {"other version", "{\"format\": \"attnforge-tuning\", \"version\": 99, \"records\": []}"},
      {"malformed record", "{\"format\": \"attnforge-tuning\", \"version\": 1, \"records\": [{\"bucket\": 3}]}"},
      {"binary", std::string("\x00\xff\x13", 3)},
  };
  for (const auto& [what, text] : bad) {
    const fs::path file = dir.path() / (what + ".json");
    write_text(file, text);
    const auto db = attn::read_tuning_db(file);
    BOOST_TEST(!db.problem.empty(), what);
    BOOST_TEST(db.records.empty(), what);
    BOOST_TEST(!attn::find_tuning_record(file, "00000000000000aa", "T=64", "x86-64-linux-avx2").has_value(), what);
    // Writing replaces it (the bad file is kept beside it) and keeps the new record.
    attn::write_tuning_records(file, {record("00000000000000cc", "T=64", "q_tile=24")});
    BOOST_TEST(fs::exists(file.string() + ".bad"), what);
    const auto after = attn::read_tuning_db(file);
    BOOST_TEST(after.problem.empty(), what);
    BOOST_TEST(after.records.size() == 1u, what);
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

BOOST_AUTO_TEST_CASE(keys_and_buckets) {
  const auto g = to_ir(causal_attention);
  BOOST_TEST(attn::tuning_signature(g, {}) == attn::tuning_signature(g, {.path = attn::lowering::fused}));
  BOOST_TEST(attn::tuning_signature(g, {}) != attn::tuning_signature(g, {.with_weights = true}));
  BOOST_TEST(attn::tuning_signature(g, {}).size() == 16u);
  BOOST_TEST(*attn::shape_bucket(g, {{"T", 600}}) == "T=1024");
  BOOST_TEST(*attn::shape_bucket(g, {{"T", 1024}}) == "T=1024");
  BOOST_TEST(!attn::shape_bucket(g, {}).has_value());
}

BOOST_AUTO_TEST_CASE(search_space_is_pruned) {
  const attn::tune::attention_sizes a{1024, 1024, 64, 16};
  const auto grid = attn::tune::pruned_grid(a);
  BOOST_TEST(!grid.empty());
  for (const auto& s : grid) {
    BOOST_TEST(s.q_unroll * s.kv_vectors <= 28);
    BOOST_TEST(s.q_tile % s.q_unroll == 0);
    BOOST_TEST(s.kv_tile % (s.kv_vectors * s.vector) == 0);
  }
  const attn::gen::flash_schedule d = attn::gen::default_flash_schedule(1024, 1024, 64, 16);
  for (const auto& n : attn::tune::neighbours(d, a)) BOOST_TEST(attn::tune::plausible(n, a));
  BOOST_TEST(!attn::tune::neighbours(d, a).empty());
  const attn::tune::attention_sizes wide{1024, 1024, 128, 16};
  BOOST_TEST(attn::tune::plausible(attn::gen::default_flash_schedule(1024, 1024, 128, 16), wide));
  // Dh = 128: 8 vectors of V per row; every P·V register tile fits the registers (rows of all of
  // V's row, or of part of it), with 16-float vectors (28 accumulators) and 8-float ones (14).
  for (const auto& [vector, budget] : {std::pair{16, 28}, std::pair{8, 14}}) {
    const attn::tune::attention_sizes sizes{1024, 1024, 128, vector};
    const auto candidates = attn::tune::pruned_grid(sizes);
    BOOST_TEST(!candidates.empty());
    for (const auto& s : candidates)
      BOOST_TEST((s.pv_rows > 0 ? s.pv_rows : s.q_unroll) * attn::gen::pv_tile_vectors(s, 128) <= budget);
    BOOST_TEST(attn::tune::plausible(attn::gen::default_flash_schedule(1024, 1024, 128, vector), sizes));
    BOOST_TEST(attn::tune::plausible(attn::gen::default_flash_schedule(1024, 1024, 64, vector), attn::tune::attention_sizes{1024, 1024, 64, vector}));
  }
  // Every row block is whole register tiles of a query tile it divides.
  for (const auto& s : grid)
    if (s.row_block > 0) BOOST_TEST((s.q_tile % s.row_block == 0 && s.row_block % s.q_unroll == 0));
}

BOOST_AUTO_TEST_CASE(output_check_catches_wrong_results) {
  std::vector<float> ref(4096), close(4096);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  for (std::size_t i = 0; i < ref.size(); ++i) {
    ref[i] = u(rng);
    close[i] = ref[i] * (1 + 1e-6f);  // rounding-sized differences pass
  }
  BOOST_TEST(attn::tune::check_output(ref, close).ok);
  auto one_key = close;  // one key in 4096 dropped: an output moves by ~1/4096
  one_key[17] += 2.5e-4f;
  BOOST_TEST(!attn::tune::check_output(ref, one_key).ok);
  auto nan = close;
  nan[5] = std::nanf("");
  BOOST_TEST(!attn::tune::check_output(ref, nan).ok);
  BOOST_TEST(!attn::tune::check_output(ref, std::vector<float>(10)).ok);
}

// One tuning run (a few seconds) serves the tests below.
const attn::tune::tune_result& small_run() {
  static const attn::tune::tune_result r = [] {
    attn::tune::tune_options o;
    o.sizes = {{"T", 100}};
    o.budget_seconds = 5;
    o.log = nullptr;
    return attn::tune::tune(causal_attention, o);
  }();
  return r;
}

BOOST_AUTO_TEST_CASE(tuner_finishes_in_budget_and_is_never_slower_than_default) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto& r = small_run();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  BOOST_TEST(took < 5 + 15);  // a compile started before the deadline may finish after it
  BOOST_TEST(r.candidates.size() >= 2u);
  BOOST_TEST(r.default_candidate().origin == "default");
  BOOST_TEST((r.best().status == attn::tune::outcome::ok));
  BOOST_TEST(!r.best().final_times.empty());            // re-timed with the default
  BOOST_TEST(!r.default_candidate().final_times.empty());
  BOOST_TEST(r.best().seconds() <= r.default_candidate().seconds());
  BOOST_TEST(r.bucket == "T=128");
}

BOOST_AUTO_TEST_CASE(wrong_candidates_are_never_chosen) {
  attn::tune::tune_options o;
  o.sizes = {{"T", 100}};
  o.budget_seconds = 3;
  o.log = nullptr;
  std::string default_schedule;
  o.output_hook = [&](const std::string& schedule, std::span<float> out) {
    if (default_schedule.empty()) default_schedule = schedule;  // the first candidate is the default
    else out[out.size() / 2] += 0.5f;                          // every other one is made wrong
  };
  const auto r = attn::tune::tune(causal_attention, o);
  BOOST_REQUIRE(r.candidates.size() >= 2u);
  BOOST_TEST(r.chosen == 0u);
  for (std::size_t i = 1; i < r.candidates.size(); ++i)
    BOOST_TEST((r.candidates[i].status == attn::tune::outcome::wrong || r.candidates[i].status == attn::tune::outcome::skipped));
}

BOOST_AUTO_TEST_CASE(jit_uses_the_record_when_dims_are_bound) {
  const attn::detail::private_temp_dir dir;
  const fs::path file = dir.path() / "tuning.json";
  const auto& r = small_run();
  attn::tune::tune_options o;
  o.sizes = {{"T", 100}};
  auto rec = attn::tune::make_record(r, o);
  BOOST_TEST(rec.median_ms <= rec.default_ms);
  rec.schedule = "q_tile=12 kv_tile=32 partial_tile=32 q_unroll=3 kv_vectors=2 vector=16 stage_kv=0 pv_keys=0 row_block=0 pv_rows=0 pack_state=1";  // recognisable
  attn::write_tuning_records(file, {rec});
  const db_env env(file);

  const auto tuned = attn::jit(causal_attention, {.bind = {T = 90}});  // bucket T=128, as tuned
  BOOST_TEST(tuned.compiled().describe().find("source=tuned") != std::string::npos, tuned.compiled().describe());
  BOOST_TEST(tuned.compiled().schedule() == rec.schedule);
  const auto unbound = attn::jit(causal_attention);  // no sizes, no bucket: the default
  BOOST_TEST(unbound.compiled().describe().find("source=default") != std::string::npos);
  const auto other = attn::jit(causal_attention, {.bind = {T = 300}});  // another bucket
  BOOST_TEST(other.compiled().describe().find("source=default") != std::string::npos);
  const auto given = attn::jit(causal_attention, {.bind = {T = 90}, .schedule = "q_tile=24"});
  BOOST_TEST(given.compiled().describe().find("source=given") != std::string::npos);
  // The tuned kernel computes the same attention.
  const auto x = random_tensor({2, 90, 16}, 1), y = random_tensor({2, 90, 16}, 2), z = random_tensor({2, 90, 16}, 3);
  BOOST_TEST(attn::tune::check_output(unbound(x, y, z).values(), tuned(x, y, z).values()).ok);

  write_text(file, "not json");  // a corrupt database: reported, the default used
  const auto fallback = attn::jit(causal_attention, {.bind = {T = 91}});
  BOOST_TEST(fallback.compiled().describe().find("source=default") != std::string::npos);
}

// Autoschedulers run in a child process, each within what is left of their share of the budget:
// one past it is stopped and recorded as timed out (the tuner keeps to its budget); one that
// finishes leaves its kernel in the disk cache, where the tuner loads it and checks it like any other.
BOOST_AUTO_TEST_CASE(autoschedulers_keep_to_their_share_of_the_budget) {
  const attn::detail::private_temp_dir cache;
  struct cache_env {  // the disk kernel cache on, in a folder of this test's, for its scope
    explicit cache_env(const fs::path& p) { setenv("ATTN_CACHE_DIR", p.c_str(), 1); }
    ~cache_env() { setenv("ATTN_CACHE_DIR", "off", 1); }
  } const env(cache.path());
  attn::tune::tune_options o;
  o.sizes = {{"T", 64}};
  o.log = nullptr;
  o.search = false;
  o.autoschedulers = {"Mullapudi2016"};
  o.budget_seconds = 60;
  o.autoscheduler_share = 0.0005;  // 30 ms: far less than any autoscheduler's search and compile
  const auto t0 = std::chrono::steady_clock::now();
  const auto late = attn::tune::tune(causal_attention, o);
  BOOST_TEST(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 30);
  BOOST_REQUIRE(late.candidates.size() == 2u);
  BOOST_TEST((late.candidates[1].status == attn::tune::outcome::timed_out), late.candidates[1].message);
  BOOST_TEST(late.chosen == 0u);

  o.autoscheduler_share = 1;
  const auto done = attn::tune::tune(causal_attention, o);
  BOOST_REQUIRE(done.candidates.size() == 2u);
  BOOST_TEST((done.candidates[1].status == attn::tune::outcome::ok), done.candidates[1].message);
  BOOST_TEST(done.candidates[1].schedule == "auto=Mullapudi2016");
}
