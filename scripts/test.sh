#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (each test within its time budget, tests/CMakeLists.txt).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/phases.sh"
phase "setup" bash "$root/scripts/setup.sh"
phase "build" bash "$root/scripts/build.sh"
cd "$root/build"
phase "tests" "$root/.venv/bin/ctest" --output-on-failure -j 2
