#pragma once
// Halide's own autoschedulers (Mullapudi2016, Li2018, Adams2019; plugins shipped with Halide)
// applied to a lowered pipeline that has no schedule yet (pipeline.hpp: lower_fitted), so the
// tuner can offer them as candidates for the same algorithm. They need an estimate of every
// dim's extent: every run-time dim must be bound.
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include <Halide.h>
#include "generators/lowering/lower.hpp"

namespace attn::gen {

// The autoschedulers offered, by Halide's name.
const std::vector<std::string>& autoscheduler_names();

// "auto=Adams2019" -> "Adams2019"; nullopt for other schedule texts. Throws
// std::invalid_argument for "auto=" followed by an unknown name.
std::optional<std::string> autoscheduler_of(std::string_view schedule_text);

// Estimates of every parameter's, the output's and the log-sum-exp's extents from the graph's
// shapes, batch 1: the sizes Halide's autoschedulers plan for, and that generators give every
// input. A run-time dim that is not bound is estimated at `unbound`; without it that throws
// std::invalid_argument.
void set_estimates(const lowered& l, const ir::graph& g, const bound_dims& bound, std::optional<std::int64_t> unbound = std::nullopt);

// The autoscheduler `name` with its parameters (`given` over the default: parallelism = this
// machine's threads), its plugin loaded (once per process). Throws std::invalid_argument for a
// name not in autoscheduler_names() or a plugin that is not there.
Halide::AutoschedulerParams autoscheduler_params(const std::string& name, std::map<std::string, std::string> given = {});

// set_estimates, then the autoscheduler applied. Throws std::invalid_argument when a dim's size is
// unknown, Halide::Error when the autoscheduler fails.
void autoschedule(Halide::Pipeline& p, const lowered& l, const ir::graph& g, const bound_dims& bound,
                  const std::string& name, const Halide::Target& target);

}  // namespace attn::gen
