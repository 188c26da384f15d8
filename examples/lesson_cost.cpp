// Lesson: what multi-head self-attention costs (seed 002, "Step-by-step time complexity"):
// n = 5, d = 512, h = 8, d_k = 64. The table comes from the cost model, which reads the same
// expression that is compiled; then how the cost grows with n, where the n²·d term takes over.
#include <cstdio>
#include "example_data.hpp"
#include "lesson_output.hpp"
#include "runtime/jit.hpp"

using namespace attn::dsl;

constexpr auto T = dim<"T">;
constexpr auto D = dim<"D", 512>;
constexpr auto H = head_dim<"H", 8>;
constexpr auto x = input<"x">(T, D);
constexpr auto wq = weight<"wq">(D, D);
constexpr auto wk = weight<"wk">(D, D);
constexpr auto wv = weight<"wv">(D, D);
constexpr auto wo = weight<"wo">(D, D);
constexpr auto mha = variants::multi_head_self_attention(x, wq, wk, wv, wo, H);

// The seed's numbers, checked by the compiler: Q·Kᵀ is n²·d_k = 1600 per head, n²·d = 12,800 in all.
static_assert(cost(mha).at(T = 5).steps[2].per_head_work == 1600 && cost(mha).at(T = 5).steps[2].work == 12'800);

int main(int argc, char** argv) {
  examples::lesson_output out("cost", argc, argv);
  const cost_report report = cost(mha);
  std::printf("mha = %s\nwork = %s = %s\n\n", to_string(mha).c_str(), to_string(report.work()).c_str(), big_o(report).c_str());

  const cost_values at5 = report.at(T = 5);
  std::printf("n = 5, d = 512, h = 8, d_k = 64 (work: multiply-adds, one per element for softmax/scale)\n");
  std::printf("  %-10s %14s %14s %14s\n", "step", "work/head", "work", "FLOPs");
  nlohmann::json steps = nlohmann::json::array();
  for (const step_value& s : at5.steps) {
    std::printf("  %-10s %14.0f %14.0f %14.0f\n", std::string(s.label).c_str(), s.per_head_work, s.work, s.flops);
    steps.push_back({{"step", s.label}, {"per_head_work", s.per_head_work}, {"work", s.work}, {"flops", s.flops}});
  }
  std::printf("  %-10s %14s %14.0f %14.0f\n\n", "total", "", at5.work, at5.flops);

  // Growth with n: the n·d² part (projections) against the n² part (scores, softmax, α·V).
  const polynomial linear = report.work().part_of_degree("T", 1), quadratic = report.work().part_of_degree("T", 2);
  std::printf("growth with n:  n·d² part = %s,  n² part = %s\n", to_string(linear).c_str(), to_string(quadratic).c_str());
  std::printf("  %8s %16s %16s %10s\n", "n", "n·d² part", "n² part", "n² share");
  pictures::series lin{"n·d² part: " + to_string(linear), {}, {}}, quad{"n² part: " + to_string(quadratic), {}, {}};
  nlohmann::json growth = nlohmann::json::array();
  for (double n : {5.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0}) {
    const double l = linear.at(T = static_cast<std::int64_t>(n)), q = quadratic.at(T = static_cast<std::int64_t>(n));
    std::printf("  %8.0f %16.4g %16.4g %9.1f%%\n", n, l, q, 100 * q / (l + q));
    lin.x.push_back(n), lin.y.push_back(l), quad.x.push_back(n), quad.y.push_back(q);
    growth.push_back({{"n", n}, {"linear", l}, {"quadratic", q}});
  }
  out.line_plot("cost_growth.png",
                {.title = "Multi-head self-attention, d = 512, h = 8: work vs sequence length", .x_label = "n (tokens)",
                 .y_label = "multiply-adds", .log_x = true, .log_y = true},
                {lin, quad});
  out.record = {{"steps", steps}, {"total_work", at5.work}, {"total_flops", at5.flops}, {"big_o", big_o(report)},
                {"growth", growth}};
  out.save();
  return 0;
}
