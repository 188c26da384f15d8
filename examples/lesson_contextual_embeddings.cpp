// Lesson: contextual embeddings from first principles (seed 004): "money bank grows".
// Every word asks every word: S = Q·Kᵀ, then scaled S/√d_k, then weights softmax(S/√d_k), then
// Y = weights·V. Each step is its own expression, compiled and run, printed with its shape.
// As in the seed, Q = K = V = the words' embeddings (no learned projections yet).
#include <cstdio>
#include "example_data.hpp"
#include "lesson_output.hpp"
#include "runtime/jit.hpp"

using namespace attn::dsl;

constexpr auto T = dim<"T">;     // words
constexpr auto D = dim<"D", 4>;  // embedding width: finance, river, growth, nature
constexpr auto e = input<"E">(T, D);

constexpr auto scores = matmul(e, transpose(e));     // S = Q·Kᵀ
constexpr auto scaled = scale(scores, rsqrt(D));     // S / √d_k
constexpr auto weights = softmax(scaled);            // each row sums to 1
constexpr auto contextual = combine(weights, e);     // Y = softmax(Q·Kᵀ/√d_k)·V
static_assert(shape_of(weights) == shape(T, T) && shape_of(contextual) == shape(T, D));

int main(int argc, char** argv) {
  examples::lesson_output out("contextual_embeddings", argc, argv);
  const std::vector<std::string> words = {"money", "bank", "grows"}, features = {"finance", "river", "growth", "nature"};
  //                                      finance river growth nature
  const auto E = examples::matrix({{2.0f, 0.0f, 0.5f, 0.0f},    // money
                                   {1.2f, 1.0f, 0.0f, 0.4f},    // bank: money's bank or a river's?
                                   {0.4f, 0.0f, 2.0f, 0.8f}});  // grows

  nlohmann::json steps = nlohmann::json::array();
  auto show = [&](const char* name, const auto& expr, const std::vector<std::string>& cols) {
    const attn::tensor<float> m = attn::jit(expr)(E);
    examples::print_labeled(std::string(name) + " = " + to_string(expr) + ", shape " + shape_text(expr, T = 3), m, words, cols);
    std::printf("\n");
    steps.push_back({{"name", name}, {"shape", shape_text(expr)}, {"matrix", examples::to_json(m)}});
    return m;
  };
  show("S", scores, words);
  show("S_scaled", scaled, words);
  const auto w = show("weights", weights, words);
  const auto y = show("Y", contextual, features);

  std::printf("\"bank\" now carries %.2f of finance (was %.2f) and %.2f of river (was %.2f): money pulled it.\n",
              y(1, 0), E(1, 0), y(1, 1), E(1, 1));
  out.heatmap("money_bank_grows_weights.png", w,
              {.title = "money bank grows: softmax(Q·Kᵀ/√d_k)", .row_labels = words, .col_labels = words, .lo = 0.0, .hi = 1.0});
  out.record = {{"words", words}, {"embeddings", examples::to_json(E)}, {"steps", steps}};
  out.save();
  return 0;
}
