// The tuner: on a small kernel within a few seconds it finishes, chooses the fastest of the
// candidates it re-timed (the default among them) and never a candidate whose output is wrong;
// attn::jit picks up the record it wrote. attn-tune refuses a wrong option with status 2 before any tuning, never
// replaces what it did not write, and sets a bad database of its own aside. (The database file
// itself: test_tuning_db.cpp.)
// ctest runs every test with ATTN_TUNING_DB=off; these tests point it at files of their own.
#define BOOST_TEST_MODULE tuner
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>

#include "dsl/gradient.hpp"
#include "runtime/gradients.hpp"
#include "runtime/jit.hpp"
#include "runtime/private_temp_dir.hpp"
#include "runtime/tuning_db.hpp"
#include "runtime/tuning_key.hpp"
#include "support/reference.hpp"
#include "support/scoped_env.hpp"
#include "support/text_file.hpp"
#include "support/tuning_kernel.hpp"
#include "tuner/output_check.hpp"
#include "tuner/search_space.hpp"
#include "tuner/tuner.hpp"

namespace {

using namespace attn::dsl;
namespace fs = std::filesystem;
using attn::ref::read_text;
using attn::ref::scoped_env;
using attn::ref::write_text;
using tuning_test::causal_attention;
using tuning_test::T;

// attn-tune run with `arguments` (at most 5 minutes): its exit status (128 + the signal if one
// killed it) and what it wrote to stdout and stderr.
struct command_result {
  int status = -1;
  std::string output;
};
command_result attn_tune(const std::string& arguments) {
  const attn::detail::private_temp_dir dir;
  const fs::path out = dir.path() / "output";
  const std::string command = "ATTN_CACHE_DIR=off timeout 300 " ATTN_TUNE_BINARY " " + arguments + " >" + out.string() + " 2>&1";
  const int status = std::system(command.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), read_text(out)};
}

// A tuning run of a few seconds: the smallest case, the default only.
const std::string quick_run = "attention --bind T=8 --bind Dh=16 --no-search --autoschedulers none --budget 1";

// A (2, 90, 16) tensor uniform in [-1, 1], the same for the same seed.
attn::tensor<float> random_tensor(unsigned seed) {
  std::mt19937 rng(seed);
  return attn::ref::random_tensor({2, 90, 16}, rng);
}

}  // namespace

BOOST_AUTO_TEST_CASE(keys_and_buckets) {
  const auto g = to_ir(causal_attention);
  BOOST_TEST(attn::tuning_signature(g, {}) == attn::tuning_signature(g, {.path = attn::lowering::fused}));
  BOOST_TEST(attn::tuning_signature(g, {}) != attn::tuning_signature(g, {.with_weights = true}));
  BOOST_TEST(attn::tuning_signature(g, {}).size() == 16u);
  BOOST_TEST(*attn::shape_bucket(g, {{"T", 600}}) == "Dh=16,H=2,T=1024");
  BOOST_TEST(*attn::shape_bucket(g, {{"T", 1024}}) == "Dh=16,H=2,T=1024");
  BOOST_TEST(!attn::shape_bucket(g, {}).has_value());

  // The same kernel with Dh fixed in the expression or bound when compiling: one key.
  constexpr auto Dh_run_time = dim<"Dh">;
  constexpr auto q = input<"q">(tuning_test::H, T, Dh_run_time);
  constexpr auto k = input<"k">(tuning_test::H, T, Dh_run_time);
  constexpr auto v = input<"v">(tuning_test::H, T, Dh_run_time);
  const auto bound = to_ir(combine(softmax(causal(scaled_scores(q, k))), v));
  BOOST_TEST(attn::tuning_signature(bound, {}) == attn::tuning_signature(g, {}));
  BOOST_TEST(*attn::shape_bucket(bound, {{"T", 1024}, {"Dh", 16}}) == *attn::shape_bucket(g, {{"T", 1024}}));
  BOOST_TEST(*attn::shape_bucket(bound, {{"T", 1024}, {"Dh", 32}}) != *attn::shape_bucket(g, {{"T", 1024}}));
  BOOST_TEST(!attn::shape_bucket(bound, {{"T", 1024}}).has_value());
  // Another kernel never shares a key: no mask, another modifier, another tensor's name.
  for (const std::string& other : {attn::tuning_signature(to_ir(combine(softmax(scaled_scores(q, k)), v)), {}),
                                  attn::tuning_signature(to_ir(combine(softmax(causal(softcap(scaled_scores(q, k), 5.0f))), v)), {}),
                                  attn::tuning_signature(to_ir(combine(softmax(causal(scaled_scores(q, k))), input<"w">(tuning_test::H, T, Dh_run_time))), {})})
    BOOST_TEST(other != attn::tuning_signature(g, {}));
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

// One tuning run of 5 seconds serves the tests below, whichever of them runs first: its wall time
// is measured where it runs.
struct timed_tuning {
  attn::tune::tune_options options;
  attn::tune::tune_result result;
  double wall_s = 0;
};

const timed_tuning& small_run() {
  static const timed_tuning r = [] {
    timed_tuning t;
    t.options.sizes = {{"T", 100}};
    t.options.budget_seconds = 5;
    t.options.log = nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    t.result = attn::tune::tune(causal_attention, t.options);
    t.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return t;
  }();
  return r;
}

BOOST_AUTO_TEST_CASE(tuner_finishes_in_budget_and_chooses_the_fastest_it_retimed) {
  const auto& [o, r, wall_s] = small_run();
  BOOST_TEST(wall_s < o.budget_seconds + 15);  // a compile started before the deadline may finish after it
  BOOST_TEST(r.bucket == "Dh=16,H=2,T=128");
  BOOST_REQUIRE(r.candidates.size() >= 2u);
  BOOST_REQUIRE(r.chosen < r.candidates.size());
  // The default was measured, found right, and re-timed beside the leaders.
  const attn::tune::candidate& def = r.default_candidate();
  BOOST_TEST(def.origin == "default");
  BOOST_TEST((def.status == attn::tune::outcome::ok), def.message);
  BOOST_TEST(!def.times.empty());
  BOOST_TEST(!def.final_times.empty());
  // Only the default and at most `leaders` others are re-timed, each one measured and right; the
  // chosen one is among them, and none of them has a lower median in the re-timing.
  std::size_t retimed = 0;
  for (const attn::tune::candidate& c : r.candidates) {
    if (c.final_times.empty()) continue;
    ++retimed;
    BOOST_TEST((c.status == attn::tune::outcome::ok), c.schedule);
    BOOST_TEST(!c.times.empty(), c.schedule);
    BOOST_TEST(r.best().seconds() <= c.seconds(), "chosen " << r.best().schedule << " is slower than " << c.schedule);
  }
  BOOST_TEST(retimed >= 1u);
  BOOST_TEST(retimed <= std::size_t(o.leaders) + 1);
  BOOST_TEST(!r.best().final_times.empty());
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
  std::size_t wrong = 0;
  for (std::size_t i = 1; i < r.candidates.size(); ++i) {
    BOOST_TEST((r.candidates[i].status == attn::tune::outcome::wrong || r.candidates[i].status == attn::tune::outcome::skipped));
    wrong += r.candidates[i].status == attn::tune::outcome::wrong;
  }
  BOOST_TEST(wrong >= 1u);  // the check above saw a wrong candidate, not only skipped ones
}

BOOST_AUTO_TEST_CASE(jit_uses_the_record_when_dims_are_bound) {
  const attn::detail::private_temp_dir dir;
  const fs::path file = dir.path() / "tuning.json";
  const attn::tune::tune_result& r = small_run().result;
  auto rec = attn::tune::make_record(r, small_run().options);
  // The record is the chosen candidate's: its schedule, its time and the default's, its bucket.
  BOOST_TEST(rec.schedule == r.best().schedule);
  BOOST_TEST(rec.median_ms == r.best().seconds() * 1e3);
  BOOST_TEST(rec.default_ms == r.default_candidate().seconds() * 1e3);
  BOOST_TEST(rec.bucket == r.bucket);
  BOOST_TEST(rec.sizes == "T=100");
  rec.schedule = "q_tile=12 kv_tile=32 partial_tile=32 q_unroll=3 kv_vectors=2 vector=16 stage_kv=0 pv_keys=0 row_block=0 pv_rows=0 "
                 "pack_state=1 backward_q_tile=48 backward_sweep=0";  // recognisable
  attn::write_tuning_records(file, {rec});
  const scoped_env env("ATTN_TUNING_DB", file.c_str());

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
  const auto x = random_tensor(1), y = random_tensor(2), z = random_tensor(3);
  BOOST_TEST(attn::tune::check_output(unbound(x, y, z).values(), tuned(x, y, z).values()).ok);

  write_text(file, "not json");  // a corrupt database: reported, the default used
  const auto fallback = attn::jit(causal_attention, {.bind = {T = 91}});
  BOOST_TEST(fallback.compiled().describe().find("source=default") != std::string::npos);
}

// The fused backward's tiles are searched too (the forward's parameters stay the default's), and
// jit_gradients uses the record for the gradient graph's signature.
BOOST_AUTO_TEST_CASE(the_backward_is_tuned_and_its_record_used) {
  const attn::ir::graph backward = attn::ir::gradient(to_ir(causal_attention));
  attn::tune::tune_options o;
  o.sizes = {{"T", 100}};
  o.budget_seconds = 6;
  o.autoschedulers = {};
  o.log = nullptr;
  const attn::tune::tune_result r = attn::tune::tune(backward, o);
  BOOST_TEST(r.candidates.size() >= 2u);
  const attn::gen::flash_schedule def = attn::gen::parse_flash_schedule(r.default_candidate().schedule, {});
  for (const attn::tune::candidate& c : r.candidates) {
    const attn::gen::flash_schedule s = attn::gen::parse_flash_schedule(c.schedule, {});
    BOOST_TEST((s.q_tile == def.q_tile && s.q_unroll == def.q_unroll && s.vector == def.vector), c.schedule);
  }
  BOOST_TEST(attn::tune::pruned_backward_grid(def, {100, 100, 16, def.vector}).size() >= 4u);

  const attn::detail::private_temp_dir dir;
  const fs::path file = dir.path() / "tuning.json";
  auto rec = attn::tune::make_record(r, o);
  attn::gen::flash_schedule recognisable = def;
  recognisable.backward_q_tile = 32;
  rec.schedule = to_string(recognisable);
  attn::write_tuning_records(file, {rec});
  const scoped_env env("ATTN_TUNING_DB", file.c_str());
  const auto tuned = attn::jit_gradients(causal_attention, {.bind = {T = 90}});
  BOOST_TEST(tuned.describe().find("source=tuned") != std::string::npos, tuned.describe());
  BOOST_TEST(tuned.compiled().schedule().find("backward_q_tile=32") != std::string::npos, tuned.compiled().schedule());
  const auto forward = attn::jit(causal_attention, {.bind = {T = 90}});  // another signature: not the backward's record
  BOOST_TEST(forward.compiled().describe().find("source=default") != std::string::npos, forward.compiled().describe());
}

// The tuner's inputs are in each tensor's element type: a bfloat16 key/value cache is tuned as declared.
BOOST_AUTO_TEST_CASE(sixteen_bit_tensors_are_tuned_in_their_type) {
  constexpr auto kb = input<"k", bf16>(tuning_test::H, T, tuning_test::Dh);
  constexpr auto vb = input<"v", bf16>(tuning_test::H, T, tuning_test::Dh);
  attn::tune::tune_options o;
  o.sizes = {{"T", 64}};
  o.budget_seconds = 2;
  o.autoschedulers = {};
  o.search = false;
  o.log = nullptr;
  const attn::tune::tune_result r = attn::tune::tune(combine(softmax(causal(scaled_scores(tuning_test::q, kb))), vb), o);
  BOOST_TEST((r.default_candidate().status == attn::tune::outcome::ok), r.default_candidate().message);
  // Every tensor bfloat16, so the output too: candidates that round a sum to its neighbour are right.
  o.search = true;
  o.budget_seconds = 4;
  constexpr auto qb = input<"q", bf16>(tuning_test::H, T, tuning_test::Dh);
  const attn::tune::tune_result all = attn::tune::tune(combine(softmax(causal(scaled_scores(qb, kb))), vb), o);
  BOOST_TEST(all.candidates.size() > 1u);
  for (const attn::tune::candidate& c : all.candidates)
    BOOST_TEST((c.status != attn::tune::outcome::wrong && c.status != attn::tune::outcome::run_failed), c.schedule << ": " << c.message);
}

// Timed at the batch asked for: every batched tensor, lengths too, has the batch dim; the record
// says so (for humans: every batch runs the same kernel, so the key has no batch).
BOOST_AUTO_TEST_CASE(tuned_at_the_batch_asked_for) {
  const auto y = combine(softmax(key_padding(causal(scaled_scores(tuning_test::q, tuning_test::k)), lengths<"len">)), tuning_test::v);
  attn::tune::tune_options o;
  o.sizes = {{"T", 40}};
  o.batch = 3;
  o.budget_seconds = 2;
  o.autoschedulers = {};
  o.search = false;
  o.log = nullptr;
  const attn::tune::kernel_inputs in = attn::tune::random_inputs(attn::dsl::to_ir(y), o.sizes, 1, o.batch);
  BOOST_REQUIRE(in.views.size() == 4u);
  BOOST_TEST((in.views[0].rank == 4 && in.views[0].size(0) == 3));
  BOOST_TEST((in.views[3].rank == 1 && in.views[3].size(0) == 3));
  const attn::tune::tune_result r = attn::tune::tune(y, o);
  BOOST_TEST((r.default_candidate().status == attn::tune::outcome::ok), r.default_candidate().message);
  BOOST_TEST(attn::tune::make_record(r, o).sizes == "T=40,batch=3");
  const command_result cli = attn_tune(quick_run + " --batch 3 --dry-run");
  BOOST_TEST(cli.status == 0, cli.output);
  BOOST_TEST(cli.output.find("T=8 batch=3") != std::string::npos, cli.output);
}

// A GPU target whose device this machine has (OpenCL: PoCL runs it on the CPU) is tuned like a
// CPU: its fused GPU schedule's parameters, recorded for that target, and the fused backward's
// tiles (the gradient graph's record); autoschedulers (CPU schedules only) are refused.
BOOST_AUTO_TEST_CASE(attn_tune_tunes_a_gpu_target_its_device_runs) {
  if (!Halide::host_supports_target_device(Halide::Target("host-opencl"))) {
    BOOST_TEST_MESSAGE("skipped: no OpenCL device here");
    return;
  }
  const attn::detail::private_temp_dir dir;
  const fs::path db = dir.path() / "tuning.json";
  const std::string gpu_run = "attention --bind T=64 --bind Dh=16 --target host-opencl --no-search --budget 20 --schedule 'q_tile=16'";
  const command_result r = attn_tune(gpu_run + " --db " + db.string());
  BOOST_TEST(r.status == 0, r.output);
  BOOST_TEST(r.output.find("autoschedulers: none on a GPU target") != std::string::npos, r.output);
  BOOST_TEST(r.output.find("(0 wrong, 0 failed)") != std::string::npos, r.output);
  const auto now = attn::read_tuning_db(db);
  BOOST_REQUIRE(now.records.size() == 1u);
  BOOST_TEST(now.records.front().target.find("opencl") != std::string::npos, now.records.front().target);
  const command_result g = attn_tune(gpu_run + " --gradients --db " + db.string());
  BOOST_TEST(g.status == 0, g.output);
  BOOST_TEST(g.output.find("(0 wrong, 0 failed)") != std::string::npos, g.output);
  BOOST_TEST(attn::read_tuning_db(db).records.size() == 2u);
  const command_result a = attn_tune(gpu_run + " --autoschedulers Li2018 --dry-run");
  BOOST_TEST(a.status == 2, a.output);
  BOOST_TEST(a.output.find("CPU targets only") != std::string::npos, a.output);
}

// Autoschedulers run in a child process, each within what is left of their share of the budget:
// one past it is stopped and recorded as timed out (the tuner keeps to its budget); one that
// finishes leaves its kernel in the disk cache, where the tuner loads it and checks it like any other.
BOOST_AUTO_TEST_CASE(autoschedulers_keep_to_their_share_of_the_budget) {
  const attn::detail::private_temp_dir cache;
  const scoped_env env("ATTN_CACHE_DIR", cache.path().c_str());  // the disk kernel cache on, in a folder of this test's
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

// Every option is checked before anything runs (--list: without the checks, nothing would stop
// the run here), with a message naming the option and status 2, never an uncaught exception.
BOOST_AUTO_TEST_CASE(attn_tune_refuses_wrong_options_with_status_2) {
  const std::vector<std::pair<std::string, std::string>> wrong{
      {"--autoschedulers Bogus --list", "Bogus"},
      {"--autoschedulers none,Li2018 " + quick_run + " --dry-run", "'none' cannot be given"},
      {"--budget nan --list", "'nan'"},
      {"--budget inf --list", "'inf'"},
      {"--budget -1 --list", "'-1'"},
      {"--budget 0 --list", "'0'"},
      {"--budget 1e9 --list", "'1e9'"},
      {"--batch 0 --list", "--batch"},
      {"attention --bind T=0 --bind Dh=16 --list", "T = 0"},
      {"attention --bind T=99999999999999999999 --bind Dh=16 --list", "whole number"},
      {"attention --bind T=8 --bind Dh=16 --bind Q=3 --list", "no kernel asked for has that dim"},
      {"attention --bind T=8 --list", "bind every run-time dim (--bind NAME=SIZE): Dh"},
      {"no_such_kernel --list", "no_such_kernel"},
      {"--target x86-64-linux-nonsense --list", "not a Halide target"},
      {"--target host-cuda --list", "no device on this machine runs this GPU target"},
      {"--schedule q_tle=3 --list", "unknown parameter 'q_tle'"},
      {"--schedule q_tile=x --list", "whole number"},
      {"--schedule auto=Bogus --list", "Bogus"},
  };
  for (const auto& [arguments, message] : wrong) {
    const command_result r = attn_tune(arguments);
    BOOST_TEST(r.status == 2, arguments << ": " << r.output);
    BOOST_TEST(r.output.find(message) != std::string::npos, arguments << ": " << r.output);
  }
  BOOST_TEST(attn_tune("--list").status == 0);
}

// --db naming a directory, a FIFO or another program's file: refused before tuning, untouched.
BOOST_AUTO_TEST_CASE(attn_tune_replaces_only_its_own_database) {
  const attn::detail::private_temp_dir dir;
  const fs::path folder = dir.path() / "folder.json", fifo = dir.path() / "fifo.json", foreign = dir.path() / "foreign.json";
  fs::create_directory(folder);
  write_text(folder / "keep", "mine");
  BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  write_text(foreign, "{\"format\": null, \"records\": []}");
  for (const fs::path& db : {folder, fifo, foreign}) {
    const command_result r = attn_tune(quick_run + " --db " + db.string());
    BOOST_TEST(r.status == 2, db << ": " << r.output);
    BOOST_TEST(r.output.find("nothing written") != std::string::npos, r.output);
    BOOST_TEST(!fs::exists(db.string() + ".bad"), db);
  }
  BOOST_TEST(read_text(folder / "keep") == "mine");
  BOOST_TEST(fs::is_fifo(fifo));
  BOOST_TEST(read_text(foreign) == "{\"format\": null, \"records\": []}");
}

// A bad database of attnforge's (here a version past 32 bits, which once read as 1) is moved
// aside with one warning and the new record written.
BOOST_AUTO_TEST_CASE(attn_tune_sets_aside_a_bad_database_and_records) {
  const attn::detail::private_temp_dir dir;
  const fs::path db = dir.path() / "tuning.json";
  const std::string bad = "{\"format\": \"attnforge-tuning\", \"version\": 4294967297, \"records\": []}";
  write_text(db, bad);
  const command_result r = attn_tune(quick_run + " --db " + db.string());
  BOOST_TEST(r.status == 0, r.output);
  BOOST_TEST(read_text(db.string() + ".bad") == bad);
  const auto now = attn::read_tuning_db(db);
  BOOST_TEST(now.problem.empty(), now.problem);
  BOOST_TEST(now.records.size() == 1u);
  std::size_t warnings = 0;
  for (std::size_t at = 0; (at = r.output.find("attnforge: tuning database", at)) != std::string::npos; ++at) ++warnings;
  BOOST_TEST(warnings == 1u, r.output);
  BOOST_TEST(r.output.find("moved to " + db.string() + ".bad") != std::string::npos, r.output);
}
