#!/usr/bin/env bash
# The tests that exercise memory the library manages (labels runtime, aot, fuzz: checks, copies,
# the caches, files, the AOT entry points, the fuzz corpora) under AddressSanitizer and
# UndefinedBehaviorSanitizer (build-asan/, shared with scripts/fuzz.sh); ThreadSanitizer over the
# threaded tests (build-tsan/); then the libFuzzer targets for a bounded time (scripts/fuzz.sh,
# 60 s each unless ATTN_FUZZ_SECONDS says otherwise; 0 skips them).
# What the sanitizers cannot see, and the suppressions, are in tests/sanitizers/README.md.
set -euo pipefail
source "$(dirname "$0")/sanitizer_build.sh"
source "$root/scripts/phases.sh"
labels="runtime aot fuzz"
phase "ASan + UBSan build" sanitizer_build $(printf 'tests_%s ' $labels)
asan_tests() {
  (cd "$asan_build" && "$venv/bin/ctest" --output-on-failure -j "${ATTN_JOBS:-2}" -L "^($(echo $labels | tr ' ' '|'))\$")
}
phase "ASan + UBSan tests ($labels)" asan_tests

# ThreadSanitizer over the tests that call kernels and jit() from several threads (build-tsan/).
# HL_NUM_THREADS=1: Halide's thread pool synchronises inside JIT-compiled (uninstrumented) code,
# which TSan cannot see and reports as races; our own threads (cache, concurrent calls) still run.
tsan="$root/build-tsan"
tsan_build() {
  "$venv/bin/cmake" -S "$root" -B "$tsan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
    -DBUILD_TESTING=ON -DATTN_SANITIZE=thread -DHalide_DIR="$halide_dir" \
    -DHalideHelpers_DIR="${halide_dir%/Halide}/HalideHelpers" >/dev/null
  "$venv/bin/cmake" --build "$tsan" -j "${ATTN_JOBS:-2}" --target test_properties test_hardening
}
tsan_tests() {  # the two programs side by side, one a core
  (export ATTN_CACHE_DIR=off HL_NUM_THREADS=1 TSAN_OPTIONS="halt_on_error=1:suppressions=$supp/tsan.supp"
   "$tsan/tests/test_properties" & properties=$!
   hardening=0
   "$tsan/tests/test_hardening" || hardening=$?
   wait $properties
   exit $hardening)
}
phase "TSan build" tsan_build
phase "TSan tests" tsan_tests

seconds=${ATTN_FUZZ_SECONDS:-60}
if [ "$seconds" -gt 0 ]; then phase "fuzzing (${seconds} s a target)" bash "$root/scripts/fuzz.sh" "$seconds"; fi
