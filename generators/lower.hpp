#pragma once
// ir::graph -> a Halide pipeline. Generic over expressions: each IR op has one lowering rule,
// and nothing here knows about a named variant.
//
// Layout: a row-major IR shape (d0, ..., dn) becomes Halide args (dn, ..., d0, batch):
// innermost first, batch outermost. `halide_args` is the one place that translation happens.
#include <map>
#include <string>
#include <vector>
#include <Halide.h>
#include "dsl/ir.hpp"

namespace attn::gen {

struct lowered {
  std::vector<Halide::ImageParam> params;  // one per terminal, in call order, each with a batch dim
  Halide::Func output;                     // args: innermost first, then batch (if batched)
  Halide::Func weights;                    // the outermost softmax; undefined if there is none
  bool output_batched = false, weights_batched = false;

  // What the schedule needs to know about each materialised Func.
  struct stage {
    Halide::Func func;
    std::vector<Halide::Var> vars;  // innermost first, batch last
    enum kind_t { product, softmax_row, layout } kind;
    Halide::Func row_max, row_exp, row_sum;  // softmax helpers, computed per row
    Halide::RDom reduction;                   // products: the contracted dim
    std::vector<std::int64_t> extents;        // per var, as vars: the size if fixed when compiling, else 0
  };
  std::vector<stage> stages;
};

// Run-time dims fixed at compile time (jit_options::bind).
using bound_dims = std::map<std::string, std::int64_t, std::less<>>;

lowered lower(const ir::graph& g, const bound_dims& bound);

// Row-major indices (outermost first) -> Halide argument order (innermost first), then batch.
std::vector<Halide::Expr> halide_args(const std::vector<Halide::Expr>& row_major, const Halide::Expr& batch, bool batched);

}  // namespace attn::gen
