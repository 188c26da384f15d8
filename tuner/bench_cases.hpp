#pragma once
// The CPU benchmark's attention cases (bench/attention_bench.cpp), by name, for attn-tune:
// H = 8 heads, q, k, v of shape (H, T, Dh), T bound at run time, Dh ∈ {64, 128}.
#include <string>
#include <vector>
#include "dsl/ir.hpp"

namespace attn::tune {

struct bench_case {
  std::string name;
  ir::graph graph;
  double flops = 0;  // per call at the given T: 4·Dh·H per kept (query, key) pair, as the benchmark counts
};

const std::vector<std::string>& bench_case_names();  // full, causal, sliding_window_256, alibi_causal, softcap_causal

// Throws std::invalid_argument for an unknown name or a Dh other than 64 or 128.
bench_case make_bench_case(const std::string& name, std::int64_t T, std::int64_t Dh);

}  // namespace attn::tune
