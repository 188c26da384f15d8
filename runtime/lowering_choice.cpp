#include "lowering_choice.hpp"

#include <stdexcept>
#include <vector>
#include "errors.hpp"
#include "dsl/gradient.hpp"
#include "generators/fused/attention_pattern.hpp"
#include "generators/fused/backward_pattern.hpp"
#include "generators/autoschedule.hpp"
#include "generators/pipeline.hpp"

namespace attn::detail {

namespace {

std::int64_t size_of(const ir::dim& d, const dim_sizes& bound) {
  if (d.size > 0) return d.size;
  auto it = bound.find(d.name);
  return it == bound.end() ? 0 : it->second;
}

}  // namespace

int lse_softmax(const ir::graph& g) {
  const std::vector<int> found = ir::normalising_nodes(g);
  if (found.empty()) throw argument_error("with_lse: the expression has no softmax, so no log-sum-exp to return");
  if (found.size() > 1)
    throw argument_error("with_lse: the expression has " + std::to_string(found.size()) +
                         " softmaxes; the log-sum-exp is defined for an expression with exactly one");
  return found.front();
}

std::vector<gen::attention_match> fused_attentions(const ir::graph& g, const Halide::Target& target, const dim_sizes& bound) {
  if (!ir::is_gradient(g)) return gen::find_attention(g);
  std::vector<gen::attention_match> found;
  for (const gen::backward_match& m : gen::find_backward(g))
    if (!target.has_gpu_feature() || gen::gpu_covers(g, m, bound)) found.push_back(m.forward);
  return found;
}

// Which lowering runs, and with which fused schedule (jit_options::path and ::schedule).
gen::lowering_options choose_lowering(const ir::graph& g, const jit_options& o, const dim_sizes& bound,
                                      const Halide::Target& target) {
  const std::vector<gen::attention_match> found = fused_attentions(g, target, bound);
  gen::lowering_options l;
  l.fused = o.path != lowering::generic && !o.with_weights && !found.empty();
  const bool autoscheduled = o.schedule.starts_with("auto=");
  l.with_lse = o.with_lse;
  if (o.with_lse) lse_softmax(g);
  l.default_tiles = o.schedule == "default" || autoscheduled;  // an autoscheduler keeps the default algorithm
  if (o.path == lowering::fused && o.with_weights)
    throw compile_error("path = fused: the fused kernel never stores the attention weights; use with_weights with path = automatic or generic");
  if (o.path == lowering::fused && found.empty() && ir::is_gradient(g))
    throw compile_error(std::string("path = fused: the fused backward covers one attention (softmax or softmax-free) whose pairs' "
                                    "gradients leave the tiles through products, or sums into a table of at most ") +
                        (target.has_gpu_feature() ? "256 cells per head fixed when compiling, the products' widths known then too (GPU targets)"
                                                  : "4096 cells per head fixed when compiling"));
  if (o.path == lowering::fused && found.empty())
    throw compile_error("path = fused: the expression has no attention (softmax(S)·V, or combine(f(S), V) with f elementwise) to fuse");
  if (target.has_feature(Halide::Target::OpenCL) && !target.has_feature(Halide::Target::CLHalf)) {
    const std::string why = ": OpenCL C holds 16-bit elements as half, which needs the target feature cl_half "
                            "(e.g. host-opencl-cl_half; the device's cl_khr_fp16)";
    for (int t : g.terminals)
      if (g.at(t).type != ir::element::f32)
        throw compile_error("tensor '" + std::string(g.at(t).name) + "' is " + std::string(ir::element_name(g.at(t).type)) + why);
    for (ir::element e : ir::result_types(g))
      if (e != ir::element::f32) throw compile_error("a result is stored as " + std::string(ir::element_name(e)) + why);
  }
  const int vector = target.natural_vector_size<float>();
  l.bf16_dot_products = !target.has_gpu_feature() &&
                        (target.has_feature(Halide::Target::AVX512_Zen4) || target.has_feature(Halide::Target::AVX512_SapphireRapids));
  // A GPU target: the same algorithm with the GPU schedule's tiles (flash_gpu_schedule.hpp).
  if (target.has_gpu_feature()) {
    if (autoscheduled) throw compile_error("schedule '" + o.schedule + "': Halide's autoschedulers are offered for CPU targets only");
    const std::int64_t dv = found.empty() ? 0 : size_of(g.at(found.front().values).shape.back(), bound);
    l.gpu = gen::default_flash_gpu_schedule(dv);
  }
  if (found.empty()) {
    l.tiles = gen::default_flash_schedule(0, 0, 0, vector);
  } else {
    const ir::node& w = g.at(found.front().weights);
    const std::size_t r = w.shape.size();
    l.tiles = gen::default_flash_schedule(size_of(w.shape[r - 2], bound), size_of(w.shape[r - 1], bound),
                                          size_of(g.at(found.front().values).shape.back(), bound), vector);
  }
  if (o.schedule != "default") {
    if (!l.fused) throw compile_error("schedule '" + o.schedule + "': schedule parameters apply to the fused path only, and this kernel is generic");
    try {
      if (l.gpu) l.gpu = gen::parse_flash_gpu_schedule(o.schedule, *l.gpu);
      else if (!autoscheduled) {
        gen::parse_flash_schedule(o.schedule, l.tiles);  // checked now; applied over the default fitted to the masks
        l.given_tiles = o.schedule;
      }
      else gen::autoscheduler_of(o.schedule);  // checks the name
    } catch (const std::invalid_argument& e) {
      throw compile_error(e.what());
    }
  }
  return l;
}

kernel_pipeline build_pipeline(const ir::graph& g, const jit_options& o, const dim_sizes& bound, const Halide::Target& target) {
  const gen::lowering_options how = choose_lowering(g, o, bound, target);
  kernel_pipeline k;
  k.fused = how.fused;
  k.autoscheduler = how.fused ? gen::autoscheduler_of(o.schedule) : std::nullopt;
  k.lowered = k.autoscheduler ? gen::lower_fitted(g, bound, how) : gen::lower_and_schedule(g, bound, how, target);
  k.schedule = !how.fused ? "" : k.autoscheduler ? o.schedule : gen::schedule_text(k.lowered);
  if (o.with_weights && !k.lowered.weights.defined()) throw argument_error("with_weights: the expression has no softmax");
  std::vector<Halide::Func> results{k.lowered.output};
  if (o.with_weights) results.push_back(k.lowered.weights);
  if (o.with_lse) results.push_back(k.lowered.lse);
  results.insert(results.end(), k.lowered.more_outputs.begin(), k.lowered.more_outputs.end());
  k.pipeline = Halide::Pipeline(results);
  return k;
}

std::string describe(const ir::graph& g, bool fused, const std::string& schedule, const char* source,
                     const gen::bf16_products& bf16_dot_products) {
  // 16-bit tensors and how they are read: converted to float32 as loaded.
  std::string read;
  for (int t : g.terminals)
    if (g.at(t).type != ir::element::f32)
      read += (read.empty() ? " read=" : ",") + std::string(g.at(t).name) + ":" + std::string(ir::element_name(g.at(t).type));
  if (!read.empty()) read += " (converted to float32 as loaded)";
  // 16-bit results, named as the C ABI names them: rounded from float32 as they are stored.
  const std::vector<ir::element> types = ir::result_types(g);
  std::string stored;
  const auto note = [&](const std::string& name, ir::element e) {
    if (e != ir::element::f32) stored += (stored.empty() ? " " : ",") + name + "=" + std::string(ir::element_name(e));
  };
  if (const int dy = ir::output_gradient_position(g); dy < 0) {
    note("output", types.front());
  } else {
    std::size_t k = 0;
    for (int t = 0; t < dy; ++t)
      if (const ir::node& n = g.at(g.terminals[static_cast<std::size_t>(t)]); n.kind != ir::op::int_input)
        note("d_" + std::string(n.name), types[k++]);
  }
  if (!stored.empty()) read += stored + " (rounded as stored)";
  if (const gen::bf16_products& b = bf16_dot_products; b.scores || b.values) {
    const std::string scores = b.scores_beyond > 0 ? "Q·Kᵀ beyond " + std::to_string(b.scores_beyond) + " queries" : "Q·Kᵀ";
    const std::string which = b.scores && b.values ? scores + " and P·V" : b.scores ? scores : "P·V";
    read += " products=bfloat16 dot products (" + which + ", vdpbf16ps" + (b.values ? "; P rounded to bfloat16)" : ")");
  }
  if (!fused) return "path=generic" + read;
  std::string s = "path=fused";
  for (const gen::attention_match& m : gen::find_attention(g)) s += " attention=" + gen::to_string(g, m);
  for (const gen::backward_match& m : gen::find_backward(g)) s += " backward=" + gen::to_string(g, m.forward);
  return s + " schedule=[" + schedule + "] source=" + source + read;
}

}  // namespace attn::detail
