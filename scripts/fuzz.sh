#!/usr/bin/env bash
# Builds the libFuzzer target (clang, ASan + UBSan, build-fuzz/) and fuzzes kernel calls for
# <seconds> (default 60), starting from tests/fuzz/corpus/. New interesting inputs go to
# build-fuzz/corpus-new/; `scripts/fuzz.sh --merge` minimises them into tests/fuzz/corpus/.
# A finding aborts with "FUZZ FINDING" and leaves its input as build-fuzz/crash-*.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh"
venv="$root/.venv"
halide_dir=$("$venv/bin/python" -c 'import halide, os; print(os.path.join(halide.install_dir(), "lib64", "cmake", "Halide"))')
build="$root/build-fuzz"
"$venv/bin/cmake" -S "$root" -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" -DBUILD_TESTING=ON -DATTN_SANITIZE=address,undefined -DATTN_FUZZ=ON \
  -DHalide_DIR="$halide_dir" -DHalideHelpers_DIR="${halide_dir%/Halide}/HalideHelpers" >/dev/null
"$venv/bin/cmake" --build "$build" -j "${ATTN_JOBS:-2}" --target fuzz_call

supp="$root/tests/sanitizers"
export HL_COMPILER_STACK_SIZE=0
export ATTN_CACHE_DIR=off  # fuzzing the calls, not the disk cache
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$supp/ubsan.supp"
mkdir -p "$build/corpus-new"
cd "$build"
if [ "${1:-}" = "--merge" ]; then
  ./tests/fuzz/fuzz_call -merge=1 "$root/tests/fuzz/corpus" "$build/corpus-new"
  exit 0
fi
# -rss_limit_mb: the JIT (LLVM, Halide) is large; inputs are small, so growth beyond this is a leak.
./tests/fuzz/fuzz_call -max_total_time="${1:-60}" -rss_limit_mb=4096 -print_final_stats=1 "$build/corpus-new" "$root/tests/fuzz/corpus"
