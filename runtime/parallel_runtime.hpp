#pragma once
// One thread pool for every kernel loaded from the disk cache: Halide's own task runtime,
// compiled once per architecture into a shared object of its own (kept as a disk cache entry),
// loaded once per process and never unloaded. Each loaded kernel hands its parallel loops to it
// (halide_set_custom_parallel_runtime), so however many kernels a process loads and unloads,
// it runs one pool of workers (HL_NUM_THREADS, default: one per core).
#include <Halide.h>

namespace attn::detail {

class disk_cache;

struct parallel_runtime {
  halide_do_par_for_t do_par_for;
  halide_do_task_t do_task;
  halide_do_loop_task_t do_loop_task;
  halide_do_parallel_tasks_t do_parallel_tasks;
  halide_semaphore_init_t semaphore_init;
  halide_semaphore_try_acquire_t semaphore_try_acquire;
  halide_semaphore_release_t semaphore_release;
};

// The process's pool for kernels compiled for `target`'s architecture: loaded from `cache`, or
// compiled, stored and loaded on first use. nullptr when it cannot be (reported once): the
// caller then compiles its kernel in-process instead of loading one.
const parallel_runtime* shared_parallel_runtime(const disk_cache& cache, const Halide::Target& target);

}  // namespace attn::detail
