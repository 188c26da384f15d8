#!/usr/bin/env bash
# Sets up, builds and runs the main example (examples/main_example.cpp).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/build.sh" --target main_example
"$root/build/examples/main_example"
