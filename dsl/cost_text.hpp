#pragma once
// The cost model's polynomials as text: "2·T²·Dk + 3·T·D·Dk", "O(T²·D + T·D²)".
#include <cmath>
#include <cstdio>
#include <string>

namespace attn::dsl {

namespace detail {
inline std::string power_text(int p) {
  static const char* const sup[] = {"⁰", "¹", "²", "³", "⁴", "⁵", "⁶", "⁷", "⁸", "⁹"};
  std::string s = p < 0 ? "⁻" : "";
  std::string digits = std::to_string(p < 0 ? -p : p);
  for (char c : digits) s += sup[c - '0'];
  return s;
}

// Run-time dims first (T²·D), as the seeds write n²·d.
inline std::string monomial_text(const term& t) {
  std::string s;
  std::vector<factor> order;
  for (const factor& f : t.factors)
    if (f.size == 0) order.push_back(f);
  for (const factor& f : t.factors)
    if (f.size != 0) order.push_back(f);
  for (const factor& f : order) {
    if (f.power < 0) continue;
    s += (s.empty() ? "" : "·") + std::string(f.name) + (f.power == 1 ? "" : power_text(f.power));
  }
  for (const factor& f : t.factors)
    if (f.power < 0) s += (s.empty() ? "1" : "") + std::string("/") + std::string(f.name) + (f.power == -1 ? "" : power_text(-f.power));
  return s.empty() ? "1" : s;
}

inline std::string number_text(double c) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", c);
  return buf;
}

// Does monomial a grow no faster than b, given every dim >= 1 and each D/H >= 1?
inline bool dominated(const term& a, const term& b, const std::vector<ir::dim>& quotients) {
  term r = b;
  for (const factor& f : a.factors) r.multiply({f.name, -f.power, f.size});
  for (const ir::dim& q : quotients) {
    auto power = [&](std::string_view n) {
      for (const factor& f : r.factors)
        if (f.name == n) return f.power;
      return 0;
    };
    while (power(q.numerator) > 0 && power(q.denominator) < 0) {
      r.multiply({q.numerator, -1, 0});
      r.multiply({q.denominator, 1, 0});
    }
  }
  for (const factor& f : r.factors)
    if (f.power < 0) return false;
  return true;
}
}  // namespace detail

inline std::string to_string(const polynomial& p) {
  std::string s;
  for (const term& t : p.terms) {
    if (!s.empty()) s += " + ";
    std::string m = detail::monomial_text(t);
    if (t.coef != 1 || m == "1") s += detail::number_text(t.coef) + (m == "1" ? "" : "·");
    if (m != "1") s += m;
  }
  return s.empty() ? "0" : s;
}

inline std::string big_o(const cost_report& r) {
  std::vector<term> kept;
  const auto work = r.work().terms;
  for (std::size_t i = 0; i < work.size(); ++i) {
    bool drop = false;
    for (std::size_t j = 0; j < work.size() && !drop; ++j)
      if (i != j && detail::dominated(work[i], work[j], r.quotients) &&
          !(detail::dominated(work[j], work[i], r.quotients) && j > i))
        drop = true;
    if (!drop) kept.push_back(work[i]);
  }
  // Highest total power of the run-time dims first: the term that dominates long sequences.
  auto runtime_power = [](const term& t) {
    int p = 0;
    for (const factor& f : t.factors) p += f.size == 0 ? f.power : 0;
    return p;
  };
  std::stable_sort(kept.begin(), kept.end(), [&](const term& a, const term& b) { return runtime_power(a) > runtime_power(b); });
  std::string s = "O(";
  for (std::size_t i = 0; i < kept.size(); ++i) s += (i ? " + " : "") + detail::monomial_text(kept[i]);
  return s + ")";
}

}  // namespace attn::dsl
