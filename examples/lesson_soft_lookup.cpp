// Lesson: attention as a soft dictionary lookup (seed 003, section 1).
// A dictionary apple → "a red fruit", banana → "a yellow fruit", cherry → "a small red fruit".
// The query "red fruit" matches no key exactly; attention returns a blend of all values,
// weighted by softmax(q·Kᵀ): apple and cherry weigh most.
#include <cstdio>
#include "example_data.hpp"
#include "lesson_output.hpp"
#include "runtime/jit.hpp"

using namespace attn::dsl;

constexpr auto Q = dim<"Q">;      // queries (one here)
constexpr auto N = dim<"N">;      // dictionary entries
constexpr auto F = dim<"F", 4>;   // features: red, yellow, fruit, small

constexpr auto query = input<"query">(Q, F);
constexpr auto keys = input<"keys">(N, F);
constexpr auto values = input<"values">(N, F);

// α = softmax(q·Kᵀ), the looked-up value Σ αᵢ vᵢ (the seed's lookup is unscaled).
constexpr auto lookup = combine(softmax(matmul(query, transpose(keys))), values);

int main(int argc, char** argv) {
  examples::lesson_output out("soft_lookup", argc, argv);
  const std::vector<std::string> words = {"apple", "banana", "cherry"}, features = {"red", "yellow", "fruit", "small"};
  //                                       red  yellow fruit small
  const auto K = examples::matrix({{1, 0, 1, 0},    // apple:  a red fruit
                                   {0, 1, 1, 0},    // banana: a yellow fruit
                                   {1, 0, 1, 1}});  // cherry: a small red fruit
  const auto V = K;                                 // each entry returns its description
  const auto q = examples::matrix({{1, 0, 1, 0}});  // "red fruit"

  std::printf("lookup = %s\n\n", to_string(lookup).c_str());
  const attn::outputs r = attn::jit(lookup, {.with_weights = true}).run(q, K, V);
  examples::print_labeled("weights α for the query \"red fruit\"", r.weights, {"red fruit"}, words);
  examples::print_labeled("blended value Σ αᵢ vᵢ", r.output, {"red fruit"}, features);
  std::printf("\napple and cherry share both features of the query, banana only \"fruit\".\n");

  out.heatmap("soft_lookup_weights.png", r.weights,
              {.title = "query \"red fruit\": weight of each key", .row_labels = {"red fruit"}, .col_labels = words,
               .lo = 0.0, .hi = 1.0});
  out.record = {{"keys", words}, {"query", examples::to_json(q)}, {"key_vectors", examples::to_json(K)},
                {"value_vectors", examples::to_json(V)}, {"weights", examples::to_json(r.weights)},
                {"blended", examples::to_json(r.output)}};
  out.save();
  return 0;
}
