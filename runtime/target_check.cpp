#include "target_check.hpp"

#include "errors.hpp"

namespace attn::detail {

namespace {

using F = Halide::Target::Feature;

// Features that select instructions: code using them faults (SIGILL) on a CPU without them.
constexpr F instruction_set_features[] = {
    F::SSE41, F::AVX, F::AVX2, F::AVXVNNI, F::FMA, F::FMA4, F::F16C, F::AVX512, F::AVX512_KNL, F::AVX512_Skylake,
    F::AVX512_Cannonlake, F::AVX512_SapphireRapids, F::AVX512_Zen4, F::AVX512_Zen5, F::AVX10_1, F::X86APX,
    F::ARMv7s, F::VSX, F::POWER_ARCH_2_07, F::SVE, F::SVE2, F::ARMDotProd, F::ARMFp16, F::RVV, F::ARMv8a,
    F::ARMv81a, F::ARMv82a, F::ARMv83a, F::ARMv84a, F::ARMv85a, F::ARMv86a, F::ARMv87a, F::ARMv88a, F::ARMv89a,
    F::HVX_128, F::HVX_v62, F::HVX_v65, F::HVX_v66, F::HVX_v68, F::WasmSimd128, F::WasmThreads, F::WasmBulkMemory};

}  // namespace

void check_jit_can_run(const Halide::Target& target, const std::string& spelled) {
  const Halide::Target host = Halide::get_host_target();
  const std::string why = "target '" + spelled + "' cannot run in this process (host: " + host.to_string() + "): ";
  const std::string aot = "; compile for other machines ahead of time (AOT) instead of with attn::jit";
  if (target.arch != host.arch || target.bits != host.bits || target.os != host.os) {
    const Halide::Target other(target.os, target.arch, target.bits);
    throw compile_error(why + "it is for " + other.to_string() + aot);
  }
  for (F f : instruction_set_features)
    if (target.has_feature(f) && !host.has_feature(f))
      throw compile_error(why + "this CPU lacks the instruction-set feature '" + Halide::Target::feature_to_name(f) + "'" + aot);
  if (target.has_feature(F::NoRuntime)) throw compile_error(why + "the JIT needs Halide's runtime (no_runtime given)");
}

}  // namespace attn::detail
