#include "generators/autoschedule.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

namespace attn::gen {

namespace {

std::int64_t extent(const ir::dim& d, const bound_dims& bound) {
  if (d.size > 0) return d.size;
  if (auto it = bound.find(d.name); it != bound.end()) return it->second;
  if (!d.numerator.empty() && d.denominator_size > 0)
    if (auto it = bound.find(d.numerator); it != bound.end()) return it->second / d.denominator_size;
  throw std::invalid_argument("autoscheduler: dim '" + std::string(d.name) + "' has no size; bind it (jit_options::bind)");
}

// Halide order: innermost first, then the batch dim (extent 1: the tuner's calls are unbatched).
std::vector<std::int64_t> halide_extents(const ir::node& n, const bound_dims& bound, bool batch) {
  std::vector<std::int64_t> e;
  for (auto it = n.shape.rbegin(); it != n.shape.rend(); ++it) e.push_back(extent(*it, bound));
  if (batch) e.push_back(1);
  return e;
}

// The plugins sit beside libHalide (CMake passes the folder); ATTN_AUTOSCHEDULER_DIR overrides it.
std::string plugin_path(const std::string& name) {
  const char* env = std::getenv("ATTN_AUTOSCHEDULER_DIR");
#ifdef ATTN_AUTOSCHEDULER_DIR
  const std::string dir = env && *env ? env : ATTN_AUTOSCHEDULER_DIR;
#else
  const std::string dir = env && *env ? env : ".";
#endif
  std::string file = name;
  std::transform(file.begin(), file.end(), file.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return (std::filesystem::path(dir) / ("libautoschedule_" + file + ".so")).string();
}

void load_once(const std::string& name) {
  static std::mutex m;
  static std::set<std::string> loaded;
  const std::lock_guard lock(m);
  if (loaded.contains(name)) return;
  const std::string path = plugin_path(name);
  if (!std::filesystem::exists(path)) throw std::invalid_argument("autoscheduler " + name + ": no plugin at " + path);
  Halide::load_plugin(path);
  loaded.insert(name);
}

}  // namespace

const std::vector<std::string>& autoscheduler_names() {
  static const std::vector<std::string> names{"Mullapudi2016", "Li2018", "Adams2019"};
  return names;
}

std::optional<std::string> autoscheduler_of(std::string_view text) {
  constexpr std::string_view prefix = "auto=";
  if (!text.starts_with(prefix)) return std::nullopt;
  const std::string name(text.substr(prefix.size()));
  const auto& known = autoscheduler_names();
  if (std::find(known.begin(), known.end(), name) == known.end())
    throw std::invalid_argument("schedule: unknown autoscheduler '" + name + "' (known: Mullapudi2016, Li2018, Adams2019)");
  return name;
}

void autoschedule(Halide::Pipeline& p, const lowered& l, const ir::graph& g, const bound_dims& bound,
                  const std::string& name, const Halide::Target& target) {
  for (std::size_t i = 0; i < l.params.size(); ++i) {
    const std::vector<std::int64_t> e = halide_extents(g.at(g.terminals[i]), bound, true);
    Halide::Region region;
    for (std::int64_t x : e) region.emplace_back(0, int(x));
    Halide::ImageParam param = l.params[i];
    param.set_estimates(region);
  }
  const std::vector<std::int64_t> out = halide_extents(g.output(), bound, l.output_batched);
  Halide::Func output = l.output;
  const std::vector<Halide::Var> args = output.args();
  for (std::size_t i = 0; i < args.size() && i < out.size(); ++i) output.set_estimate(args[i], 0, int(out[i]));
  if (l.lse.defined()) {  // the softmax's rows: its extents without the key axis (innermost)
    const std::vector<std::int64_t> rows = halide_extents(g.at(ir::weights_softmax(g)), bound, l.lse_batched);
    Halide::Func lse = l.lse;
    const std::vector<Halide::Var> lse_args = lse.args();
    for (std::size_t i = 0; i < lse_args.size() && i + 1 < rows.size(); ++i) lse.set_estimate(lse_args[i], 0, int(rows[i + 1]));
  }
  load_once(name);
  const std::string threads = std::to_string(std::max(1u, std::thread::hardware_concurrency()));
  // Li2018 and Mullapudi2016 read "parallelism"; Adams2019 too (its cost model is built in).
  p.apply_autoscheduler(target, Halide::AutoschedulerParams(name, {{"parallelism", threads}}));
}

}  // namespace attn::gen
