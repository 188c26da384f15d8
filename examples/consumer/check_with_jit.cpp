// Checks run_kernels' outputs against attnforge's JIT kernels of the same expressions, sizes and
// inputs: equal bit for bit (same lowering, schedule and target).
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include "generators/aot/named_variants.hpp"
#include "inputs.hpp"
#include "my_variants.hpp"
#include "runtime/jit.hpp"

namespace {

using namespace consumer;

template <class E, class DhDim>
bool check(const E& e, DhDim dh, std::int64_t heads, const std::filesystem::path& file) {
  const std::int64_t n = heads * T * Dh;
  auto tensor_of = [&](std::uint32_t seed) {
    attn::tensor<float> t({heads, T, Dh});
    t.values() = values(n, seed);
    return t;
  };
  const attn::tensor<float> jit = attn::jit(e, {.bind = {dh = Dh}})(tensor_of(1), tensor_of(2), tensor_of(3));
  std::ifstream in(file, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const bool same = bytes.size() == jit.values().size() * sizeof(float) && std::memcmp(bytes.data(), jit.data(), bytes.size()) == 0;
  std::printf("%s: %s the JIT kernel\n", file.c_str(), same ? "equals" : "DIFFERS FROM");
  return same;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: check_with_jit OUTPUT_DIR (of run_kernels)\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  const bool a = check(attn::named::causal_attention, attn::named::Dh, causal_heads, dir / "causal.bin");
  const bool b = check(my::causal_alibi, my::Dh, my_heads, dir / "mine.bin");
  return a && b ? 0 : 1;
}
