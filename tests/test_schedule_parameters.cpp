// Schedule parameters, said once in each schedule's table (generators/parameter_table.hpp): texts
// print as they always have (the tuning database stores them) and parse back; a bad text fails
// alike for every schedule, naming the parameter, the value given and what is allowed, and the JIT
// reports it as a compile_error; the tuner builds its CPU and GPU candidates through the same
// tables, and every GPU candidate fits a block.
#define BOOST_TEST_MODULE schedule_parameters
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "generators/gpu/flash_gpu_schedule.hpp"
#include "generators/cpu/flash_schedule.hpp"
#include "generators/gpu/matmul_gpu_schedule.hpp"
#include "generators/cpu/matmul_schedule.hpp"
#include "dsl/dsl.hpp"
#include "runtime/errors.hpp"
#include "runtime/jit.hpp"
#include "tuner/search_space.hpp"

namespace {

namespace gen = attn::gen;

// A predicate for BOOST_CHECK_EXCEPTION: the message contains every one of `parts`.
template <class E>
auto message_has(std::vector<std::string> parts) {
  return [parts = std::move(parts)](const E& e) {
    const std::string m = e.what();
    BOOST_TEST_MESSAGE("message: " << m);
    return std::all_of(parts.begin(), parts.end(), [&](const std::string& p) { return m.find(p) != std::string::npos; });
  };
}

// The texts of the default parameter sets and of stored records, byte for byte.
BOOST_AUTO_TEST_CASE(texts_print_as_stored) {
  BOOST_TEST(gen::to_string(gen::flash_schedule{}) ==
             "q_tile=48 kv_tile=256 partial_tile=64 q_unroll=6 kv_vectors=4 vector=16 stage_kv=0 pv_keys=0 row_block=0 pv_rows=0 pack_state=1 "
             "backward_q_tile=128 backward_sweep=1");
  BOOST_TEST(gen::to_string(gen::flash_gpu_schedule{}) ==
             "q_tile=32 kv_tile=32 threads=8 stage_k=1 stage_v=1 shared=0 unroll=0 thread_rows=4 stage_q=1");
  BOOST_TEST(gen::matmul_schedule{}.to_string() == "vector_width=16 vectors=2 rows=12 k_block=0 col_block=0 parallel=1");
  BOOST_TEST(gen::matmul_gpu_schedule{}.to_string() == "threads_x=16 threads_y=16 cols=4 rows=4");

  const std::string record =
      "q_tile=24 kv_tile=256 partial_tile=64 q_unroll=6 kv_vectors=4 vector=16 stage_kv=1 pv_keys=0 row_block=6 pv_rows=0 pack_state=0";
  const gen::flash_schedule cpu = gen::parse_flash_schedule(record, {});
  BOOST_TEST((cpu.stage_kv && !cpu.pack_state));
  BOOST_TEST(gen::to_string(cpu) == record + " backward_q_tile=128 backward_sweep=1");  // a parameter the record predates: its default
  const std::string gpu_record = "q_tile=8 kv_tile=32 threads=8 stage_k=1 stage_v=0 shared=1 unroll=0 thread_rows=4 stage_q=1";
  const gen::flash_gpu_schedule gpu = gen::parse_flash_gpu_schedule(gpu_record, {});
  BOOST_TEST((gpu.shared == gen::flash_gpu_variant::shared_memory));
  BOOST_TEST((gpu.stage_k && !gpu.stage_v && !gpu.unroll));
  BOOST_TEST(gen::to_string(gpu) == gpu_record);
  const std::string tiled_record = "q_tile=32 kv_tile=16 threads=8 stage_k=1 stage_v=1 shared=2 unroll=0 thread_rows=4 stage_q=0";
  const gen::flash_gpu_schedule tiled = gen::parse_flash_gpu_schedule(tiled_record, {});
  BOOST_TEST((tiled.shared == gen::flash_gpu_variant::register_tiles && tiled.thread_rows == 4 && !tiled.stage_q));
  BOOST_TEST(gen::to_string(tiled) == tiled_record);
  // Parameters given in any order, separated by spaces or commas; the others keep the base's.
  const gen::flash_gpu_schedule some = gen::parse_flash_gpu_schedule("unroll=1,q_tile=64", {});
  BOOST_TEST(gen::to_string(some) == "q_tile=64 kv_tile=32 threads=8 stage_k=1 stage_v=1 shared=0 unroll=1 thread_rows=4 stage_q=1");
}

// "<schedule>: <what was given>: <what is allowed>", whichever schedule and whatever is wrong.
BOOST_AUTO_TEST_CASE(bad_texts_fail_alike) {
  struct bad {
    std::function<void()> parse;
    std::vector<std::string> says;
  };
  const std::vector<bad> cases{
      {[] { gen::parse_flash_schedule("q_tile=x", {}); }, {"schedule: q_tile=x: q_tile must be a whole number in [1, 4096]"}},
      {[] { gen::parse_flash_schedule("q_tile=99999999999", {}); }, {"schedule: q_tile=99999999999: q_tile must be"}},
      {[] { gen::parse_flash_schedule("q_tile=", {}); }, {"schedule: q_tile=: q_tile must be"}},
      {[] { gen::parse_flash_schedule("q_tle=3", {}); }, {"schedule: q_tle=3: unknown parameter 'q_tle' (known: q_tile, kv_tile,"}},
      {[] { gen::parse_flash_schedule("stage_kv=2", {}); }, {"schedule: stage_kv=2: stage_kv must be 0 (off) or 1 (on)"}},
      {[] { gen::parse_flash_schedule("kv_tile=100", {}); }, {"schedule: kv_tile=100 vector=16: kv_tile must be a multiple of vector"}},
      {[] { gen::parse_flash_schedule("partial_tile=48", {}); }, {"schedule: partial_tile=48 kv_tile=256 vector=16: partial_tile must divide"}},
      {[] { gen::parse_flash_gpu_schedule("shared=3", {}); },
       {"GPU schedule: shared=3: shared must be 0 (per_thread), 1 (shared_memory) or 2 (register_tiles)"}},
      {[] { gen::parse_flash_gpu_schedule("shared=2 q_tile=30", {}); },
       {"GPU schedule: shared=2 q_tile=30 thread_rows=4: with register tiles (shared=2), q_tile must be a multiple of thread_rows"}},
      {[] { gen::parse_flash_gpu_schedule("kv_tile=20", {}); }, {"GPU schedule: kv_tile=20 threads=8: kv_tile must be a multiple of threads"}},
      {[] { gen::parse_flash_gpu_schedule("threads=32 q_tile=64 kv_tile=64", {}); }, {"GPU schedule: threads=32 q_tile=64: ", "at most 1024"}},
      {[] { gen::matmul_schedule::parse("rows=0"); }, {"matmul schedule: rows=0: rows must be a whole number of at least 1"}},
      {[] { gen::matmul_schedule::parse("rows"); }, {"matmul schedule: rows: rows must be a whole number of at least 1"}},
      {[] { gen::matmul_schedule::parse("tile=4"); }, {"matmul schedule: tile=4: unknown parameter 'tile'"}},
      {[] { gen::matmul_schedule::parse("parallel=2"); }, {"matmul schedule: parallel=2: parallel must be 0 (off) or 1 (on)"}},
      {[] { gen::matmul_gpu_schedule::parse("cols=2000"); }, {"matmul GPU schedule: cols=2000: cols must be a whole number in [1, 1024]"}},
      {[] { gen::matmul_gpu_schedule::parse("threads_x=64 threads_y=32"); }, {"matmul GPU schedule: threads_x=64 threads_y=32: ", "at most 1024"}},
  };
  for (const bad& b : cases) BOOST_CHECK_EXCEPTION(b.parse(), std::invalid_argument, message_has<std::invalid_argument>(b.says));
}

// The JIT checks a schedule before compiling anything: a compile_error with the same message, for
// a CPU target's schedule and a GPU target's.
BOOST_AUTO_TEST_CASE(the_jit_reports_a_bad_schedule_as_a_compile_error) {
  using namespace attn::dsl;
  constexpr auto T = dim<"T">;
  constexpr auto Dh = dim<"Dh", 16>;
  constexpr auto causal_attention =
      combine(softmax(causal(scaled_scores(input<"q">(T, Dh), input<"k">(T, Dh)))), input<"v">(T, Dh));
  BOOST_CHECK_EXCEPTION(attn::jit(causal_attention, {.schedule = "q_tile=x"}), attn::compile_error,
                        message_has<attn::compile_error>({"schedule: q_tile=x: q_tile must be a whole number in [1, 4096]"}));
  BOOST_CHECK_EXCEPTION(attn::jit(causal_attention, {.target = "host-opencl", .schedule = "shared=3"}), attn::compile_error,
                        message_has<attn::compile_error>({"GPU schedule: shared=3: shared must be 0 (per_thread), 1 (shared_memory) or 2 (register_tiles)"}));
}

// The GPU search space: blocks of 32 to 1024 threads, key tiles whole multiples of the threads,
// the shared-memory variants within 48 KiB, every candidate a schedule text that parses back, no
// kernel twice (parameters a variant does not use stay at their defaults), all three variants.
BOOST_AUTO_TEST_CASE(gpu_candidates_fit_a_block) {
  for (const std::int64_t dv : {0, 16, 64, 128}) {
    const attn::tune::attention_sizes a{1024, 1024, dv, 16};
    const std::vector<gen::flash_gpu_schedule> grid = attn::tune::pruned_gpu_grid(a);
    BOOST_TEST(!grid.empty());
    std::set<std::string> texts;
    std::set<gen::flash_gpu_variant> variants;
    for (const gen::flash_gpu_schedule& s : grid) {
      const std::string text = gen::to_string(s);
      const bool per_thread = s.shared == gen::flash_gpu_variant::per_thread;
      const bool tiled = s.shared == gen::flash_gpu_variant::register_tiles;
      const int block = per_thread ? s.q_tile : s.threads * (tiled ? s.q_tile / s.thread_rows : s.q_tile);
      BOOST_TEST((block >= 32 && block <= 1024), text);
      BOOST_TEST(s.kv_tile % s.threads == 0, text);
      if (!per_thread) BOOST_TEST(gen::shared_bytes(s, dv > 0 ? dv : 128, dv > 0 ? dv : 128) <= 48 << 10, text);
      if (!per_thread || dv == 0) BOOST_TEST(!s.unroll, text);
      BOOST_TEST((gen::parse_flash_gpu_schedule(text, {}) == s), text);
      texts.insert(text);
      variants.insert(s.shared);
    }
    BOOST_TEST(texts.size() == grid.size());
    BOOST_TEST(variants.size() == 3u);
    const gen::flash_gpu_schedule d = gen::default_flash_gpu_schedule(dv);
    BOOST_TEST(attn::tune::plausible(d, a));
    // At most 256 threads a block: two blocks fit an SM at the registers a thread may use (test_ptx_spills).
    const int default_block = d.shared == gen::flash_gpu_variant::register_tiles ? d.threads * d.q_tile / d.thread_rows : d.q_tile;
    BOOST_TEST(default_block * gen::cuda_registers_per_thread * 2 <= 65536, gen::to_string(d));
    const std::vector<gen::flash_gpu_schedule> near = attn::tune::neighbours(d, a);
    BOOST_TEST(!near.empty());
    for (const gen::flash_gpu_schedule& n : near) BOOST_TEST((attn::tune::plausible(n, a) && !(n == d)), gen::to_string(n));
  }
}

// The tuner's view, schedule texts: a GPU target's space searches GPU schedules, a CPU target's
// the CPU schedule; each refuses the other's text.
BOOST_AUTO_TEST_CASE(the_tuner_searches_the_targets_schedule) {
  const attn::tune::attention_sizes a{1024, 1024, 64, 16};
  const attn::tune::search_space gpu(true, a), cpu(false, a);
  const std::string gpu_default = gen::to_string(gen::default_flash_gpu_schedule(64));
  const std::string cpu_default = gen::to_string(gen::default_flash_schedule(1024, 1024, 64, 16));
  BOOST_TEST(gpu.grid().size() == attn::tune::pruned_gpu_grid(a).size());
  for (const std::string& t : gpu.grid()) BOOST_CHECK_NO_THROW(gen::parse_flash_gpu_schedule(t, {}));
  BOOST_TEST(!gpu.neighbours(gpu_default).empty());
  for (const std::string& t : gpu.neighbours(gpu_default)) BOOST_CHECK_NO_THROW(gen::parse_flash_gpu_schedule(t, {}));
  BOOST_TEST(cpu.grid().size() == attn::tune::pruned_grid(a).size());
  for (const std::string& t : cpu.grid()) BOOST_CHECK_NO_THROW(gen::parse_flash_schedule(t, {}));
  BOOST_TEST(!cpu.neighbours(cpu_default).empty());
  BOOST_CHECK_THROW(gpu.neighbours(cpu_default), std::invalid_argument);
  BOOST_CHECK_THROW(cpu.neighbours(gpu_default), std::invalid_argument);
}

}  // namespace
