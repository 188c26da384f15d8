#!/usr/bin/env bash
# Sets up (idempotent), configures and builds attnforge into build/. Extra args go to the build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh"
venv="$root/.venv"
halide_dir=$("$venv/bin/python" -c 'import halide, os; print(os.path.join(halide.install_dir(), "lib64", "cmake", "Halide"))')
"$venv/bin/cmake" -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON -DHalide_DIR="$halide_dir" \
  -DHalideHelpers_DIR="${halide_dir%/Halide}/HalideHelpers" >/dev/null
"$venv/bin/cmake" --build "$root/build" -j "${ATTN_JOBS:-2}" "$@"
