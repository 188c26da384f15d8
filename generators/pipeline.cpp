#include "pipeline.hpp"

#include "cpu_schedule.hpp"
#include "flash_cpu_schedule.hpp"

namespace attn::gen {

lowered lower_and_schedule(const ir::graph& g, const bound_dims& bound, const lowering_options& options,
                           const Halide::Target& target) {
  lowered l = lower(g, bound, options);
  schedule_cpu(l, target);
  for (flash_funcs& f : l.flash) schedule_flash_cpu(f, options.tiles, target);
  return l;
}

}  // namespace attn::gen
