#!/usr/bin/env bash
# ASan + UBSan build of the library and the tests that exercise the runtime (labels runtime,
# properties, variants, fuzz) in build-asan/, run under the sanitizers; TSan over the threaded
# tests (build-tsan/); then the libFuzzer targets for a bounded time (scripts/fuzz.sh, 60 s each
# unless ATTN_FUZZ_SECONDS says otherwise; 0 skips them).
# What the sanitizers cannot see, and the suppressions, are in tests/sanitizers/README.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh"
venv="$root/.venv"
halide_dir=$("$venv/bin/python" -c 'import halide, os; print(os.path.join(halide.install_dir(), "lib64", "cmake", "Halide"))')
build="$root/build-asan"
"$venv/bin/cmake" -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DBUILD_TESTING=ON -DATTN_SANITIZE=address,undefined -DHalide_DIR="$halide_dir" \
  -DHalideHelpers_DIR="${halide_dir%/Halide}/HalideHelpers" >/dev/null
"$venv/bin/cmake" --build "$build" -j "${ATTN_JOBS:-2}" --target test_runtime_errors test_hardening test_properties test_variants test_lookups test_catalogue test_normalisations test_products \
  test_disk_cache disk_cache_writer test_tuning_db test_environment \
  fuzz_corpus_replay fuzz_tuning_db_replay fuzz_cache_entry_replay

supp="$root/tests/sanitizers"
# Halide compiles on a stack of its own (swapcontext), which ASan cannot follow: compile on ours.
export HL_COMPILER_STACK_SIZE=0
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=0"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$supp/ubsan.supp"
cd "$build" && "$venv/bin/ctest" --output-on-failure -j "${ATTN_JOBS:-2}" -L 'runtime|properties|variants|fuzz'

# ThreadSanitizer over the tests that call kernels and jit() from several threads (build-tsan/).
# HL_NUM_THREADS=1: Halide's thread pool synchronises inside JIT-compiled (uninstrumented) code,
# which TSan cannot see and reports as races; our own threads (cache, concurrent calls) still run.
tsan="$root/build-tsan"
"$venv/bin/cmake" -S "$root" -B "$tsan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DBUILD_TESTING=ON -DATTN_SANITIZE=thread -DHalide_DIR="$halide_dir" \
  -DHalideHelpers_DIR="${halide_dir%/Halide}/HalideHelpers" >/dev/null
"$venv/bin/cmake" --build "$tsan" -j "${ATTN_JOBS:-2}" --target test_properties test_hardening
(export ATTN_CACHE_DIR=off HL_NUM_THREADS=1 TSAN_OPTIONS="halt_on_error=1:suppressions=$supp/tsan.supp"
 "$tsan/tests/test_properties" && "$tsan/tests/test_hardening")

seconds=${ATTN_FUZZ_SECONDS:-60}
if [ "$seconds" -gt 0 ]; then bash "$root/scripts/fuzz.sh" "$seconds"; fi
