// PyTorch attention-gym's masks and score modifiers, each one line of attnforge
// (dsl/attention_gym.hpp): the expression, which keys each query keeps (from the weights), and
// the fused kernel checked against the generic one. tests/test_catalogue.cpp checks every entry
// against an independent reference.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>
#include "example_data.hpp"
#include "runtime/jit.hpp"

using namespace attn::dsl;

constexpr auto T = dim<"T">;
constexpr auto H = head_dim<"H", 2>;
constexpr auto Dk = dim<"Dk", 8>;
constexpr auto q = input<"q">(H, T, Dk);
constexpr auto k = input<"k">(H, T, Dk);
constexpr auto v = input<"v">(H, T, Dk);
constexpr auto s = scaled_scores(q, k);
constexpr std::int64_t n = 24;  // tokens (a 6 × 4 canvas for the 2-D masks)

int failures = 0;

// Shows which keys query i keeps (head 0, '#': weight > 0) and compares fused with generic.
// Tensors go by name: an extra tensor read inside the scores comes before v in call order.
template <class E>
void show(const char* name, const E& y, std::vector<attn::named_tensor> extra = {}) {
  const auto Q = examples::random_tensor({2, n, 8}, 1), K = examples::random_tensor({2, n, 8}, 2),
             V = examples::random_tensor({2, n, 8}, 3);
  extra.insert(extra.end(), {{"q", Q}, {"k", K}, {"v", V}});
  const attn::outputs generic = attn::jit(y, {.with_weights = true}).run(extra);
  const auto fused_kernel = attn::jit(y);
  const attn::tensor<float> fused = fused_kernel.run(extra).output;
  double diff = 0;
  for (std::int64_t i = 0; i < fused.size(0) * fused.size(1) * fused.size(2); ++i)
    diff = std::max(diff, static_cast<double>(std::abs(fused.data()[i] - generic.output.data()[i])));
  std::printf("%s: %s\n  %s; fused vs generic: max |difference| %.1e\n", name, to_string(y).c_str(),
              fused_kernel.compiled().describe().substr(0, 10).c_str(), diff);
  for (std::int64_t i = 0; i < n; ++i) {
    std::string row;
    for (std::int64_t j = 0; j < n; ++j) row += generic.weights(0, i, j) > 0 ? '#' : '.';
    std::printf("    %s\n", row.c_str());
  }
  if (!(diff < 1e-5)) ++failures;
}

int main() {
  attn::tensor<std::int32_t> doc({n}), branch({n});
  for (std::int64_t i = 0; i < n; ++i) {
    doc(i) = static_cast<std::int32_t>(i < 7 ? 0 : i < 16 ? 1 : 2);        // three packed documents
    branch(i) = static_cast<std::int32_t>(i < 8 ? 0 : i < 16 ? 1 : 2);     // a prompt, two continuations
  }
  attn::tensor<float> sandwich_bias({16});
  const std::vector<float> table = sandwich_table(16, 8);
  for (int d = 0; d < 16; ++d) sandwich_bias(d) = table[static_cast<std::size_t>(d)];
  const attn::tensor<float> t5_table = examples::random_tensor({8, 2}, 4), pair_bias = examples::random_tensor({n, n}, 5);

  show("causal", combine(softmax(causal(s)), v));
  show("sliding window 5", combine(softmax(sliding_window(s, 5)), v));
  show("global 2 + sliding window 4", combine(softmax(global_sliding_window(s, 2, 4)), v));
  show("prefix-LM 6", combine(softmax(prefix_lm(s, 6)), v));
  show("document masking", combine(softmax(document_causal(s, int_input<"doc">(T))), v), {{"doc", doc}});
  show("shared prefix", combine(softmax(shared_prefix(s, int_input<"branch">(T))), v), {{"branch", branch}});
  show("dilated sliding window 6, dilation 2", combine(softmax(dilated_sliding_window(s, 6, 2)), v));
  show("NATTEN 6 x 4, kernel 3 x 3", combine(softmax(natten_2d(s, 6, 4, 3, 3)), v));
  show("sliding tiles 6 x 4, tiles 2 x 2, kernel 1", combine(softmax(sliding_tile_2d(s, 6, 4, 2, 1)), v));
  show("block-causal 4", combine(softmax(block_causal(s, 4)), v));
  show("ALiBi + causal", combine(softmax(causal(alibi(s, H))), v));
  show("softcap 20 + causal", combine(softmax(causal(softcap(s, 20.0f))), v));
  show("T5 buckets (bidirectional, 8 buckets, up to 20)",
       combine(softmax(modify(s, score + gather(weight<"t5">(dim<"Buckets", 8>, H), t5_bucket<true>(8, 20), head))), v),
       {{"t5", t5_table}});
  show("Graphormer pair bias", combine(softmax(modify(s, score + gather(input<"pair">(T, T), q_idx, kv_idx))), v),
       {{"pair", pair_bias}});
  show("sandwich", combine(softmax(sandwich(s, weight<"sandwich">(dim<"Dist", 16>))), v), {{"sandwich", sandwich_bias}});
  std::printf("%s\n", failures == 0 ? "all fused kernels match the generic ones" : "MISMATCH");
  return failures == 0 ? 0 : 1;
}
