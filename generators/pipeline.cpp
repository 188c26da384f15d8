#include "generators/pipeline.hpp"

#include <algorithm>
#include <stdexcept>

#include "generators/cpu/cpu_schedule.hpp"
#include "generators/cpu/flash_backward_cpu_schedule.hpp"
#include "generators/cpu/flash_cpu_schedule.hpp"
#include "generators/gpu/flash_backward_gpu_schedule.hpp"
#include "generators/gpu/flash_gpu_schedule.hpp"
#include "generators/gpu/gpu_schedule.hpp"

namespace attn::gen {

lowered lower_fitted(const ir::graph& g, const bound_dims& bound, const lowering_options& options) {
  lowered l = lower(g, bound, options);
  lowering_options used = options;
  std::int64_t band = 0;
  bool diagonal = false;
  for (const flash_funcs& f : l.flash) {
    band = std::max(band, f.band);
    diagonal = diagonal || f.diagonal;
  }
  for (const backward_funcs& b : l.backward) {
    band = std::max(band, b.band);
    diagonal = diagonal || b.diagonal;
  }
  // The GPU schedules are fitted to bands only (query tiles along a diagonal not measured there).
  if (options.gpu && options.default_tiles) {
    used.gpu = banded(*options.gpu, band);
  } else if (!options.gpu && (options.default_tiles || !options.given_tiles.empty())) {
    used.tiles = fitted_to_mask(options.tiles, band, diagonal);
    if (!options.given_tiles.empty()) {
      try {
        used.tiles = parse_flash_schedule(options.given_tiles, used.tiles);
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(std::string(e.what()) + " (over this kernel's default: " + to_string(used.tiles) + ")");
      }
    }
  }
  if (used.gpu != options.gpu || used.tiles != options.tiles) l = lower(g, bound, used);
  l.tiles = used.tiles;
  l.gpu = used.gpu;
  return l;
}

lowered lower_and_schedule(const ir::graph& g, const bound_dims& bound, const lowering_options& options,
                           const Halide::Target& target) {
  // Same algorithm, the target's schedule: a GPU target without GPU parameters gets the defaults.
  lowering_options how = options;
  if (target.has_gpu_feature() && !how.gpu) how.gpu = flash_gpu_schedule{};
  if (!target.has_gpu_feature()) how.gpu.reset();
  lowered l = lower_fitted(g, bound, how);
  if (l.gpu) {
    schedule_gpu(l, target);
    for (flash_funcs& f : l.flash) schedule_flash_gpu(f, l.params, *l.gpu, target);
    for (backward_funcs& b : l.backward) schedule_flash_backward_gpu(b, *l.gpu);
  } else {
    schedule_cpu(l, target);
    for (flash_funcs& f : l.flash) schedule_flash_cpu(f, l.tiles, target);
    for (backward_funcs& b : l.backward) schedule_flash_backward_cpu(b, l.tiles, target);
  }
  return l;
}

std::string schedule_text(const lowered& l) { return l.gpu ? to_string(*l.gpu) : to_string(l.tiles); }

}  // namespace attn::gen
