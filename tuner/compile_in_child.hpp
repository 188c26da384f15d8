#pragma once
// A compile that may take longer than the tuner can afford (an autoscheduler's search and the
// compile of what it chose: minutes on a slow machine), run in a child process with a time limit.
// A Halide compile cannot be interrupted in-process; a child can be killed. The child leaves the
// kernel in the disk kernel cache (runtime/disk_cache.hpp), where the parent then finds it in
// milliseconds: so this is only useful while that cache is on.
//
// The child only compiles (it runs no kernel: the parent's thread pool does not exist in it) and
// leaves with _exit, so nothing of the parent's state is torn down twice. Its temporary files go to
// a private folder that the parent removes, so a killed child leaves nothing behind. Only the
// forking thread lives on in the child: were another thread of the caller's holding a lock the
// compile needs (a jit() running at that moment), the child would wait for it until its limit and
// be reported as timed out.
#include <functional>
#include <string>

namespace attn::tune {

struct child_compile {
  enum class status { done, failed, timed_out } result = status::failed;
  std::string message;  // the exception's message, or how the child died
  double seconds = 0;
};

// Runs `compile` in a forked child and waits at most `limit_seconds` for it (then kills it).
child_compile compile_in_child(const std::function<void()>& compile, double limit_seconds);

}  // namespace attn::tune
