#pragma once
// The JIT's way through the disk cache: a kernel whose entry exists and is intact is loaded
// without compiling; otherwise it is compiled to a shared object, stored, and loaded.
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include <Halide.h>
#include "shared_object_kernel.hpp"

namespace attn::detail {

// nullptr when the disk cache is off (ATTN_CACHE_DIR="" or "off"), the target is a GPU target
// (their device code needs the JIT's runtime) or no linker works here (reported once): the
// caller then JIT-compiles in-process as before. `key` names the expression and jit options;
// the target, Halide's version and attnforge's lowering version are added here. `before_compile`
// runs only when the entry must be compiled (an autoscheduler's search: skipped on a hit).
std::shared_ptr<const shared_object_kernel> disk_kernel(const Halide::Pipeline& pipeline,
                                                        const std::vector<Halide::Argument>& arguments,
                                                        const Halide::Target& target, const std::string& key,
                                                        const std::function<void()>& before_compile = {});

}  // namespace attn::detail
