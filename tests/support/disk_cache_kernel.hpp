#pragma once
// The kernel the disk cache tests compile, in the test and in its writer processes alike:
// causal self-attention as in the main example, on fixed random inputs.
#include <random>
#include <vector>
#include "reference.hpp"
#include "runtime/jit.hpp"

namespace disk_cache_test {

using namespace attn::dsl;

constexpr auto T = dim<"T">;
constexpr auto D = dim<"D", 16>;
constexpr auto Dk = dim<"Dk", 8>;
constexpr auto x = input<"x">(T, D);
constexpr auto y = variants::causal_self_attention(x, weight<"wq">(D, Dk), weight<"wk">(D, Dk), weight<"wv">(D, Dk));

// The output of the kernel, compiled with `options`, on the fixed inputs.
inline std::vector<float> run(const attn::jit_options& options = {}) {
  std::mt19937 rng(7);
  const auto X = attn::ref::random_tensor({9, 16}, rng), WQ = attn::ref::random_tensor({16, 8}, rng, 0.5f),
             WK = attn::ref::random_tensor({16, 8}, rng, 0.5f), WV = attn::ref::random_tensor({16, 8}, rng, 0.5f);
  const attn::tensor<float> out = attn::jit(y, options)(X, WQ, WK, WV);
  return out.values();
}

}  // namespace disk_cache_test
