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

std::int64_t extent(const ir::dim& d, const bound_dims& bound, std::optional<std::int64_t> unbound) {
  if (d.size > 0) return d.size;
  if (auto it = bound.find(d.name); it != bound.end()) return it->second;
  if (!d.numerator.empty() && d.denominator_size > 0)
    if (auto it = bound.find(d.numerator); it != bound.end()) return it->second / d.denominator_size;
  if (unbound) return *unbound;
  throw std::invalid_argument("autoscheduler: dim '" + std::string(d.name) + "' has no size; bind it (jit_options::bind)");
}

// Halide order: innermost first, then the batch dim (extent 1: the tuner's calls are unbatched).
std::vector<std::int64_t> halide_extents(const ir::node& n, const bound_dims& bound, bool batch, std::optional<std::int64_t> unbound) {
  std::vector<std::int64_t> e;
  for (auto it = n.shape.rbegin(); it != n.shape.rend(); ++it) e.push_back(extent(*it, bound, unbound));
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

void set_estimates(const lowered& l, const ir::graph& g, const bound_dims& bound, std::optional<std::int64_t> unbound) {
  for (std::size_t i = 0; i < l.params.size(); ++i) {
    const ir::node& n = g.at(g.terminals[i]);
    const std::vector<std::int64_t> e = halide_extents(n, bound, n.batched, unbound);
    Halide::Region region;
    for (std::int64_t x : e) region.emplace_back(0, int(x));
    Halide::ImageParam param = l.params[i];
    param.set_estimates(region);
  }
  const auto estimate = [](Halide::Func f, const std::vector<std::int64_t>& extents) {
    const std::vector<Halide::Var> args = f.args();
    for (std::size_t i = 0; i < args.size() && i < extents.size(); ++i) f.set_estimate(args[i], 0, int(extents[i]));
  };
  estimate(l.output, halide_extents(g.output(), bound, l.output_batched, unbound));
  for (std::size_t k = 0; k < l.more_outputs.size(); ++k)
    estimate(l.more_outputs[k], halide_extents(g.at(g.more_outputs[k]), bound, g.at(g.more_outputs[k]).batched, unbound));
  if (l.lse.defined()) {  // the softmax's rows: its extents without the key axis (innermost)
    std::vector<std::int64_t> rows = halide_extents(g.at(ir::weights_softmax(g)), bound, l.lse_batched, unbound);
    rows.erase(rows.begin());
    estimate(l.lse, rows);
  }
}

Halide::AutoschedulerParams autoscheduler_params(const std::string& name, std::map<std::string, std::string> given) {
  autoscheduler_of("auto=" + name);  // a known name
  load_once(name);
  // Li2018 and Mullapudi2016 read "parallelism"; Adams2019 too (its cost model is built in).
  given.try_emplace("parallelism", std::to_string(std::max(1u, std::thread::hardware_concurrency())));
  return Halide::AutoschedulerParams(name, given);
}

void autoschedule(Halide::Pipeline& p, const lowered& l, const ir::graph& g, const bound_dims& bound,
                  const std::string& name, const Halide::Target& target) {
  set_estimates(l, g, bound);
  p.apply_autoscheduler(target, autoscheduler_params(name));
}

}  // namespace attn::gen
