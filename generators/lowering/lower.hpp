#pragma once
// ir::graph -> a Halide pipeline. Generic over expressions: each IR op has one lowering rule,
// and nothing here knows about a named variant. The parts: generic_lowering.hpp (the rule of
// each op), fused_lowering.hpp (attention handed to the fused algorithm), nonfinite_lowering.hpp
// (masked scores, the safe softmax), lse_lowering.hpp (the log-sum-exp output); what they share
// is lowering_state.hpp.
//
// Layout: a row-major IR shape (d0, ..., dn) becomes Halide args (dn, ..., d0, batch):
// innermost first, batch outermost. `halide_args` is the one place that translation happens.
#include <map>
#include <optional>
#include <string>
#include <vector>
#include <Halide.h>
#include "dsl/ir.hpp"
#include "generators/fused/flash_algorithm.hpp"
#include "generators/fused/fused_backward.hpp"
#include "generators/gpu/flash_gpu_schedule.hpp"
#include "generators/cpu/flash_schedule.hpp"
#include "generators/lowering/stage.hpp"

namespace attn::gen {

// Which fused products run on bfloat16 dot products (lowering_options::bf16_dot_products).
struct bf16_products {
  bool scores = false;  // Q·Kᵀ
  bool values = false;  // P·V, P rounded to bfloat16
  // Q·Kᵀ on them only for more queries than this (fewer: partial dot products in float32,
  // generic_lowering::few_query_dots); 0: for any number.
  int scores_beyond = 0;
};

struct lowered {
  std::vector<Halide::ImageParam> params;  // one per terminal, in call order, each with a batch dim
  Halide::Func output;                     // args: innermost first, then batch (if batched)
  std::vector<Halide::Func> more_outputs;  // ir::graph::more_outputs, in order (a gradient graph's)
  Halide::Func weights;                    // ir::weights_softmax; undefined if there is none
  bool output_batched = false, weights_batched = false;
  // With lowering_options::with_lse: the one softmax's log-sum-exp per row, (rows innermost
  // first..., batch): the softmax's args without the key axis. -inf for a row without a kept key.
  Halide::Func lse;
  bool lse_batched = false;

  // What the schedule needs to know about each materialised Func.
  using stage = gen::stage;
  std::vector<stage> stages;
  // The IR nodes computed into buffers of their own but the outputs computed in place (the
  // caller's): what a call allocates besides its outputs (the memory budget). The generic
  // lowering's attention weights are among them: an output only where the caller asks for them.
  std::vector<int> materialised;
  // Attentions lowered to the fused pipeline (each replaces a softmax and its combine).
  std::vector<flash_funcs> flash;
  // Backwards of attentions lowered to the fused backward (fused_backward.hpp), in a gradient graph.
  std::vector<backward_funcs> backward;
  flash_schedule tiles{};  // the fused pipeline's schedule, as lower_and_schedule chose it
  bf16_products bf16_dot_products;
  std::optional<flash_gpu_schedule> gpu;  // for a GPU target: its fused schedule (tiles unused)
};

// Run-time dims fixed at compile time (jit_options::bind).
using bound_dims = std::map<std::string, std::int64_t, std::less<>>;

// fused: lower every attention found on the IR (attention_pattern.hpp) to the fused pipeline,
// with the tiles of `tiles`, and in a gradient graph on a CPU the backward of its attention
// (backward_pattern.hpp); otherwise (or where none is found) everything is generic.
struct lowering_options {
  bool fused = false;
  flash_schedule tiles{};
  bool default_tiles = false;  // tiles are the default: lower_and_schedule may fit them to the masks (fitted_to_mask())
  // Parameters given as text (jit_options::schedule, flash_schedule.hpp): they replace those of the
  // default fitted to the masks, the others keep it (`tiles` is then that default, unfitted).
  std::string given_tiles;
  bool with_lse = false;       // define lowered::lse (the graph has exactly one softmax: the caller checks)
  // The CPU target has bfloat16 dot products (AVX512-BF16's vdpbf16ps): a fused tile's product of
  // two bfloat16 tensors (Q·Kᵀ) runs on them (generic_lowering: paired products).
  bool bf16_dot_products = false;
  std::optional<flash_gpu_schedule> gpu;  // a GPU target's fused schedule: its tiles replace `tiles`
};

lowered lower(const ir::graph& g, const bound_dims& bound, const lowering_options& options = {});

// A schedule that moves an output Func's result into another Func (a product's stored copy) makes
// that one the output.
void replace_output(lowered& l, const Halide::Func& old, const Halide::Func& now);

// Row-major indices (outermost first) -> Halide argument order (innermost first), then batch.
std::vector<Halide::Expr> halide_args(const std::vector<Halide::Expr>& row_major, const Halide::Expr& batch, bool batched);

}  // namespace attn::gen
