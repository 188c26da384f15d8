#pragma once
// What the parts of the lowering share (lower.cpp makes one per call of lower()): the graph and
// what it is lowered with, the attentions found on it, the pipeline being built, and where the
// generic rules are evaluated inside a fused attention's tiles.
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>
#include <Halide.h>
#include "generators/fused/attention_pattern.hpp"
#include "generators/lowering/lower.hpp"

namespace attn::gen {

// While a fused attention is lowered (fused_lowering.hpp): how the generic rules read inside its
// tiles. Each field is set for the time its attention's callbacks run, then restored.
struct tile_context {
  const ir::node* weights = nullptr;       // evaluating a fused score: its weights (queries × keys)
  std::vector<stage>* pairwise = nullptr;  // ... and where its per-pair Funcs go, one fresh copy per use
  Halide::Expr few_queries;                // lowering a fused attention: flash_problem::few_queries
  Halide::Expr queries;                    // ... and its number of queries (flash_problem::nq)
  Halide::Expr paired_dots;                // set by a paired product that runs as dots where this holds (flash_funcs::paired_dots)
  bool keys_inside = false;                // reading V at keys of full tiles: promised, not clamped
  std::set<int> transparent;               // masks evaluated as a fused score's `keep`, not as -inf
  // The fused backward on a CPU: each per-tile node's Func made once per pass and shared by its
  // uses (null: one per use, as the forward and a GPU's backward make them), and nodes whose
  // values the tiles compute their own way (P from the saved log-sum-exp).
  std::map<int, Halide::Func>* per_tile = nullptr;
  std::map<int, std::function<Halide::Expr(const std::vector<Halide::Expr>&)>> given;
  // ... where defined, the numbers of queries and keys: a stored pair node's Func is 0 past them
  // (the backward's tiles pass the last query and key, and its products read the pairs there).
  Halide::Expr stored_queries, stored_keys;
  // Per-tile products read their right operand (Kᵀ) at keys promised inside [0, max(N_K, kv_tile)):
  // true where the tiles' first keys are clamped so (the forward), false where tiles run past the last key.
  bool keys_clamped = true;
};

// The Halide type of a tensor stored in element type e.
Halide::Type stored_type(ir::element e);
// A float32 value as stored in type t: rounded to nearest, ties to even (attn::bfloat16's bits).
Halide::Expr stored_as(Halide::Type t, const Halide::Expr& x);

struct lowering_state {
  lowering_state(const ir::graph& g, const bound_dims& bound, const lowering_options& options);

  const ir::graph& g;
  const bound_dims& bound;
  const lowering_options& options;
  std::map<int, attention_match> fused;         // attentions lowered to the fused pipeline, by combine node
  std::map<int, attention_match> softmax_free;  // softmax-free attentions, fused or not, by combine node
  std::set<std::string_view> tiled_dims;        // query and key dims of the fused attentions
  std::set<int> lse_of;                         // fused attentions (by combine) whose log-sum-exp a fused backward reads
  std::map<int, Halide::ImageParam> params;     // by terminal node
  std::map<int, Halide::Func> funcs;            // by node: the materialised ones, computed once
  // By modifier node and the query and key dims of the scores it reads: its values per offset
  // kv - q (and head), offset_tables.hpp.
  std::map<std::tuple<int, std::string_view, std::string_view>, Halide::Func> offset_tables;
  std::map<std::pair<int, std::size_t>, Halide::Func> pairs;  // by bfloat16 tensor and paired dim: its copy in pairs (generic_lowering::pairs_of)
  Halide::Var batch{"batch"};
  int count = 0;  // numbers the Funcs: names are unique in a pipeline
  lowered out;
  tile_context tile;

  // A new Func for node n, with one Var per dim of n (row-major); its name starts with `what`.
  // Float32, or the type given.
  std::pair<Halide::Func, std::vector<Halide::Var>> new_func(const std::string& what, const ir::node& n,
                                                              Halide::Type type = Halide::Float(32));
  // The terminal's element at `at` (Halide's argument order), a bfloat16 or float16 one as float32.
  Halide::Expr read(int terminal, const std::vector<Halide::Expr>& at) const;
  // Row-major Vars of a node -> its Func's args (halide_args for Vars).
  std::vector<Halide::Var> halide_vars(const std::vector<Halide::Var>& row_major, bool batched) const;
  // Node n's Func args at a row-major index.
  std::vector<Halide::Expr> args_of(const ir::node& n, const std::vector<Halide::Expr>& row_major) const;
  // The extent of a dim: static, bound at jit time, or read off the first tensor that has it.
  Halide::Expr extent(std::string_view name, std::int64_t size) const;
  // The batch's size, read off the first batched tensor.
  Halide::Expr batch_extent() const;
  // A node's dim sizes known when compiling (static or bound), in Halide order; 0 for run-time ones.
  std::vector<std::int64_t> static_extents(const ir::node& n) const;
  // Index a child of rank <= parent's: it takes the trailing indices; size-1 axes read index 0.
  std::vector<Halide::Expr> broadcast_index(int child, const std::vector<Halide::Expr>& idx) const;
};

// A matrix operand's leading (batch-like) dims, aligned from the right against the output's.
std::vector<Halide::Expr> lead_index(const std::vector<ir::dim>& operand, const std::vector<Halide::Expr>& lead);

inline std::vector<Halide::Expr> as_exprs(const std::vector<Halide::Var>& v) { return {v.begin(), v.end()}; }

}  // namespace attn::gen
