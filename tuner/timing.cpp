#include "timing.hpp"

#include <algorithm>
#include <chrono>

namespace attn::tune {

namespace {

double seconds_of(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

double median(std::vector<double> s) {
  if (s.empty()) return 0;
  std::sort(s.begin(), s.end());
  const std::size_t n = s.size();
  return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

std::vector<double> time_runs(const std::function<void()>& fn, const timing_options& o, double best_seconds) {
  std::vector<double> t;
  double spent = 0;
  while (int(t.size()) < o.max_repeats && (int(t.size()) < o.min_repeats || spent < o.min_seconds)) {
    t.push_back(seconds_of(fn));
    spent += t.back();
    if (t.size() == 1 && best_seconds > 0 && t.front() > o.give_up * best_seconds) break;  // clearly a loser
  }
  return t;
}

std::vector<std::vector<double>> time_interleaved(const std::vector<std::function<void()>>& fns, int rounds) {
  std::vector<std::vector<double>> t(fns.size());
  for (int r = 0; r < rounds; ++r)
    for (std::size_t k = 0; k < fns.size(); ++k) {
      const std::size_t i = (k + std::size_t(r)) % fns.size();
      t[i].push_back(seconds_of(fns[i]));
    }
  return t;
}

}  // namespace attn::tune
