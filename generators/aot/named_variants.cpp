// attnforge's named variants in the generator's registry (named_variants.hpp has them all).
#include "named_variants.hpp"

#include "registry.hpp"

namespace attn::aot {

// Called by the generator's main(): registrations in a static library would be dropped by the
// linker if nothing referred to them.
void register_named_variants() {
  auto add = [](const char* name, const auto& e, const char* description) {
    registry::get().add({name, description, dsl::to_ir(e), true});
  };
  add("attention", named::attention, "softmax(q·kᵀ/√Dh)·v; q, k, v (H = 8, T, Dh)");
  add("causal_attention", named::causal_attention, "causal: query i sees keys 0..i; q, k, v (H = 8, T, Dh)");
  add("sliding_window_attention", named::sliding_window_attention, "causal window of 256 keys; q, k, v (H = 8, T, Dh)");
  add("alibi_causal_attention", named::alibi_causal_attention, "ALiBi distance penalty per head, causal; q, k, v (H = 8, T, Dh)");
  add("softcap_causal_attention", named::softcap_causal_attention, "scores 20·tanh(s/20), causal; q, k, v (H = 8, T, Dh)");
  add("sigmoid_causal_attention", named::sigmoid_causal_attention, "softmax-free: σ(s - log T)·v, causal; q, k, v (H = 8, T, Dh)");
  add("causal_self_attention", named::causal_self_attention, "the main example: x (T, D), wq, wk, wv (D, Dk)");
  add("multi_head_self_attention", named::multi_head_self_attention, "x (T, 512), wq, wk, wv, wo (512, 512), 8 heads");
}

}  // namespace attn::aot
