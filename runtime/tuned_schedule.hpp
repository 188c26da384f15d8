#pragma once
// How attn::jit uses the tuning database (tuning_db.hpp): with jit_options::schedule == "default"
// and use_tuning_db, a record for this kernel, shape bucket and target replaces the schedule.
// Records apply only when every run-time dim is bound (jit_options::bind): without bound sizes
// there is no bucket to look up, and the default (which adapts to sizes at run time) is used.
#include "dsl/ir.hpp"
#include "kernel.hpp"
#include <filesystem>
#include <optional>
#include "tensor_checks.hpp"
#include "tuning_db.hpp"

namespace attn::detail {

// True when a record was found and o.schedule now holds its schedule. A record that does not apply
// to this kernel on o.target (a GPU schedule for a CPU target, an autoscheduler for a GPU, text this
// attnforge cannot read, parameters for a kernel that is not fused) is reported on stderr, once
// per process, and ignored: the default schedule is used. Never throws for anything in the
// database (a bad database is reported and ignored: tuning_db.hpp).
bool apply_tuning_record(const ir::graph& g, jit_options& o, const dim_sizes& bound);

// The same lookup in the database `file` (tuning_db.hpp): the record applied to o, or nullopt.
std::optional<tuning_record> apply_tuning_record(const ir::graph& g, jit_options& o, const dim_sizes& bound,
                                                 const std::filesystem::path& file);

}  // namespace attn::detail
