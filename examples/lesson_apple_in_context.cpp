// Lesson: the same word in two contexts (seed 002, "Why context matters").
// "apple" has one static embedding, halfway between fruit and technology. Self-attention mixes
// in its neighbours, so its output leans toward fruit next to "ate, juicy, lunch" and toward
// technology next to "updated, phone, version". Toy embeddings, no learned weights.
#include <algorithm>
#include <cstdio>
#include <map>
#include "example_data.hpp"
#include "lesson_output.hpp"
#include "runtime/jit.hpp"

using namespace attn::dsl;

constexpr auto T = dim<"T">;
constexpr auto D = dim<"D", 4>;  // features: food, technology, action, grammar
constexpr auto x = input<"x">(T, D);
constexpr auto contextual = variants::simplified(x, x);  // softmax(X·Xᵀ/√D)·X

// The toy vocabulary: food, technology, action, grammar.
const std::map<std::string, std::vector<float>> vocabulary = {
    {"I", {0, 0, 0, 1}},        {"a", {0, 0, 0, 1}},         {"my", {0, 0, 0, 1}},      {"to", {0, 0, 0, 1}},
    {"the", {0, 0, 0, 1}},      {"after", {0, 0, 0, 1}},     {"ate", {2, 0, 1.5f, 0}},  {"juicy", {2.5f, 0, 0, 0}},
    {"lunch", {2, 0, 0, 0}},    {"updated", {0, 2, 1.5f, 0}}, {"phone", {0, 2.5f, 0, 0}}, {"latest", {0, 1.5f, 0, 0}},
    {"version", {0, 2, 0, 0}},  {"apple", {1.5f, 1.5f, 0, 0}}};

attn::tensor<float> embed(const std::vector<std::string>& sentence) {
  attn::tensor<float> t({static_cast<std::int64_t>(sentence.size()), 4});
  for (std::size_t i = 0; i < sentence.size(); ++i)
    for (std::size_t f = 0; f < 4; ++f) t.values()[i * 4 + f] = vocabulary.at(sentence[i])[f];
  return t;
}

int main(int argc, char** argv) {
  examples::lesson_output out("apple_in_context", argc, argv);
  const auto kernel = attn::jit(contextual, {.with_weights = true});
  const std::vector<std::vector<std::string>> sentences = {
      {"I", "ate", "a", "juicy", "apple", "after", "lunch"},
      {"I", "updated", "my", "apple", "phone", "to", "the", "latest", "version"}};
  std::printf("contextual = %s\nstatic \"apple\": food 1.50, technology 1.50\n\n", to_string(contextual).c_str());

  out.record["sentences"] = nlohmann::json::array();
  for (std::size_t s = 0; s < sentences.size(); ++s) {
    const auto& words = sentences[s];
    const auto X = embed(words);
    const attn::outputs r = kernel.run(X);
    const std::int64_t at = std::find(words.begin(), words.end(), "apple") - words.begin();
    const float food = r.output(at, 0), tech = r.output(at, 1);
    std::string text;
    for (const auto& w : words) text += (text.empty() ? "" : " ") + w;
    std::printf("\"%s\"\n  apple → food %.2f, technology %.2f: leans toward %s\n", text.c_str(), food, tech,
                food > tech ? "fruit" : "technology");
    const std::string file = "apple_in_context_" + std::to_string(s + 1) + ".png";
    out.heatmap(file, r.weights, {.title = text, .row_labels = words, .col_labels = words, .lo = 0.0, .hi = 1.0});
    out.record["sentences"].push_back({{"words", words}, {"embeddings", examples::to_json(X)},
                                       {"weights", examples::to_json(r.weights)}, {"output", examples::to_json(r.output)},
                                       {"apple_food", food}, {"apple_technology", tech}});
  }
  out.save();
  return 0;
}
