#pragma once
// What identifies a tuning record: the kernel (a stable hash of its IR text and the options that
// change what is compiled, as the JIT cache key does), the shape bucket (each run-time dim's size
// rounded up to a power of two: a schedule tuned at T = 1024 serves T = 600 ... 1024) and the
// target (a Halide target string, "host" resolved to this machine's).
#include <map>
#include <optional>
#include <string>
#include "dsl/ir.hpp"
#include "kernel.hpp"

namespace attn {

// 16 hex digits: FNV-1a of ir::serialize(g), with_weights and the path. Stable across runs and machines.
std::string tuning_signature(const ir::graph& g, const jit_options& options);

// "T=1024,S=512" (names sorted), "static" when the expression has no run-time dim; nullopt when a
// run-time dim is missing from `sizes`.
std::optional<std::string> shape_bucket(const ir::graph& g, const std::map<std::string, std::int64_t, std::less<>>& sizes);

// The Halide target string records are keyed by: "host" -> this machine's target; others normalised.
std::string tuning_target(const std::string& target);

}  // namespace attn
