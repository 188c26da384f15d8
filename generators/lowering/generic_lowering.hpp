#pragma once
// The generic lowering: one rule per IR op. An elementwise or layout op is an expression at an
// index (value()); an op the op table marks materialised (ir::op_traits) is a Func of its own
// (func()), or, for a fused attention's combine, the fused pipeline's output (fused_lowering.hpp).
#include <cstddef>
#include <vector>
#include <Halide.h>
#include "generators/fused/attention_pattern.hpp"
#include "generators/lowering/lowering_state.hpp"

namespace attn::gen {

// What the placeholders stand for inside a mask predicate or score modifier.
struct placeholders {
  Halide::Expr score, q_idx, kv_idx, head;
  // A modifier's: the node whose pairs q_idx and kv_idx index (its last two dims), so that its terms
  // of kv - q are tabulated (offset_tables.hpp). Null in a mask's predicate: the tiles' bounds
  // read its formula (mask_bounds.hpp).
  const ir::node* scores = nullptr;
};

class generic_lowering {
 public:
  explicit generic_lowering(lowering_state& s) : s_(s) {}

  // The value of node i at a row-major index (batch implied by lowering_state::batch).
  Halide::Expr value(int i, const std::vector<Halide::Expr>& idx, const placeholders& ph);
  // Operand k of node n, at n's row-major index (broadcast to the operand's rank).
  Halide::Expr arg(const ir::node& n, std::size_t k, const std::vector<Halide::Expr>& idx, const placeholders& ph);
  // The placeholders of a mask predicate or modifier on node n's scores at idx, the score being s.
  placeholders score_placeholders(const ir::node& n, const std::vector<Halide::Expr>& idx, Halide::Expr s) const;
  // A materialised node's Func: computed once, or inside a fused tile once per use (computed_per_tile).
  Halide::Func func(int i);
  // Softmax-free attention: does every mask on the score's path (attention_match::chain) keep
  // the pair at idx (the weights' index)? Each predicate is read at its mask's own index.
  Halide::Expr kept_by_chain(const attention_match& m, const std::vector<Halide::Expr>& idx);
  // () true when every element of node i is finite (a weighted product's check of its right operand).
  Halide::Func all_finite(int i);
  // A bfloat16 tensor in pairs of its row-major dim `paired` (one of its last two): pairs_of in
  // generic_lowering.cpp.
  Halide::Func pairs_of(int tensor, std::size_t paired);
  // Is node i a bfloat16 input or weight of two dims or more?
  bool bf16_tensor(int i) const;
  // The node that node i reads through repeat_heads (GQA, MQA), i itself if none; with `lead`
  // (node i's index in its dims before the last two, as lead_index gives it), that index mapped to it.
  int tensor_behind_repeats(int i, std::vector<Halide::Expr>* lead = nullptr) const;

 private:
  bool reads_float_data(int i) const;
  std::vector<Halide::Expr> past_the_end_clamped(const ir::node& n, std::vector<Halide::Expr> idx) const;
  bool runs_paired(const ir::node& n) const;
  Halide::RDom define_paired_product(const ir::node& n, Halide::Func& f, const std::vector<Halide::Expr>& idx, stage& st);
  Halide::Func define_pairs(int tensor, std::size_t paired, Halide::Func f);
  bool uses_score(int i) const;
  Halide::Expr offset_table_value(int i, const placeholders& ph);
  Halide::Expr divided(const ir::node& n, const Halide::Expr& x, const Halide::Expr& y) const;
  void define_transpose(const ir::node& n, Halide::Func& f, const std::vector<Halide::Expr>& idx);
  Halide::Expr right_operand(const ir::node& n, const std::vector<Halide::Expr>& ib, stage& st);
  Halide::Expr left_operand(const ir::node& n, const std::vector<Halide::Expr>& ia, stage& st);
  int few_query_lanes(const ir::node& n) const;
  Halide::Expr split_rows(const ir::node& n, const std::vector<Halide::Expr>& ia, int lanes, stage& st);
  Halide::Expr few_query_dots(const ir::node& n, const std::vector<Halide::Expr>& idx, std::vector<Halide::Expr> ia,
                              const std::vector<Halide::Expr>& ib, int lanes, stage& st);
  Halide::RDom define_product(const ir::node& n, Halide::Func& f, const std::vector<Halide::Expr>& idx, stage& st);
  void define_softmax(const ir::node& n, Halide::Func& f, const std::vector<Halide::Var>& vars, stage& st);
  void define_sum_to(const ir::node& n, Halide::Func& f, const std::vector<Halide::Expr>& idx);
  void define_sum_groups(const ir::node& n, Halide::Func& f, const std::vector<Halide::Expr>& idx);
  Halide::Func define_scatter_add(const ir::node& n, Halide::Func& f, const std::vector<Halide::Expr>& idx);

  lowering_state& s_;
  bool tabulating_ = false;  // defining an offset table: its nodes evaluated in place
};

}  // namespace attn::gen
