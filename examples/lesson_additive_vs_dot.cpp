// Lesson: additive (Bahdanau) vs dot-product (Luong) vs scaled dot-product attention (seed 002),
// on the same decoder states s and encoder states h. Same softmax, same weighted sum of h; only
// the score differs:
//   Luong dot       e_ij = s_iᵀ·h_j
//   Luong general   e_ij = s_iᵀ·W·h_j
//   scaled dot      e_ij = s_iᵀ·h_j / √d
//   Bahdanau        e_ij = vᵀ·tanh(W₁·s_i + W₂·h_j + b)   (a small network; not a dot product)
#include <cstdio>
#include "example_data.hpp"
#include "lesson_output.hpp"
#include "runtime/jit.hpp"

using namespace attn::dsl;

constexpr auto Nq = dim<"Nq">;      // decoder steps
constexpr auto Nk = dim<"Nk">;      // encoder positions
constexpr auto Dh = dim<"Dh", 6>;   // hidden state width
constexpr auto A = dim<"A", 5>;     // alignment-network width

constexpr auto s = input<"s">(Nq, Dh);
constexpr auto h = input<"h">(Nk, Dh);
constexpr auto W = weight<"W">(Dh, Dh);
constexpr auto W1 = weight<"W1">(Dh, A);
constexpr auto W2 = weight<"W2">(Dh, A);
constexpr auto b = weight<"b">(A);
constexpr auto v = weight<"v">(A);

constexpr auto dot = variants::luong_dot(s, h);
constexpr auto general = variants::luong_general(s, h, W);
constexpr auto scaled_dot = variants::simplified(s, h);  // softmax(s·hᵀ/√Dh)·h
constexpr auto additive = variants::bahdanau(s, h, W1, W2, b, v);
static_assert(shape_of(dot) == shape(Nq, Dh) && shape_of(additive) == shape(Nq, Dh));

int main(int argc, char** argv) {
  examples::lesson_output out("additive_vs_dot", argc, argv);
  const auto S = examples::random_tensor({3, 6}, 1), Hs = examples::random_tensor({5, 6}, 2);
  const auto Wg = examples::random_tensor({6, 6}, 3, 0.4f), Wa1 = examples::random_tensor({6, 5}, 4, 0.5f),
             Wa2 = examples::random_tensor({6, 5}, 5, 0.5f), B = examples::random_tensor({5}, 6, 0.1f),
             Vv = examples::random_tensor({5}, 7);
  const std::vector<std::string> steps = {"s1", "s2", "s3"}, positions = {"h1", "h2", "h3", "h4", "h5"};
  out.record["inputs"] = {{"s", examples::to_json(S)}, {"h", examples::to_json(Hs)}, {"W", examples::to_json(Wg)},
                          {"W1", examples::to_json(Wa1)}, {"W2", examples::to_json(Wa2)}, {"b", examples::to_json(B)},
                          {"v", examples::to_json(Vv)}};

  std::string costliest;
  double most_flops = 0;
  auto show = [&](const char* name, const auto& expr, const attn::outputs& r) {
    const double flops = cost(expr).at(Nq = 3, Nk = 5).flops, flops_big = cost(expr).at(Nq = 512, Nk = 512).flops;
    if (flops > most_flops) costliest = name, most_flops = flops;
    std::printf("%s = %s\n  FLOPs: %.0f here, %.3g at Nq = Nk = 512\n", name, to_string(expr).c_str(), flops, flops_big);
    examples::print_labeled("  α", r.weights, steps, positions);
    examples::print_labeled("  context c = α·h", r.output, steps, {"1", "2", "3", "4", "5", "6"});
    std::printf("\n");
    out.heatmap(std::string("weights_") + name + ".png", r.weights,
                {.title = std::string(name) + ": α", .row_labels = steps, .col_labels = positions, .row_axis = "decoder step",
                 .col_axis = "encoder position", .lo = 0.0, .hi = 1.0});
    out.record[name] = {{"expression", to_string(expr)}, {"weights", examples::to_json(r.weights)},
                        {"context", examples::to_json(r.output)}, {"flops", flops}};
  };
  const attn::jit_options with_weights{.with_weights = true};
  show("luong_dot", dot, attn::jit(dot, with_weights).run(S, Hs));
  show("luong_general", general, attn::jit(general, with_weights).run(S, Hs, Wg));
  show("scaled_dot", scaled_dot, attn::jit(scaled_dot, with_weights).run(S, Hs));
  show("bahdanau", additive, attn::jit(additive, with_weights).run(S, Hs, Wa1, Wa2, B, Vv));
  std::printf("The costliest score here: %s (%.0f FLOPs). Compare the luong_dot and scaled_dot rows of α: "
              "dividing by √d flattens them.\n", costliest.c_str(), most_flops);
  out.save();
  return 0;
}
