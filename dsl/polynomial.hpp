#pragma once
// Polynomials in named dims (2·T²·Dk + 3·T·D·Dk): the cost model's values. constexpr throughout.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>
#include "dim.hpp"

namespace attn::dsl {

struct factor {
  std::string_view name;
  int power = 1;
  std::int64_t size = 0;  // 0: bound at run time
  constexpr bool operator==(const factor&) const = default;
};

struct term {
  double coef = 0;
  std::vector<factor> factors;  // sorted by name, powers != 0

  constexpr bool same_monomial(const term& o) const {
    if (factors.size() != o.factors.size()) return false;
    for (std::size_t i = 0; i < factors.size(); ++i)
      if (factors[i].name != o.factors[i].name || factors[i].power != o.factors[i].power) return false;
    return true;
  }
  constexpr void multiply(const factor& f) {
    auto it = std::find_if(factors.begin(), factors.end(), [&](const factor& g) { return g.name == f.name; });
    if (it != factors.end()) {
      it->power += f.power;
      if (it->size == 0) it->size = f.size;
      if (it->power == 0) factors.erase(it);
      return;
    }
    auto pos = std::find_if(factors.begin(), factors.end(), [&](const factor& g) { return g.name > f.name; });
    factors.insert(pos, f);
  }
};

struct polynomial {
  std::vector<term> terms;

  constexpr polynomial& operator+=(const polynomial& o) {
    for (const term& t : o.terms) {
      auto it = std::find_if(terms.begin(), terms.end(), [&](const term& u) { return u.same_monomial(t); });
      if (it != terms.end()) it->coef += t.coef;
      else terms.push_back(t);
    }
    std::erase_if(terms, [](const term& t) { return t.coef == 0; });
    return *this;
  }
  constexpr polynomial operator*(double c) const {
    polynomial r = *this;
    for (term& t : r.terms) t.coef *= c;
    std::erase_if(r.terms, [](const term& t) { return t.coef == 0; });
    return r;
  }

  // Value with run-time dims bound (static dims use their sizes).
  template <class... B>
  constexpr double at(const B&... bindings) const {
    const dim_binding bs[] = {dim_binding{"", 0}, dim_binding(bindings)...};
    double total = 0;
    for (const term& t : terms) {
      double v = t.coef;
      for (const factor& f : t.factors) {
        std::int64_t size = f.size;
        for (const dim_binding& b : bs)
          if (b.name == f.name) size = b.size;
        if (size == 0) throw std::invalid_argument("cost: bind the run-time dim " + std::string(f.name) + ", e.g. .at(" + std::string(f.name) + " = 128)");
        double p = 1;
        for (int i = 0; i < (f.power < 0 ? -f.power : f.power); ++i) p *= static_cast<double>(size);
        v = f.power < 0 ? v / p : v * p;
      }
      total += v;
    }
    return total;
  }

  // The terms in which `dim` appears to exactly `power` (0: not at all), e.g. the T² part.
  constexpr polynomial part_of_degree(std::string_view dim, int power) const {
    polynomial r;
    for (const term& t : terms) {
      int p = 0;
      for (const factor& f : t.factors)
        if (f.name == dim) p = f.power;
      if (p == power) r.terms.push_back(t);
    }
    return r;
  }
};

// The monomial of a product of dims; D/H contributes D·H⁻¹; size-1 axes nothing.
template <class Dims>
constexpr polynomial monomial(double coef, const Dims& dims) {
  term t{coef, {}};
  for (const auto& d : dims) {
    if (d.role == dim_role::unit) continue;
    if (!d.numerator.empty()) {
      t.multiply({d.numerator, 1, d.numerator_size});
      t.multiply({d.denominator, -1, d.denominator_size});
    } else {
      t.multiply({d.name, 1, d.size});
    }
  }
  return polynomial{{t}};
}

}  // namespace attn::dsl
