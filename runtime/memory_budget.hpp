#pragma once
// How much memory one call needs, checked against attn::memory_budget() before anything is
// allocated or run. A lowering says which nodes it computes into buffers of their own; the
// generic one materialises the ops the op table marks so (ir::op_traits), a fused one fewer.
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

// The nodes the generic lowering materialises: every node of a materialised op (ir::is_materialised)
// but the pipeline's outputs (the root and, with_weights, ir::weights_softmax), which it writes in place.
std::vector<int> generic_materialised(const ir::graph& g, bool with_weights);

// The nodes the fused lowering materialises: the generic ones but those it computes tile by tile
// (gen::computed_per_tile): each fused attention's softmax and the (queries × keys) nodes of its score.
// `fused_softmaxes`: the weights node (the softmax, or softmax-free f(S)) of each fused attention.
std::vector<int> fused_materialised(const ir::graph& g, std::span<const int> fused_softmaxes);

// `allocated`: outputs the library allocates for the caller (run(), not into()); `materialised`:
// the lowering's intermediates. Every buffer holds 4-byte elements.
memory_estimate estimate_memory(const ir::graph& g, const call_shape& call, std::span<const int> allocated,
                                std::span<const int> materialised);

// memory_error if the total exceeds memory_budget(), or if one intermediate exceeds what Halide
// allocates for one buffer (2^31 - 1 bytes without the large_buffers target feature).
void check_memory(const memory_estimate& e, std::int64_t max_buffer_bytes);

// "1.5 GiB (1610612736 bytes)"
std::string bytes_text(std::int64_t bytes);

}  // namespace attn::detail
