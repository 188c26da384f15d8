#pragma once
// A schedule's parameters, said once: each one's name in the schedule text, the values it may
// take and where it lives in the schedule's plain struct, and the rules that relate parameters.
// Printing, parsing, checking and the tuner's search all go through the table, so every schedule
// text reads, prints and fails alike:
//   text:   "q_tile=48 kv_tile=256 vector=16"   (spaces or commas between; whole numbers)
//   error:  std::invalid_argument "<schedule>: <what was given>: <what is allowed>", e.g.
//           "schedule: q_tile=x: q_tile must be a whole number in [1, 4096]"
//           "GPU schedule: kv_tile=20 threads=8: kv_tile must be a multiple of threads"
// A choice (an enum, or a bool) is written as its value's number, so that every text printed
// before still parses; the table names each value for the messages. Halide-free.
#include <algorithm>
#include <charconv>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace attn::gen {

// One parameter of the schedule struct S.
template <class S>
struct parameter {
  std::string_view name;
  int min, max;                               // the values allowed, both included
  std::span<const std::string_view> choices;  // a choice: the name of each value from min up; empty: a number
  int (*get)(const S&);
  void (*set)(S&, int);

  // "q_tile must be a whole number in [1, 4096]", "shared must be 0 (per_thread) or 1 (shared_memory)"
  std::string rule() const {
    std::string r = std::string(name) + " must be ";
    if (choices.empty()) {
      if (max == std::numeric_limits<int>::max()) return r + "a whole number of at least " + std::to_string(min);
      return r + "a whole number in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
    }
    for (std::size_t i = 0; i < choices.size(); ++i) {
      const char* before = i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ";
      r += before + std::to_string(min + int(i)) + " (" + std::string(choices[i]) + ")";
    }
    return r;
  }
};

// A rule between parameters, checked after all of them are read.
template <class S>
struct relation {
  std::string_view among;  // the parameters it relates, separated by spaces: "kv_tile threads"
  std::string_view rule;   // "kv_tile must be a multiple of threads"
  bool (*holds)(const S&);
};

namespace detail {
template <class M>
struct member_of;
template <class S, class T>
struct member_of<T S::*> {
  using owner = S;
  using type = T;
};
}  // namespace detail

// A whole number in [min, max], held in the member m (an int).
template <auto m>
constexpr auto number(std::string_view name, int min, int max = std::numeric_limits<int>::max()) {
  using S = typename detail::member_of<decltype(m)>::owner;
  return parameter<S>{name, min, max, {}, [](const S& s) { return int(s.*m); }, [](S& s, int v) { s.*m = v; }};
}

// One of the named values 0, 1, …, held in the member m (an enum whose values are those numbers,
// or a bool: on_off).
template <auto m>
constexpr auto choice(std::string_view name, std::span<const std::string_view> names) {
  using S = typename detail::member_of<decltype(m)>::owner;
  using T = typename detail::member_of<decltype(m)>::type;
  return parameter<S>{name, 0, int(names.size()) - 1, names, [](const S& s) { return int(s.*m); },
                      [](S& s, int v) { s.*m = static_cast<T>(v); }};
}
inline constexpr std::string_view on_off[] = {"off", "on"};

template <class S>
struct parameter_table {
  std::string_view schedule;                  // how messages name the schedule: "GPU schedule"
  std::span<const parameter<S>> parameters;   // in the text's order
  std::span<const relation<S>> relations{};   // checked in this order

  // Every parameter as name=value, in the table's order, separated by spaces.
  std::string print(const S& s) const {
    std::string t;
    for (const parameter<S>& p : parameters) t += (t.empty() ? "" : " ") + std::string(p.name) + "=" + std::to_string(p.get(s));
    return t;
  }

  // The parameter of that name; nullptr if there is none.
  const parameter<S>* find(std::string_view name) const {
    for (const parameter<S>& p : parameters)
      if (p.name == name) return &p;
    return nullptr;
  }

  // Sets in s each parameter the text gives, and returns their names. Throws for a name the table
  // does not have, or a value the parameter does not allow.
  std::vector<std::string_view> read(std::string_view text, S& s) const {
    std::vector<std::string_view> given;
    constexpr std::string_view separators = " \t\n\r\f\v,";
    for (std::size_t at = text.find_first_not_of(separators); at != std::string_view::npos;
         at = text.find_first_not_of(separators, at)) {
      const std::string_view item = text.substr(at, text.find_first_of(separators, at) - at);
      at += item.size();
      const std::size_t eq = item.find('=');
      const std::string_view name = item.substr(0, eq);
      const parameter<S>* p = find(name);
      if (p == nullptr) fail(item, "unknown parameter '" + std::string(name) + "' (known: " + names() + ")");
      int v = 0;
      const char* first = item.data() + (eq == std::string_view::npos ? item.size() : eq + 1);
      const char* last = item.data() + item.size();
      const auto [end, error] = std::from_chars(first, last, v);
      if (first == last || error != std::errc() || end != last || v < p->min || v > p->max) fail(item, p->rule());
      p->set(s, v);
      given.push_back(p->name);
    }
    return given;
  }

  // Throws for the first parameter (in the table's order) out of its range, else the first
  // relation that does not hold.
  void check(const S& s) const {
    for (const parameter<S>& p : parameters)
      if (const int v = p.get(s); v < p.min || v > p.max) fail(std::string(p.name) + "=" + std::to_string(v), p.rule());
    for (const relation<S>& r : relations)
      if (!r.holds(s)) fail(values(s, r.among), r.rule);
  }

  // base with the parameters the text gives, checked.
  S parse(std::string_view text, S base) const {
    read(text, base);
    check(base);
    return base;
  }

  // "q_tile, kv_tile, ..."
  std::string names() const {
    std::string n;
    for (const parameter<S>& p : parameters) n += (n.empty() ? "" : ", ") + std::string(p.name);
    return n;
  }

 private:
  // "kv_tile=20 threads=8" for among = "kv_tile threads".
  std::string values(const S& s, std::string_view among) const {
    std::string t;
    for (std::size_t at = 0; at < among.size();) {
      const std::size_t end = std::min(among.find(' ', at), among.size());
      const parameter<S>* p = find(among.substr(at, end - at));
      if (p != nullptr) t += (t.empty() ? "" : " ") + std::string(p->name) + "=" + std::to_string(p->get(s));
      at = end + 1;
    }
    return t;
  }

  [[noreturn]] void fail(std::string_view given, std::string_view allowed) const {
    throw std::invalid_argument(std::string(schedule) + ": " + std::string(given) + ": " + std::string(allowed));
  }
};

}  // namespace attn::gen
