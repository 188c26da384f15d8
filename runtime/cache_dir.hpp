#pragma once
// Where the JIT keeps compiled kernels on disk: $ATTN_CACHE_DIR if set ("" or "off": no disk
// cache), else $XDG_CACHE_HOME/attnforge, else ~/.cache/attnforge. Read on every call, so a
// test or a program may change the variable before its first jit().
#include <filesystem>
#include <optional>

namespace attn::detail {

std::optional<std::filesystem::path> kernel_cache_dir();

}  // namespace attn::detail
