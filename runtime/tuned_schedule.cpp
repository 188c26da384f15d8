#include "tuned_schedule.hpp"

#include <iostream>
#include <stdexcept>
#include "generators/autoschedule.hpp"
#include "generators/flash_gpu_schedule.hpp"
#include "generators/flash_schedule.hpp"
#include "tuning_db.hpp"
#include "tuning_key.hpp"

namespace attn::detail {

bool apply_tuning_record(const ir::graph& g, jit_options& o, const dim_sizes& bound) {
  if (o.schedule != "default" || !o.use_tuning_db) return false;
  const std::optional<std::string> bucket = shape_bucket(g, bound);
  if (!bucket) return false;  // unbound run-time dims: no sizes to match
  const std::optional<std::filesystem::path> file = tuning_db_path();
  if (!file) return false;
  const std::optional<tuning_record> r = find_tuning_record(*file, tuning_signature(g, o), *bucket, tuning_target(o.target));
  if (!r) return false;
  try {
    // CPU or GPU parameters (the record's target says which; choose_lowering checks they match it).
    if (!gen::autoscheduler_of(r->schedule)) {
      try {
        gen::parse_flash_schedule(r->schedule, {});
      } catch (const std::invalid_argument& cpu) {
        try {
          gen::parse_flash_gpu_schedule(r->schedule, {});
        } catch (const std::invalid_argument&) {
          throw cpu;
        }
      }
    }
  } catch (const std::invalid_argument& e) {
    std::cerr << "attnforge: tuning database " << file->string() << ": record " << r->signature << " " << *bucket << ": "
              << e.what() << "; ignored\n";
    return false;
  }
  o.schedule = r->schedule;
  return true;
}

}  // namespace attn::detail
