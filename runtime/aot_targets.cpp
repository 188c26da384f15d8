#include "aot_targets.hpp"

#include "errors.hpp"

namespace attn::detail {

namespace {

using Arch = Halide::Target::Arch;

// What the kernels are known to build for (each: attn-gen causal_attention for the arch's
// linux target, or wasm-32-wasmrt, hexagon-32-noos-hvx), and why the others are refused.
std::string refusal(Arch arch) {
  switch (arch) {
    case Arch::X86:
    case Arch::ARM:
    case Arch::POWERPC:
    case Arch::WebAssembly:
    case Arch::Hexagon:
      return {};
    case Arch::RISCV:
      return "attnforge's kernels do not build for RISC-V with Halide " + std::to_string(HALIDE_VERSION_MAJOR) +
             ": with rvv, its vector-predicated code generation fails an LLVM assertion on the kernels' vector selects; "
             "without, Halide refuses RISC-V (no vector_bits)";
    default:
      return "attnforge's kernels build for x86, ARM, POWER, WebAssembly and Hexagon targets";
  }
}

Halide::Target parse(const std::string& spelled) {
  std::string s = spelled;
  if (s == "host" || s.starts_with("host-")) s = Halide::get_host_target().to_string() + s.substr(4);
  if (!Halide::Target::validate_target_string(s)) throw compile_error("unknown target '" + spelled + "'");
  const Halide::Target t(s);
  if (const std::string why = refusal(t.arch); !why.empty()) throw compile_error("target '" + spelled + "': " + why);
  if (!t.supported())
    throw compile_error("target '" + spelled + "': this libHalide was built without code generation for its architecture");
  return t;
}

std::string machine(const Halide::Target& t) { return Halide::Target(t.os, t.arch, t.bits).to_string(); }

}  // namespace

std::vector<Halide::Target> aot_targets(const std::vector<std::string>& spelled) {
  if (spelled.empty()) throw argument_error("no target given");
  std::vector<Halide::Target> targets;
  for (std::size_t i = 0; i < spelled.size(); ++i) {
    targets.push_back(parse(spelled[i]));
    for (std::size_t j = 0; j < i; ++j) {
      if (targets[j] == targets[i])
        throw compile_error(spelled[j] == spelled[i] ? "target '" + spelled[i] + "' is given twice: the targets of a library must differ"
                                                     : "targets '" + spelled[j] + "' and '" + spelled[i] + "' are the same (" +
                                                           targets[i].to_string() + "): the targets of a library must differ");
      if (machine(targets[j]) != machine(targets[i]))
        throw compile_error("targets '" + spelled[j] + "' and '" + spelled[i] + "' are for different machines (" + machine(targets[j]) +
                            ", " + machine(targets[i]) + "): one library holds code for one architecture, bit width and OS");
    }
  }
  return targets;
}

}  // namespace attn::detail
