// Lesson: self-attention over "The cat sat on the mat" (seed 003, sections 5 and 6), drawn as a
// heatmap, and which noun a later "it" attends to. Toy embeddings and hand-set projections stand in for learned ones: W_Q turns each
// word into the question it asks (a verb looks for nouns, a preposition for a place, an article
// for its noun, a noun for its verb); W_K and W_V pass the features through.
#include <algorithm>
#include <cstdio>
#include "example_data.hpp"
#include "lesson_output.hpp"
#include "runtime/jit.hpp"

using namespace attn::dsl;

constexpr auto T = dim<"T">;
constexpr auto D = dim<"D", 6>;  // features: article, noun, animal, place, verb, preposition
constexpr auto x = input<"x">(T, D);
constexpr auto wq = weight<"wq">(D, D);
constexpr auto wk = weight<"wk">(D, D);
constexpr auto wv = weight<"wv">(D, D);
constexpr auto attention = variants::self_attention(x, wq, wk, wv);  // softmax(XW_Q·(XW_K)ᵀ/√D)·XW_V

// Seed 003 §6: a later "it" asks which noun it refers to; its question is given directly.
constexpr auto Q = dim<"Q">;
constexpr auto it = input<"it">(Q, D);
constexpr auto resolve = scaled_dot_product_attention(it, project(x, wk), project(x, wv));

int main(int argc, char** argv) {
  examples::lesson_output out("cat_sat_heatmap", argc, argv);
  const std::vector<std::string> tokens = {"The", "cat", "sat", "on", "the", "mat"};
  //                                article noun animal place verb prep
  const auto X = examples::matrix({{1, 0, 0, 0, 0, 0},    // The
                                   {0, 1, 1, 0, 0, 0},    // cat
                                   {0, 0, 0, 0, 1, 0},    // sat
                                   {0, 0, 0, 0, 0, 1},    // on
                                   {1, 0, 0, 0, 0, 0},    // the
                                   {0, 1, 0, 1, 0, 0}});  // mat
  // Row f of W_Q: what a word with feature f looks for, in key features.
  const auto WQ = examples::matrix({{0, 5, 0, 0, 0, 0},    // an article looks for a noun
                                    {0, 0, 0, 0, 5, 0},    // a noun looks for the verb
                                    {0, 0, 0, 0, 0, 0},
                                    {0, 0, 0, 0, 0, 0},
                                    {0, 5, 0, 0, 0, 0},    // a verb looks for nouns: who sat, on what
                                    {0, 0, 0, 5, 0, 0}});  // a preposition looks for a place
  attn::tensor<float> I({6, 6});
  for (int i = 0; i < 6; ++i) I(i, i) = 1;

  std::printf("attention = %s\n\n", to_string(attention).c_str());
  const attn::outputs r = attn::jit(attention, {.with_weights = true}).run(X, WQ, I, I);
  examples::print_labeled("attention weights (row: the token asking, column: the token answering)", r.weights, tokens, tokens);

  const std::int64_t sat = 2;
  std::vector<std::size_t> order(tokens.size());
  for (std::size_t j = 0; j < order.size(); ++j) order[j] = j;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return r.weights(sat, a) > r.weights(sat, b); });
  std::printf("\n\"sat\" attends most to \"%s\" (%.2f) and \"%s\" (%.2f): who sat, and where.\n", tokens[order[0]].c_str(),
              r.weights(sat, order[0]), tokens[order[1]].c_str(), r.weights(sat, order[1]));

  // "it" looks for a noun, preferably an animal, over "The cat sat on the mat ." (the period has
  // no features here).
  const std::vector<std::string> sentence = {"The", "cat", "sat", "on", "the", "mat", "."};
  attn::tensor<float> X7({7, 6});
  std::copy(X.values().begin(), X.values().end(), X7.values().begin());
  const auto question = examples::matrix({{0, 2, 1, 0, 0, 0}});  // noun 2, animal 1
  const attn::outputs it_r = attn::jit(resolve, {.with_weights = true}).run(question, X7, I, I);
  std::printf("\nresolve = %s\n", to_string(resolve).c_str());
  examples::print_labeled("query \"it\"", it_r.weights, {"it"}, sentence);
  out.heatmap("it_refers_to.png", it_r.weights,
              {.title = "\"it\": which token does it refer to?", .row_labels = {"it"}, .col_labels = sentence, .lo = 0.0, .hi = 1.0});

  out.heatmap("cat_sat_on_the_mat.png", r.weights,
              {.title = "The cat sat on the mat: attention weights", .row_labels = tokens, .col_labels = tokens, .lo = 0.0, .hi = 1.0});
  out.record = {{"tokens", tokens},
                {"x", examples::to_json(X)},
                {"wq", examples::to_json(WQ)},
                {"weights", examples::to_json(r.weights)},
                {"output", examples::to_json(r.output)},
                {"it_query", examples::to_json(question)},
                {"it_keys", examples::to_json(X7)},
                {"it_weights", examples::to_json(it_r.weights)}};
  out.save();
  return 0;
}
