#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan, build-fuzz/) and fuzzes each for <seconds>
# (default 60): kernel calls (fuzz_call, from tests/fuzz/corpus/), the tuning database's text
# (fuzz_tuning_db, from tests/fuzz/corpus_tuning_db/) and disk cache entries (fuzz_cache_entry,
# from tests/fuzz/corpus_cache_entry/). New interesting inputs go to
# build-fuzz/corpus-new/<target>/; `scripts/fuzz.sh --merge` minimises them into the corpora.
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
"$venv/bin/cmake" --build "$build" -j "${ATTN_JOBS:-2}" --target fuzz_call fuzz_tuning_db fuzz_cache_entry

supp="$root/tests/sanitizers"
export HL_COMPILER_STACK_SIZE=0
export ATTN_CACHE_DIR=off  # fuzzing the calls, not the disk cache
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$supp/ubsan.supp"
cd "$build"
for target in fuzz_call fuzz_tuning_db fuzz_cache_entry; do
  case $target in
    fuzz_call) corpus="$root/tests/fuzz/corpus" ;;
    fuzz_tuning_db) corpus="$root/tests/fuzz/corpus_tuning_db" ;;
    fuzz_cache_entry) corpus="$root/tests/fuzz/corpus_cache_entry" ;;
  esac
  new="$build/corpus-new/$target"
  mkdir -p "$new"
  if [ "${1:-}" = "--merge" ]; then
    "./tests/fuzz/$target" -merge=1 "$corpus" "$new"
    continue
  fi
  # -rss_limit_mb: the JIT (LLVM, Halide) is large; inputs are small, so growth beyond this is a leak.
  "./tests/fuzz/$target" -max_total_time="${1:-60}" -rss_limit_mb=4096 -print_final_stats=1 "$new" "$corpus"
done
