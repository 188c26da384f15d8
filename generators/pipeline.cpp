#include "pipeline.hpp"

#include <algorithm>

#include "cpu_schedule.hpp"
#include "flash_cpu_schedule.hpp"

namespace attn::gen {

lowered lower_fitted(const ir::graph& g, const bound_dims& bound, const lowering_options& options) {
  lowered l = lower(g, bound, options);
  lowering_options used = options;
  std::int64_t band = 0;
  for (const flash_funcs& f : l.flash) band = std::max(band, f.band);
  if (options.default_tiles && band > 0 && banded(options.tiles, band) != options.tiles) {
    used.tiles = banded(options.tiles, band);
    l = lower(g, bound, used);
  }
  l.tiles = used.tiles;
  return l;
}

lowered lower_and_schedule(const ir::graph& g, const bound_dims& bound, const lowering_options& options,
                           const Halide::Target& target) {
  lowered l = lower_fitted(g, bound, options);
  schedule_cpu(l, target);
  for (flash_funcs& f : l.flash) schedule_flash_cpu(f, l.tiles, target);
  return l;
}

}  // namespace attn::gen
