// The gradients of an attention variant with a learned per-distance bias: derived from the
// expression, compiled once, printed and costed; checked here against central differences of the
// forward kernel.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include "example_data.hpp"
#include "runtime/jit.hpp"

using namespace attn::dsl;

constexpr auto T = dim<"T">;
constexpr auto H = head_dim<"H", 2>;
constexpr auto Dh = dim<"Dh", 8>;
constexpr auto R = dim<"R", 9>;  // distances -4 .. 4
constexpr auto q = input<"q">(H, T, Dh);
constexpr auto k = input<"k">(H, T, Dh);
constexpr auto v = input<"v">(H, T, Dh);
constexpr auto bias = weight<"bias">(R, H);  // learned: a bias per distance and head
constexpr auto y = combine(softmax(causal(modify(scaled_scores(q, k), score + gather(bias, q_idx - kv_idx + 4, head)))), v);

int main() {
  auto Q = examples::random_tensor({2, 5, 8}, 1), K = examples::random_tensor({2, 5, 8}, 2), V = examples::random_tensor({2, 5, 8}, 3),
       B = examples::random_tensor({9, 2}, 4), dY = examples::random_tensor({2, 5, 8}, 5);
  // [snippet: gradients]
  auto forward = attn::jit(y, {.with_lse = true});  // the output and each row's log-sum-exp
  auto grad = attn::jit_gradients(y);               // compiled once, like attn::jit(y)
  attn::outputs o = forward.run(Q, K, V, B);        // the forward pass of a training step
  attn::gradients d = grad(dY, attn::saved{o.output, o.lse}, Q, K, V, B);  // dY, what it saved, its tensors
  const attn::tensor<float>& d_bias = d["bias"];    // d(Σ dY∘y)/d(bias), shaped like bias
  std::puts(to_string(grad.graph()).c_str());       // the gradient expression
  // [end snippet]
  auto loss = [&] {  // Σ dY∘y, in double
    const auto out = forward(Q, K, V, B);
    double s = 0;
    for (std::size_t i = 0; i < out.values().size(); ++i) s += double(dY.values()[i]) * out.values()[i];
    return s;
  };
  double worst = 0;
  for (std::size_t i = 0; i < B.values().size(); ++i) {
    const float kept = B.values()[i], h = 1e-2f;
    B.values()[i] = kept + h;
    const double up = loss();
    B.values()[i] = kept - h;
    const double down = loss();
    B.values()[i] = kept;
    worst = std::max(worst, std::abs((up - down) / (2 * h) - d_bias.values()[i]));
  }
  std::printf("d_bias against central differences: largest difference %.2e\n", worst);
  return worst < 1e-3 ? 0 : 1;
}
