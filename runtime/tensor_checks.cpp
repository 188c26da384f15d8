#include "tensor_checks.hpp"

#include "dsl/gradient.hpp"
#include "halide_limits.hpp"

namespace attn::detail {

namespace {

std::string sizes_text(const std::vector<ir::dim>& shape, bool batch) {
  std::string s = "(";
  if (batch) s += "batch";
  for (std::size_t k = 0; k < shape.size(); ++k) s += (k || batch ? ", " : "") + std::string(shape[k].name);
  return s + ")";
}

std::string view_sizes(const tensor_view& v) {
  std::string s = "(";
  for (int k = 0; k < v.rank; ++k) s += (k ? ", " : "") + std::to_string(v.size(k));
  return s + ")";
}

}  // namespace

dtype dtype_of(ir::element e) { return e == ir::element::bf16 ? dtype::bf16 : e == ir::element::f16 ? dtype::f16 : dtype::f32; }

dtype dtype_of(const ir::node& terminal) { return terminal.kind == ir::op::int_input ? dtype::i32 : dtype_of(terminal.type); }

std::vector<dtype> result_dtypes(const ir::graph& g) {
  std::vector<dtype> d;
  for (ir::element e : ir::result_types(g)) d.push_back(dtype_of(e));
  return d;
}

call_shape check_inputs(const ir::graph& g, std::span<const tensor_view> inputs, const dim_sizes& bound) {
  if (inputs.size() != g.terminals.size())
    throw argument_error("kernel call: expected " + std::to_string(g.terminals.size()) + " tensors, got " +
                         std::to_string(inputs.size()));
  call_shape call;
  std::map<std::string, std::string, std::less<>> first_seen;  // dim -> tensor that bound it
  std::string batch_from;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const ir::node& t = g.at(g.terminals[i]);
    const tensor_view& v = inputs[i];
    const std::string name(t.name);
    const std::string who = "tensor '" + name + "'";
    if (v.data == nullptr) throw argument_error(who + ": null data pointer");
    const dtype want = dtype_of(t);
    if (v.type != want)
      throw dtype_error(who + ": expected " + dtype_name(want) + ", got " + dtype_name(v.type));
    const int rank = static_cast<int>(t.shape.size());
    const bool with_batch = t.batched && v.rank == rank + 1;
    if (v.rank != rank && !with_batch) {
      std::string expected = "rank " + std::to_string(rank) + " " + sizes_text(t.shape, false);
      if (t.batched) expected += " or rank " + std::to_string(rank + 1) + " " + sizes_text(t.shape, true);
      throw shape_error(who + ": expected " + expected + ", got rank " + std::to_string(v.rank) + " " + view_sizes(v));
    }
    for (int k = 0; k < v.rank; ++k)
      if (v.size(k) < 1) throw shape_error(who + ": axis " + std::to_string(k) + " has size " + std::to_string(v.size(k)) + "; sizes must be at least 1");
    check_halide_limits(who, v);
    if (with_batch) {
      if (!call.explicit_batch) {
        call.batch = v.size(0);
        call.explicit_batch = true;
        batch_from = name;
      } else if (v.size(0) != call.batch) {
        throw shape_error(who + ": batch is " + std::to_string(v.size(0)) + ", but tensor '" + batch_from + "' has batch " +
                          std::to_string(call.batch));
      }
    }
    for (int k = 0; k < rank; ++k) {
      const ir::dim& d = t.shape[static_cast<std::size_t>(k)];
      const std::int64_t given = v.size(k + (with_batch ? 1 : 0));
      const std::string where = who + ": dim " + std::string(d.name) + " (axis " + std::to_string(k) + ")";
      if (d.size > 0) {
        if (given != d.size) throw shape_error(where + ": expected " + std::to_string(d.size) + ", got " + std::to_string(given));
      } else if (auto b = bound.find(d.name); b != bound.end()) {
        if (given != b->second)
          throw shape_error(where + ": expected " + std::to_string(b->second) + " (bound when compiled), got " + std::to_string(given));
      } else if (auto seen = call.dims.find(d.name); seen != call.dims.end()) {
        if (given != seen->second)
          throw shape_error(where + ": expected " + std::to_string(seen->second) + " as in tensor '" + first_seen.find(d.name)->second +
                            "', got " + std::to_string(given));
        continue;
      }
      call.dims.emplace(std::string(d.name), given);
      first_seen.emplace(std::string(d.name), name);
    }
  }
  return call;
}

std::vector<std::int64_t> result_sizes(const ir::node& n, const call_shape& call) {
  std::vector<std::int64_t> s;
  if (n.batched && call.explicit_batch) s.push_back(call.batch);
  for (const ir::dim& d : n.shape) s.push_back(d.size > 0 ? d.size : call.dims.at(std::string(d.name)));
  return s;
}

void check_output(const char* what, const tensor_view& v, const std::vector<std::int64_t>& expected, dtype type) {
  const std::string who = std::string("output '") + what + "'";
  if (v.data == nullptr) throw argument_error(who + ": null data pointer");
  if (v.type != type) throw dtype_error(who + ": expected " + dtype_name(type) + ", got " + dtype_name(v.type));
  std::string want = "(";
  for (std::size_t k = 0; k < expected.size(); ++k) want += (k ? ", " : "") + std::to_string(expected[k]);
  want += ")";
  bool ok = v.rank == static_cast<int>(expected.size());
  for (int k = 0; ok && k < v.rank; ++k) ok = v.size(k) == expected[static_cast<std::size_t>(k)];
  if (!ok) throw shape_error(who + ": expected sizes " + want + ", got " + view_sizes(v));
  check_halide_limits(who, v);
}

}  // namespace attn::detail
