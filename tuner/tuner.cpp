#include "tuner.hpp"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <memory>
#include <random>
#include <set>
#include <Halide.h>
#include "dsl/gradient.hpp"
#include "dsl/printer.hpp"
#include "generators/fused/attention_pattern.hpp"
#include "compile_in_child.hpp"
#include "output_check.hpp"
#include "progress.hpp"
#include "runtime/cache_dir.hpp"
#include "runtime/jit.hpp"
#include "runtime/lowering_choice.hpp"
#include "runtime/tuning_key.hpp"
#include "search_space.hpp"

namespace attn::tune {

namespace {

using clock = std::chrono::steady_clock;
using kernel_ptr = std::shared_ptr<const compiled_kernel>;

// jit_options::bind holds string_views: point them at the graph's own (static) dim names.
std::vector<dsl::dim_binding> bindings(const ir::graph& g, const dim_sizes& sizes) {
  std::vector<dsl::dim_binding> b;
  for (const auto& [name, size] : sizes) {
    const ir::dim* found = nullptr;
    for (const ir::node& n : g.nodes)
      for (const ir::dim& d : n.shape)
        if (d.name == name && d.size == 0) found = &d;
    if (!found) throw std::invalid_argument("tuner: the expression has no run-time dim '" + name + "'");
    b.push_back({found->name, size});
  }
  return b;
}

std::int64_t size_of(const ir::dim& d, const dim_sizes& sizes) {
  if (d.size > 0) return d.size;
  auto it = sizes.find(d.name);
  return it == sizes.end() ? 0 : it->second;
}

// The search's view of the (first) attention: its sizes.
attention_sizes sizes_for_search(const ir::graph& g, const dim_sizes& sizes) {
  attention_sizes a;
  const std::vector<gen::attention_match> found = detail::fused_attentions(g, Halide::Target("host"), sizes);  // a gradient graph's too
  if (found.empty()) return a;
  const ir::node& w = g.at(found.front().weights);
  const std::size_t r = w.shape.size();
  a.nq = size_of(w.shape[r - 2], sizes);
  a.nk = size_of(w.shape[r - 1], sizes);
  a.dv = size_of(g.at(found.front().values).shape.back(), sizes);
  return a;
}

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

class search {
 public:
  search(const ir::graph& g, const tune_options& o)
      : g_(g), o_(o), start_(clock::now()),
        in_(random_inputs(g, o.sizes, o.seed, o.batch)), progress_(o.log) {
    base_.target = o.target;
    base_.bind = bindings(g, o.sizes);
    base_.use_tuning_db = false;  // the default candidate must be the built-in default
  }

  tune_result run() {
    tune_result r;
    r.signature = tuning_signature(g_, base_);
    r.bucket = shape_bucket(g_, o_.sizes).value_or("?");
    r.target = tuning_target(o_.target);
    r.expression = dsl::to_string(g_);
    r.planned = 1;
    evaluate({"default", "default"}, r);
    const candidate& def = r.candidates.front();
    if (def.status != outcome::ok)
      throw compile_error("tuner: the default schedule failed (" + std::string(to_string(def.status)) + "): " + def.message);
    default_schedule_ = def.schedule;
    if (def.schedule.empty()) throw compile_error("tuner: the expression is not fused attention; nothing to tune");

    std::vector<std::pair<std::string, std::string>> queue;  // (schedule, origin)
    for (const std::string& a : o_.autoschedulers) queue.emplace_back("auto=" + a, a);
    for (const std::string& given : o_.schedules) queue.emplace_back(given, "given");
    const search_space space = space_of(r.target, def.schedule);
    if (o_.search) {
      // The default's one-step neighbours first: where it is nearly right (most cases), that is
      // where the gains are; then the grid, for what lies far from it.
      for (const std::string& n : space.neighbours(def.schedule)) queue.emplace_back(n, "refine");
      std::vector<std::string> grid = space.grid();
      std::shuffle(grid.begin(), grid.end(), std::mt19937(o_.seed));
      for (const std::string& s : grid) queue.emplace_back(s, "grid");
    }
    r.planned = 1 + queue.size();
    const std::size_t before_grid = o_.autoschedulers.size() + o_.schedules.size();
    double grid_end = 0;
    for (std::size_t i = 0; i < queue.size(); ++i) {
      // The first searched candidate is always tried, so a search compares at least two kernels
      // even when the default's compile took most of a small budget (a loaded machine).
      const bool first_searched = i == before_grid;
      if (first_searched) grid_end = elapsed() + 0.6 * left();  // the grid's share of what is left; then refine
      if (!first_searched && out_of_time()) break;
      if (i > before_grid && elapsed() > grid_end) break;
      evaluate(queue[i], r);
    }
    if (o_.search) refine(space, r);
    for (candidate& c : r.candidates)
      if (c.status == outcome::skipped && c.message.empty()) c.message = "time budget";
    retime_leaders(r);
    r.elapsed_s = elapsed();
    progress_.finish();
    return r;
  }

 private:
  double elapsed() const { return std::chrono::duration<double>(clock::now() - start_).count(); }
  double left() const { return std::max(0.0, o_.budget_seconds - elapsed()); }

  // Keep the re-timing's share of the budget: rounds × the leaders' times, plus one compile.
  bool out_of_time() const {
    double per_round = 0;
    for (const auto& [i, k] : kept_) per_round += best_seconds(i);
    return left() < o_.rounds * per_round * 1.2 + last_compile_s_;
  }

  double best_seconds(std::size_t i) const { return medians_.at(i); }

  // The fused schedule's search space on the target (spelled in full): the GPU schedule's on a GPU
  // target, else the CPU's at the default's vector width.
  search_space space_of(const std::string& target, const std::string& default_schedule) const {
    attention_sizes a = sizes_for_search(g_, o_.sizes);
    const bool gpu = Halide::Target(target).has_gpu_feature();
    if (!gpu) a.vector = gen::parse_flash_schedule(default_schedule, {}).vector;
    if (ir::is_gradient(g_)) return search_space(gpu, a, default_schedule);
    return search_space(gpu, a);
  }

  // Neighbours of the current best few, until nothing new is left or time runs out.
  void refine(const search_space& space, tune_result& r) {
    while (!out_of_time()) {
      std::vector<std::string> next;
      for (std::size_t i : ranking(r, std::size_t(o_.leaders))) {
        const std::string& s = r.candidates[i].schedule;
        if (s.starts_with("auto=")) continue;
        for (const std::string& n : space.neighbours(s))
          if (!tried_.contains(n)) next.push_back(n);
      }
      if (next.empty()) return;
      r.planned += next.size();
      for (const std::string& s : next) {
        if (out_of_time()) return;
        evaluate({s, "refine"}, r);
      }
    }
  }

  // Indices of ok candidates, fastest first (by their first measurement), at most n.
  std::vector<std::size_t> ranking(const tune_result& r, std::size_t n) const {
    std::vector<std::size_t> ok;
    for (std::size_t i = 0; i < r.candidates.size(); ++i)
      if (r.candidates[i].status == outcome::ok) ok.push_back(i);
    std::sort(ok.begin(), ok.end(), [&](std::size_t x, std::size_t y) { return r.candidates[x].median_s < r.candidates[y].median_s; });
    if (ok.size() > n) ok.resize(n);
    return ok;
  }

  void evaluate(const std::pair<std::string, std::string>& what, tune_result& r) {
    const std::size_t index = r.candidates.size();
    candidate& c = r.candidates.emplace_back();
    c.schedule = what.first;
    c.origin = what.second;
    if (!tried_.insert(c.schedule).second || (!default_schedule_.empty() && c.schedule == default_schedule_)) {
      r.candidates.pop_back();  // the same kernel as one already measured
      return;
    }
    jit_options opt = base_;
    opt.schedule = c.schedule;
    kernel_ptr k;
    const auto t0 = clock::now();
    if (c.schedule.starts_with("auto=") && detail::kernel_cache_dir()) {
      // An autoscheduler: compiled in a child within an equal part of what is left of their share
      // (the first may not leave the last nothing); this process then loads the kernel from the disk cache.
      const std::size_t still = std::max<std::size_t>(autoschedulers_left_--, 1);
      const double allowance = std::min((o_.autoscheduler_share * o_.budget_seconds - autoscheduler_s_) / double(still), left());
      const child_compile child = compile_in_child([&] { compiled_kernel::get(g_, opt); }, std::max(allowance, 0.0));
      autoscheduler_s_ += child.seconds;
      if (child.result != child_compile::status::done) {
        const bool late = child.result == child_compile::status::timed_out;
        fail(c, late ? outcome::timed_out : outcome::compile_failed, child.message);
        return;
      }
    }
    try {
      k = compiled_kernel::get(g_, opt);
    } catch (const std::exception& e) {
      fail(c, outcome::compile_failed, e.what());
      return;
    }
    c.compile_s = last_compile_s_ = std::chrono::duration<double>(clock::now() - t0).count();
    if (index == 0) c.schedule = k->schedule();  // the default's parameters, as compiled
    tried_.insert(c.schedule);
    std::vector<std::vector<float>> got;  // every output: a gradient graph's more outputs too
    try {
      std::vector<any_tensor> out = k->output_buffers(in_.views);
      run_into(*k, out);  // also the warm-up run
      for (const any_tensor& b : out) got.push_back(b.floats());
      if (index == 0) results_ = std::move(out);
    } catch (const std::exception& e) {
      fail(c, outcome::run_failed, e.what());
      return;
    }
    if (o_.output_hook) o_.output_hook(c.schedule, std::span<float>(got.front()));
    if (index == 0) {
      reference_ = std::move(got);
    } else {
      for (std::size_t i = 0; i < got.size(); ++i)
        if (const check_result chk = check_output(reference_[i], got[i], results_[i].type()); !chk.ok) {
          fail(c, outcome::wrong, (i == 0 ? std::string() : "output " + std::to_string(i + 1) + ": ") + chk.describe());
          return;
        }
    }
    c.times = time_runs([&] { run_into_results(*k); }, o_.timing, best_);
    c.median_s = median(c.times);
    c.status = outcome::ok;
    medians_[index] = c.median_s;
    keep_if_leader(index, k, r);
    if (best_ == 0 || c.median_s < best_) best_ = c.median_s;
    progress_.update(r.candidates.size(), r.planned, best_ * 1e3, left(), c.origin + " " + c.schedule);
  }

  void run_into_results(const compiled_kernel& k) { run_into(k, results_); }
  void run_into(const compiled_kernel& k, const std::vector<any_tensor>& outputs) {
    std::vector<tensor_view> more;
    for (std::size_t i = 1; i < outputs.size(); ++i) more.push_back(outputs[i].view());
    k.run_into(in_.views, outputs.front().view(), nullptr, nullptr, more);
  }

  void fail(candidate& c, outcome why, const std::string& message) {
    c.status = why;
    c.message = message.substr(0, message.find('\n'));
    progress_.note(c.origin + " [" + c.schedule + "] " + to_string(why) + ": " + c.message.substr(0, 200));
  }

  // Compiled kernels are kept only for the default and the current leaders (memory).
  void keep_if_leader(std::size_t index, const kernel_ptr& k, const tune_result& r) {
    kept_[index] = k;
    const std::vector<std::size_t> top = ranking(r, std::size_t(o_.leaders));
    for (auto it = kept_.begin(); it != kept_.end();)
      if (it->first != 0 && std::find(top.begin(), top.end(), it->first) == top.end()) it = kept_.erase(it);
      else ++it;
  }

  void retime_leaders(tune_result& r) {
    std::vector<std::size_t> who;
    std::vector<std::function<void()>> fns;
    for (const auto& [i, k] : kept_) {
      who.push_back(i);
      fns.push_back([this, k = k] { run_into_results(*k); });
    }
    const std::vector<std::vector<double>> times = time_interleaved(fns, std::max(1, o_.rounds));
    for (std::size_t j = 0; j < who.size(); ++j) r.candidates[who[j]].final_times = times[j];
    r.chosen = 0;
    for (std::size_t i : who)
      if (r.candidates[i].seconds() < r.candidates[r.chosen].seconds()) r.chosen = i;
  }

  const ir::graph& g_;
  const tune_options& o_;
  clock::time_point start_;
  jit_options base_;
  kernel_inputs in_;
  progress progress_;
  std::vector<std::vector<float>> reference_;  // the default's outputs
  std::vector<any_tensor> results_;          // where candidates write theirs, each in its type
  std::string default_schedule_;
  std::set<std::string> tried_;
  std::map<std::size_t, kernel_ptr> kept_;
  std::map<std::size_t, double> medians_;
  double best_ = 0, last_compile_s_ = 0;
  double autoscheduler_s_ = 0;  // spent by the autoschedulers' children so far
  std::size_t autoschedulers_left_ = o_.autoschedulers.size();  // not yet compiled
};

}  // namespace

const char* to_string(outcome o) {
  constexpr const char* names[] = {"ok", "compile failed", "run failed", "wrong output", "skipped", "timed out"};
  return names[int(o)];
}

double candidate::seconds() const { return final_times.empty() ? median_s : median(final_times); }

tune_result tune(const ir::graph& g, const tune_options& o) { return search(g, o).run(); }

tuning_record make_record(const tune_result& r, const tune_options& o) {
  tuning_record rec;
  rec.signature = r.signature;
  rec.bucket = r.bucket;
  rec.target = r.target;
  rec.schedule = r.best().schedule;
  rec.expression = r.expression;
  for (const auto& [name, size] : o.sizes) rec.sizes += (rec.sizes.empty() ? "" : ",") + name + "=" + std::to_string(size);
  if (o.batch > 1) rec.sizes += ",batch=" + std::to_string(o.batch);  // for humans: every batch runs the same kernel
  rec.median_ms = r.best().seconds() * 1e3;
  rec.default_ms = r.default_candidate().seconds() * 1e3;
  rec.date = now_utc();
  rec.attnforge_version = attnforge_version();
  rec.halide_version = halide_version();
  return rec;
}

}  // namespace attn::tune
