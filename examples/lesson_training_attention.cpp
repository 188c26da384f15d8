// Lesson: training an attention layer on the CPU, with attnforge's gradients (seed 001, "Training":
// all queries at once). The task: at every position, output the token 3 positions back. Token
// contents are random, so only position tells the layer where to look: a learned bias per
// distance, added to the scores, has to put its weight on distance 3.
//
//   logits = softmax(causal(q·kᵀ/√d + bias[q_idx - kv_idx]))·v · W_O,   q, k, v = x·W_Q, x·W_K, x·W_V
//
// Each step runs the layer forward on a batch of sequences (every query of every sequence in one
// call), computes the cross-entropy loss and its gradient dLoss/dlogits here, gets the gradient of
// every weight from one call of the compiled backward pass, and takes an Adam step.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>
#include "example_data.hpp"
#include "lesson_output.hpp"
#include "runtime/jit.hpp"

using namespace attn::dsl;

constexpr int tokens = 16, vocabulary = 8, distance = 3;  // copy the token `distance` positions back
constexpr int width = 8;                                  // of queries, keys and values
constexpr int batch = 16, steps = 200;
constexpr float rate = 0.02f;  // Adam's step size
// The claim: the cross-entropy (ln 8 ≈ 2.08 at chance) falls below `threshold` within `within` steps.
constexpr double threshold = 0.05;
constexpr int within = 100;

constexpr auto T = dim<"T", tokens>;
constexpr auto V = dim<"V", vocabulary>;  // tokens are one-hot rows of width V
constexpr auto D = dim<"D", width>;
constexpr auto R = dim<"R", tokens>;      // one bias per distance back, 0 … T - 1
constexpr auto x = input<"x">(T, V);
constexpr auto wq = weight<"wq">(V, D);
constexpr auto wk = weight<"wk">(V, D);
constexpr auto bias = weight<"bias">(R);
constexpr auto wv = weight<"wv">(V, D);
constexpr auto wo = weight<"wo">(D, V);

// The scores of query i against key j get bias[i - j]; keys after the query are masked.
constexpr auto scores = causal(modify(scaled_scores(project(x, wq), project(x, wk)), score + gather(bias, q_idx - kv_idx)));
constexpr auto logits = project(combine(softmax(scores), project(x, wv)), wo);

// A batch of random token sequences: ids (batch × T) and their one-hot rows (batch, T, V).
struct sequences {
  std::vector<int> ids;
  attn::tensor<float> one_hot;
};

sequences random_sequences(std::mt19937& rng) {
  sequences s{std::vector<int>(batch * tokens), attn::tensor<float>({batch, tokens, vocabulary})};
  for (int b = 0; b < batch; ++b)
    for (int i = 0; i < tokens; ++i) {
      const int id = static_cast<int>(rng() % vocabulary);
      s.ids[static_cast<std::size_t>(b * tokens + i)] = id;
      s.one_hot(b, i, id) = 1;
    }
  return s;
}

// Cross-entropy of softmax(logits[b, i]) against the token `distance` back, averaged over every
// position that has one; also dLoss/dlogits, the gradient the backward pass starts from.
struct loss_and_gradient {
  double loss = 0, accuracy = 0;
  attn::tensor<float> d_logits;
};

loss_and_gradient cross_entropy(const attn::tensor<float>& y, const sequences& s) {
  loss_and_gradient r{0, 0, attn::tensor<float>(y.sizes())};
  const double count = batch * (tokens - distance);
  int right = 0;
  for (int b = 0; b < batch; ++b)
    for (int i = distance; i < tokens; ++i) {
      const int target = s.ids[static_cast<std::size_t>(b * tokens + i - distance)];
      double top = y(b, i, 0), sum = 0;
      int best = 0;
      for (int c = 1; c < vocabulary; ++c)
        if (y(b, i, c) > top) top = y(b, i, c), best = c;
      for (int c = 0; c < vocabulary; ++c) sum += std::exp(y(b, i, c) - top);
      r.loss -= (y(b, i, target) - top - std::log(sum)) / count;
      right += best == target;
      for (int c = 0; c < vocabulary; ++c)  // d(-log p_target)/dlogit_c = p_c - [c = target]
        r.d_logits(b, i, c) = static_cast<float>((std::exp(y(b, i, c) - top) / sum - (c == target)) / count);
    }
  r.accuracy = right / count;
  return r;
}

// Adam (Kingma & Ba, 2015): each weight moves by its gradient's running mean over the square root
// of its running mean square, so every weight takes steps of about `rate` whatever its scale.
struct parameter {
  std::string name;
  attn::tensor<float> value;
  std::vector<float> mean{}, mean_square{};
};

void adam_step(std::vector<parameter>& params, const attn::gradients& d, int step) {
  const float beta1 = 0.9f, beta2 = 0.999f;
  const float correct1 = 1 - std::pow(beta1, float(step)), correct2 = 1 - std::pow(beta2, float(step));
  for (parameter& p : params) {
    const std::vector<float>& g = d[p.name].values();
    p.mean.resize(g.size()), p.mean_square.resize(g.size());
    for (std::size_t k = 0; k < g.size(); ++k) {
      p.mean[k] = beta1 * p.mean[k] + (1 - beta1) * g[k];
      p.mean_square[k] = beta2 * p.mean_square[k] + (1 - beta2) * g[k] * g[k];
      p.value.values()[k] -= rate * (p.mean[k] / correct1) / (std::sqrt(p.mean_square[k] / correct2) + 1e-8f);
    }
  }
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

nlohmann::json to_json(const std::vector<parameter>& params) {
  nlohmann::json j;
  for (const parameter& p : params) j[p.name] = examples::to_json(p.value);
  return j;
}

nlohmann::json to_json(const attn::gradients& d) {
  nlohmann::json j;
  for (std::size_t k = 0; k < d.size(); ++k) j[d.names[k]] = examples::to_json(d.values[k].as<float>());
  return j;
}

int main(int argc, char** argv) {
  examples::lesson_output out("training_attention", argc, argv);
  std::printf("model  = %s\ntask   = output the token %d positions back; %d tokens, vocabulary %d, %d sequences a step\n",
              to_string(logits).c_str(), distance, tokens, vocabulary, batch);

  // The forward pass and its backward pass: each compiled once, then called every step.
  const auto compiling = std::chrono::steady_clock::now();
  const auto forward = attn::jit(logits, {.with_lse = true});  // the log-sum-exp: saved for the backward
  const auto backward = attn::jit_gradients(logits);
  std::printf("compiled the forward and backward passes in %.1f s\n\n", seconds_since(compiling));

  std::vector<parameter> params{{"wq", examples::random_tensor({vocabulary, width}, 1, 0.5f)},
                                {"wk", examples::random_tensor({vocabulary, width}, 2, 0.5f)},
                                {"bias", attn::tensor<float>({tokens})},  // no preference for any distance yet
                                {"wv", examples::random_tensor({vocabulary, width}, 3, 0.5f)},
                                {"wo", examples::random_tensor({width, vocabulary}, 4, 0.5f)}};
  // The weights by name, and the forward pass on a batch with them.
  auto weight = [&](const char* name) -> const attn::tensor<float>& {
    return std::find_if(params.begin(), params.end(), [&](const parameter& p) { return p.name == name; })->value;
  };
  auto run = [&](const auto& kernel, const sequences& s) {  // kernel: with or without the attention weights
    return kernel.run({{"x", s.one_hot}, {"wq", weight("wq")}, {"wk", weight("wk")}, {"bias", weight("bias")},
                       {"wv", weight("wv")}, {"wo", weight("wo")}});
  };

  std::mt19937 rng(2024);
  std::vector<double> losses;
  int first_below = -1;
  const auto start = std::chrono::steady_clock::now();
  for (int step = 1; step <= steps; ++step) {
    // [snippet: step]
    const sequences s = random_sequences(rng);
    const attn::outputs y = run(forward, s);  // (batch, T, V): every query of every sequence at once
    const loss_and_gradient l = cross_entropy(y.output, s);
    // dLoss/dW for every weight (summed over the batch), from dLoss/dlogits, what the forward saved
    // and its tensors.
    const attn::gradients d = backward(l.d_logits, attn::saved{y.output, y.lse},
                                       {{"x", s.one_hot}, {"wq", weight("wq")}, {"wk", weight("wk")}, {"bias", weight("bias")},
                                        {"wv", weight("wv")}, {"wo", weight("wo")}});
    // [end snippet]
    if (step == 1)  // for test_lessons to check the gradients against its own
      out.record["first_step"] = {{"ids", s.ids}, {"weights", to_json(params)}, {"loss", l.loss}, {"gradients", to_json(d)}};
    adam_step(params, d, step);
    losses.push_back(l.loss);
    if (first_below < 0 && l.loss < threshold) first_below = step;
    if (step == 1 || step % 25 == 0)
      std::printf("step %3d: loss %.4f, accuracy %5.1f %%\n", step, l.loss, 100 * l.accuracy);
  }
  const double seconds = seconds_since(start);
  std::printf("\n%d steps in %.2f s; the loss first fell below %.2f at step %d (the claim: within %d)\n", steps, seconds,
              threshold, first_below, within);

  // The learned bias per distance: the largest should be at `distance`.
  const attn::tensor<float>& learned = weight("bias");
  const int peak = static_cast<int>(std::max_element(learned.values().begin(), learned.values().end()) - learned.values().begin());
  std::printf("learned bias by distance back:");
  for (float b : learned.values()) std::printf(" %+.1f", b);
  std::printf("\nits peak: distance %d\n", peak);

  // On fresh sequences: the loss, and one sequence's attention weights.
  const sequences test = random_sequences(rng);
  const attn::outputs result = run(attn::jit(logits, {.with_weights = true}), test);
  const loss_and_gradient l = cross_entropy(result.output, test);
  std::printf("fresh sequences: loss %.4f, accuracy %.1f %%\n", l.loss, 100 * l.accuracy);
  attn::tensor<float> weights({tokens, tokens});
  std::copy_n(result.weights.values().begin(), tokens * tokens, weights.values().begin());

  std::vector<std::string> labels, distances;
  for (int i = 0; i < tokens; ++i) {
    labels.push_back(std::to_string(i) + ": " + std::string(1, char('a' + test.ids[static_cast<std::size_t>(i)])));
    distances.push_back(std::to_string(i));
  }
  char goal_name[32];
  std::snprintf(goal_name, sizeof goal_name, "threshold %g", threshold);
  pictures::series curve{"training loss", {}, {}}, goal{goal_name, {}, {}, true};
  for (int step = 1; step <= steps; ++step) curve.x.push_back(step), curve.y.push_back(losses[static_cast<std::size_t>(step - 1)]);
  goal.x = {1.0, double(steps)}, goal.y = {threshold, threshold};
  out.line_plot("training_loss.png",
                {.title = "Cross-entropy while training (copy the token " + std::to_string(distance) + " back)", .x_label = "step",
                 .y_label = "loss", .log_y = true},
                {curve, goal});
  out.heatmap("learned_bias.png", learned,
              {.title = "Learned bias by distance", .row_labels = {"bias"}, .col_labels = distances, .row_axis = "",
               .col_axis = "distance back: q_idx - kv_idx"});
  out.heatmap("trained_weights.png", weights,
              {.title = "Attention weights after training (one fresh sequence)", .row_labels = labels,
               .col_labels = labels, .lo = 0.0, .hi = 1.0});

  out.record["task"] = {{"tokens", tokens}, {"vocabulary", vocabulary}, {"distance", distance}, {"batch", batch}};
  out.record["steps"] = steps;
  out.record["threshold"] = threshold;
  out.record["within"] = within;
  out.record["losses"] = losses;
  out.record["first_below"] = first_below;
  out.record["seconds"] = seconds;
  out.record["learned"] = to_json(params);
  out.record["bias_peak"] = peak;
  out.record["test"] = {{"ids", test.ids},
                        {"logits", examples::to_json(result.output)},
                        {"loss", l.loss},
                        {"accuracy", l.accuracy},
                        {"weights", examples::to_json(weights)}};
  out.save();
  return 0;
}
