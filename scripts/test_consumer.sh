#!/usr/bin/env bash
# Installs attnforge (from build/, built by scripts/build.sh) into a temporary prefix, then builds
# and tests examples/consumer/ against it as a separate project: two kernels generated ahead of
# time, run by a program without Halide, checked against the JIT.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv"
halide_dir=$("$venv/bin/python" -c 'import halide, os; print(os.path.join(halide.install_dir(), "lib64", "cmake", "Halide"))')
ATTN_JOBS=${ATTN_JOBS:-2} bash "$root/scripts/build.sh" --target attnforge attnforge_generator attn-gen
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$venv/bin/cmake" --install "$root/build" --prefix "$work/prefix" >/dev/null
cp -r "$root/examples/consumer" "$work/consumer"   # outside the tree: no path back into it
"$venv/bin/cmake" -S "$work/consumer" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DHalide_DIR="$halide_dir" -DHalideHelpers_DIR="${halide_dir%/Halide}/HalideHelpers" >/dev/null
"$venv/bin/cmake" --build "$work/build" -j "${ATTN_JOBS:-2}"
"$venv/bin/ctest" --test-dir "$work/build" --output-on-failure
echo "test_consumer: ok"
