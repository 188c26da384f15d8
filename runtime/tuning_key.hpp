#pragma once
// What identifies a tuning record: the kernel (a stable hash of its IR text without its dims' sizes,
// and the options that change what is compiled), the shape bucket (every dim's size, fixed in the
// expression or bound when compiling, rounded up to a power of two: a schedule tuned at T = 1024
// serves T = 600 ... 1024) and the target (a Halide target string, "host" resolved to this
// machine's). A dim fixed in the expression and the same dim bound when compiling give one key:
// they compile the same kernel.
#include <map>
#include <optional>
#include <string>
#include "dsl/ir.hpp"
#include "kernel.hpp"

namespace attn {

// 16 hex digits: FNV-1a of ir::serialize(g) with every dim's size left out, with_weights, with_lse
// and the path. Stable across runs and machines.
std::string tuning_signature(const ir::graph& g, const jit_options& options);

// "Dh=64,T=1024" (names sorted; quotient and unit dims follow from the others), "static" for an
// expression without dims; nullopt when a run-time dim is missing from `sizes`.
std::optional<std::string> shape_bucket(const ir::graph& g, const std::map<std::string, std::int64_t, std::less<>>& sizes);

// The Halide target string records are keyed by: "host" -> this machine's target; others normalised.
std::string tuning_target(const std::string& target);

}  // namespace attn
