// Masks and score modifiers as expressions of q_idx, kv_idx, head: key padding by per-sequence
// lengths, a sliding window with ALiBi, and soft-capping. Each is a line; each is fused.
#include <cstdio>
#include "example_data.hpp"
#include "runtime/jit.hpp"

using namespace attn::dsl;

constexpr auto T = dim<"T">;
constexpr auto D = dim<"D", 8>;
constexpr auto H = head_dim<"H", 2>;
constexpr auto x = input<"x">(T, D);
constexpr auto len = lengths<"len">;

int main() {
  constexpr auto q = split_heads(x, H), k = split_heads(x, H), v = split_heads(x, H);
  constexpr auto s = scaled_scores(q, k);

  // Key padding: sequence b only has len[b] real tokens.
  constexpr auto padded = concat_heads(combine(softmax(key_padding(s, len)), v));
  // Sliding window of 3 with ALiBi slopes per head.
  constexpr auto local = concat_heads(combine(softmax(alibi(sliding_window(s, 3), H)), v));
  // Soft-capped logits (cap 5) and a custom rule: even heads ignore the first token.
  constexpr auto custom = concat_heads(combine(softmax(mask(softcap(s, 5.0f), head % 2 == 1 || kv_idx > 0)), v));

  const auto X = examples::random_tensor({2, 5, 8}, 1);  // batch of 2 sequences of 5 tokens
  attn::tensor<std::int32_t> L({2});
  L(0) = 5;
  L(1) = 3;
  std::printf("padded: %s\n", to_string(padded).c_str());
  examples::print_matrix("  weights, sequence 1, head 0 (keys 3, 4 are padding)",
                         [&] {
                           auto w = attn::jit(padded, {.with_weights = true}).run(X, L).weights;  // (2, H, T, T)
                           attn::tensor<float> m({5, 5});
                           for (int i = 0; i < 5; ++i)
                             for (int j = 0; j < 5; ++j) m(i, j) = w(1, 0, i, j);
                           return m;
                         }());
  std::printf("local:  %s\n", to_string(local).c_str());
  std::printf("custom: %s\n", to_string(custom).c_str());
  const auto y1 = attn::jit(local)(X), y2 = attn::jit(custom)(X);
  std::printf("outputs: %lld x %lld x %lld each\n", (long long)y1.size(0), (long long)y1.size(1), (long long)y2.size(2));
  return 0;
}
