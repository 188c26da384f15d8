#!/usr/bin/env bash
# Installs attnforge (from build/, built by scripts/build.sh) into a temporary prefix, moves the
# prefix elsewhere and hides the build tree, then builds and tests examples/consumer/ against it as
# a separate project that names nothing but the prefix: two kernels generated ahead of time, run by
# a program without Halide, checked against the JIT; the project's own tuner run on its variant,
# and a kernel built with the record it wrote. A prefix that reaches back into the build tree or
# the clone fails here.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cmake="$root/.venv/bin/cmake" ctest="$root/.venv/bin/ctest"
ATTN_JOBS=${ATTN_JOBS:-2} bash "$root/scripts/build.sh" --target attnforge attnforge_generator attnforge_tuner attn-gen attn-tune attn-cache
work=$(mktemp -d)
hidden="$root/build.hidden-by-test-consumer"
restore() {
  if [ -d "$hidden" ]; then mv "$hidden" "$root/build"; fi
  rm -rf "$work"
}
trap restore EXIT
"$cmake" --install "$root/build" --prefix "$work/installed" >/dev/null
mv "$work/installed" "$work/prefix"
# What would tie the prefix to this machine's clone: a program's RUNPATH, a CMake file's path.
for program in "$work"/prefix/bin/*; do
  if readelf -d "$program" | grep -E "R(UN)?PATH" | tr '[]:' '\n\n\n' | grep -E '^/' >/dev/null; then
    echo "test_consumer: $program has a RUNPATH outside the prefix:" >&2
    readelf -d "$program" | grep -E "R(UN)?PATH" >&2
    exit 1
  fi
done
if grep -rl "$root" "$work/prefix/lib/cmake" "$work/prefix/include"; then
  echo "test_consumer: the files above name $root" >&2
  exit 1
fi
mv "$root/build" "$hidden"
cp -r "$root/examples/consumer" "$work/consumer"   # outside the tree: no path back into it
"$cmake" -S "$work/consumer" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
"$cmake" --build "$work/build" -j "${ATTN_JOBS:-2}" --target my_tuner
# The project tunes its own variant (a short run: the default and one other schedule), then builds
# a kernel with the record.
"$work/build/my_tuner" "my::causal_alibi" --bind T=64 --bind Dh=32 --no-search --autoschedulers none \
  --schedule "q_tile=12" --budget 1 --db "$work/tuning.json"
"$cmake" -S "$work/consumer" -B "$work/build" -DTUNING_DB="$work/tuning.json" >/dev/null
"$cmake" --build "$work/build" -j "${ATTN_JOBS:-2}"
"$ctest" --test-dir "$work/build" --output-on-failure
echo "test_consumer: ok"
