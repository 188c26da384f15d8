#pragma once
// Kernels a generator program can build ahead of time, by name. Users register expressions in
// their own sources:
//
//   namespace my { constexpr auto causal_alibi = ...; }
//   ATTN_REGISTER_KERNEL(my::causal_alibi);                          // named "my::causal_alibi"
//   ATTN_REGISTER_KERNEL_AS("alibi", my::causal_alibi, "ALiBi, causal");  // another name, a description
//
// and link them with attnforge::generator (a main() that lists and builds them; runtime/attn_gen.cpp).
// Halide-free: only the DSL and its IR.
#include <cctype>
#include <map>
#include <string>
#include <vector>
#include "dsl/dsl.hpp"
#include "dsl/to_ir.hpp"

namespace attn::aot {

// "my::causal_alibi" -> "my_causal_alibi": a registered name as a C identifier (every run of
// characters other than letters, digits and _ becomes one _), for a C function and a Halide
// generator's name.
inline std::string c_identifier(const std::string& name) {
  std::string s;
  bool run = false;
  for (char c : name) {
    const bool word = std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    if (word) s += c;
    else if (!run) s += '_';
    run = !word;
  }
  return s;
}

struct kernel_entry {
  std::string name;
  std::string description;  // one line for --help
  ir::graph graph;
  bool named_variant = false;  // one of attnforge's own (named_variants.cpp), not the user's
};

class registry {
 public:
  static registry& get() {
    static registry r;
    return r;
  }
  // A second kernel under one name is a programming error: the first one stays, and the
  // generator refuses to run (duplicates()).
  void add(kernel_entry e) {
    if (!entries_.emplace(e.name, e).second) duplicates_.push_back(e.name);
  }
  // By its name or its c_identifier().
  const kernel_entry* find(const std::string& name) const {
    if (const auto it = entries_.find(name); it != entries_.end()) return &it->second;
    for (const auto& [n, e] : entries_)
      if (c_identifier(n) == name) return &e;
    return nullptr;
  }
  const std::map<std::string, kernel_entry>& entries() const { return entries_; }
  // The kernels for a --help: attnforge's named variants, then the program's own, a line each.
  std::string listing() const {
    std::string named = "Named variants (attnforge):\n", mine;
    for (const auto& [name, e] : entries_) {
      std::string line = "  " + name + std::string(name.size() < 28 ? 28 - name.size() : 1, ' ') + e.description + "\n";
      (e.named_variant ? named : mine) += line;
    }
    return named + (mine.empty() ? "" : "Registered in this program (ATTN_REGISTER_KERNEL):\n" + mine);
  }
  const std::vector<std::string>& duplicates() const { return duplicates_; }

 private:
  std::map<std::string, kernel_entry> entries_;
  std::vector<std::string> duplicates_;
};

// Registers at static initialisation; the object itself holds nothing.
struct registration {
  template <dsl::expression E>
  registration(const char* name, const E& e, const char* description = "", bool named_variant = false) {
    registry::get().add({name, description, dsl::to_ir(e), named_variant});
  }
};

}  // namespace attn::aot

#define ATTN_AOT_CONCAT_(a, b) a##b
#define ATTN_AOT_CONCAT(a, b) ATTN_AOT_CONCAT_(a, b)
// Registers the expression EXPR under its own spelling (e.g. "my::causal_alibi").
#define ATTN_REGISTER_KERNEL(EXPR) \
  static const ::attn::aot::registration ATTN_AOT_CONCAT(attn_aot_registration_, __COUNTER__)(#EXPR, EXPR)
// Registers EXPR under NAME (a string), with a one-line description.
#define ATTN_REGISTER_KERNEL_AS(NAME, EXPR, DESCRIPTION) \
  static const ::attn::aot::registration ATTN_AOT_CONCAT(attn_aot_registration_, __COUNTER__)(NAME, EXPR, DESCRIPTION)
