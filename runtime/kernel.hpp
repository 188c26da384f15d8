#pragma once
// A compiled kernel, independent of the expression's C++ type: the IR, checks, and a call.
// Halide stays behind the pimpl: including this header does not include Halide.
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>
#include "dsl/dim.hpp"
#include "dsl/ir.hpp"
#include "limits.hpp"
#include "tensor.hpp"

namespace attn {

// Which lowering a kernel runs: the fused (flash) pipeline for expressions that are attention,
// or the generic one (every expression; materialises products and softmax).
enum class lowering { automatic, fused, generic };

struct jit_options {
  std::string target = "host";             // a Halide target string, e.g. "host" or "x86-64-linux-avx2"
  std::vector<dsl::dim_binding> bind{};    // run-time dims fixed when compiling (T = 128)
  bool with_weights = false;               // also produce the attention weights (the outermost softmax)
  bool with_lse = false;                   // also produce each row's log-sum-exp of the (only) softmax's scores
  lowering path = lowering::automatic;     // automatic: fused when the expression is attention
  std::string schedule = "default";        // "default" (chosen per shape and target), schedule parameters,
                                           // or "auto=Mullapudi2016|Li2018|Adams2019" (every run-time dim bound)
  bool use_tuning_db = true;               // with "default": a matching tuning record's schedule (tuned_schedule.hpp)
};

// How a loop nest is listed: plain text, or an HTML page to browse in a web browser.
enum class listing { text, html };

// T: the output's element type (the expression's: float32 unless its tensors are all bfloat16 or
// all float16, or dsl::output_as says otherwise).
template <class T>
struct basic_outputs {
  tensor<T> output;
  tensor<float> weights;  // empty unless compiled with_weights
  // Empty unless compiled with_lse: log Σ_kept exp(score) of each row of the softmax, shaped like
  // the softmax without its key axis (batch, heads..., queries); -inf for a row with no kept key.
  tensor<float> lse;
  std::vector<any_tensor> more;  // ir::graph::more_outputs, in order (a gradient graph's), each in its type
};
using outputs = basic_outputs<float>;

// The C++ element type of a tensor stored as e.
template <ir::element E>
using stored_value = std::conditional_t<E == ir::element::bf16, bfloat16, std::conditional_t<E == ir::element::f16, float16, float>>;

class compiled_kernel {
 public:
  // Compiles once per (graph, options) and caches (least recently used dropped beyond
  // kernel_cache_limit()); safe to call from several threads at once. Throws compile_error for a
  // target this machine cannot run, argument_error / shape_error for a bad jit_options::bind,
  // argument_error for with_lse on an expression without exactly one softmax.
  static std::shared_ptr<const compiled_kernel> get(const ir::graph& g, const jit_options& options);
  ~compiled_kernel();

  // Checks every tensor, aliasing and the memory budget first (nothing is written when a check
  // fails), then runs. T is the output's element type (output_type(); another is a dtype_error).
  template <class T = float>
  basic_outputs<T> run(std::span<const tensor_view> inputs) const;
  // Zeroed dense tensors for the outputs of a call with these inputs, each in its type: the
  // output, then the more outputs (for run_into, where the caller does not name the types).
  // Checks the inputs and the memory budget (the outputs and the intermediates) first.
  std::vector<any_tensor> output_buffers(std::span<const tensor_view> inputs) const;
  // weights (lse) must be given exactly when the kernel was compiled with_weights (with_lse);
  // `more`, one tensor per ir::graph::more_outputs.
  void run_into(std::span<const tensor_view> inputs, const tensor_view& output, const tensor_view* weights,
                const tensor_view* lse = nullptr, std::span<const tensor_view> more = {}) const;

  const ir::graph& graph() const;
  dtype output_type() const;
  const jit_options& options() const;
  std::vector<std::string> parameter_names() const;
  // Does the compiled pipeline read the tensor called `parameter` (a tensor it takes but does not
  // read is only checked)?
  bool reads(std::string_view parameter) const;
  // Which lowering and which schedule parameters this kernel runs, and where they came from
  // (source=default|tuned|given), in one line.
  std::string describe() const;
  // The fused schedule's parameters as compiled (or "auto=<name>"); empty for the generic path.
  std::string schedule() const;
  // Halide's lowered loop nest (its "conceptual" statement, before code generation): what this
  // kernel does, loop by loop.
  std::string loop_nest(listing format = listing::text) const;

  // Number of compiled kernels in this process's cache now.
  static std::size_t cache_size();

  struct impl;
  explicit compiled_kernel(std::unique_ptr<impl> p);

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace attn
