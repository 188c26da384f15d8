// Inspecting what attnforge builds: an expression as math text and as a Graphviz graph (DOT and
// PNG), and the compiled kernel's loop nest as Halide lowered it (text and a browsable HTML page).
#include <algorithm>
#include <cstdio>
#include <sstream>
#include "lesson_output.hpp"
#include "pictures/graph_picture.hpp"
#include "runtime/jit.hpp"

using namespace attn::dsl;

constexpr auto T = dim<"T">;
constexpr auto D = dim<"D", 64>;
constexpr auto Dk = dim<"Dk", 16>;
constexpr auto x = input<"x">(T, D);
constexpr auto wq = weight<"wq">(D, Dk);
constexpr auto wk = weight<"wk">(D, Dk);
constexpr auto wv = weight<"wv">(D, Dk);
constexpr auto y = variants::causal_self_attention(x, wq, wk, wv);

int main(int argc, char** argv) {
  examples::lesson_output out("inspect_kernel", argc, argv);
  std::printf("y = %s\n  shape %s, parameters in call order:", to_string(y).c_str(), shape_text(y).c_str());
  const auto kernel = attn::jit(y);
  for (const auto& p : kernel.parameters()) std::printf(" %s", p.c_str());
  // Which lowering runs (fused: one pipeline with an online softmax over key tiles) and its schedule.
  std::printf("\nkernel: %s\n\n", kernel.compiled().describe().c_str());

  out.text_file("causal_self_attention.dot", to_dot(y));
  pictures::graph_picture(out.path("causal_self_attention.png"), to_dot(y));
  out.wrote("causal_self_attention.png");

  const std::string stmt = kernel.loop_nest();
  out.text_file("causal_self_attention.stmt", stmt);
  out.text_file("causal_self_attention.html", kernel.loop_nest(attn::listing::html));
  // The skeleton of the loop nest: which stage is produced where, and its loops.
  std::printf("\nthe loop nest has %zu lines; its skeleton (produce: a stage computed; for, parallel: loops):\n",
              static_cast<std::size_t>(std::count(stmt.begin(), stmt.end(), '\n')));
  std::istringstream lines(stmt);
  for (std::string line; std::getline(lines, line);) {
    const std::string body = line.substr(std::min(line.find_first_not_of(' '), line.size()));
    if (body.starts_with("produce ") || body.starts_with("for (") || body.starts_with("parallel (") || body.starts_with("vectorized ("))
      std::printf("  %s\n", line.c_str());
  }
  out.record = {{"expression", to_string(y)}, {"parameters", kernel.parameters()}, {"describe", kernel.compiled().describe()},
                {"loop_nest_lines", std::count(stmt.begin(), stmt.end(), '\n')}};
  out.save();
  return 0;
}
