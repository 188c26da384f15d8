#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan, build-asan/) and fuzzes each for <seconds>
# (default 60): kernel calls (fuzz_call, from tests/fuzz/corpus/), the tuning database's text
# (fuzz_tuning_db, from tests/fuzz/corpus_tuning_db/) and disk cache entries (fuzz_cache_entry,
# from tests/fuzz/corpus_cache_entry/). New interesting inputs go to
# build-asan/corpus-new/<target>/; `scripts/fuzz.sh --merge` minimises them into the corpora.
# A finding aborts with "FUZZ FINDING" and leaves its input as build-asan/crash-*.
set -euo pipefail
source "$(dirname "$0")/sanitizer_build.sh"
sanitizer_build fuzz_call fuzz_tuning_db fuzz_cache_entry
export ATTN_CACHE_DIR=off  # fuzz_call fuzzes the calls, not the disk cache
build="$asan_build"
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
