#pragma once
// How much memory one call needs, checked against attn::memory_budget() before anything is
// allocated or run. The lowering says which nodes it computes into buffers of their own
// (gen::lowered::materialised).
#include <cstdint>
#include <span>
#include <string>
#include <vector>
#include "dsl/ir.hpp"
#include "tensor_checks.hpp"

namespace attn::detail {

struct memory_need {
  std::string what;        // "output (2, 512, 64)", "intermediate softmax (2, 512, 512)"
  std::int64_t bytes = 0;  // saturates at INT64_MAX
  bool intermediate = false;
};

struct memory_estimate {
  std::vector<memory_need> parts;
  std::int64_t total = 0;  // saturating sum of the parts
};

// `allocated`: outputs the library allocates for the caller (run(), not into()); `materialised`:
// the lowering's intermediates (gen::lowered::materialised, less the outputs the caller asked
// for). Every buffer holds 4-byte elements.
memory_estimate estimate_memory(const ir::graph& g, const call_shape& call, std::span<const int> allocated,
                                std::span<const int> materialised);

// memory_error if the total exceeds memory_budget(), or if one intermediate exceeds what Halide
// allocates for one buffer (2^31 - 1 bytes without the large_buffers target feature).
void check_memory(const memory_estimate& e, std::int64_t max_buffer_bytes);

// "1.5 GiB (1610612736 bytes)"
std::string bytes_text(std::int64_t bytes);

}  // namespace attn::detail
