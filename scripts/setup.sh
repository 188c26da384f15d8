#!/usr/bin/env bash
# Installs everything attnforge needs; safe to run again (each step checks first).
#   Debian: Boost.Hana + Boost.Test, Google Benchmark, OpenBLAS (the products bench compares with it),
#           nlohmann-json (the lessons' records, the tuning database),
#           CLI11 (attn-gen's and attn-tune's command lines),
#           Cairo + DejaVu fonts (heatmaps, plots), Graphviz (expression graphs),
#           clang + libclang-rt-14-dev (libFuzzer and its sanitizers, scripts/fuzz.sh),
#           PoCL + the OpenCL ICD loader (the GPU schedules' OpenCL kernels run on the CPU: test_opencl).
#   PyPI (project-local venv .venv/): halide==21.0.0 and cmake>=3.28.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

debian_packages=(g++ clang libclang-rt-14-dev make pkg-config libboost-dev libboost-test-dev libbenchmark-dev libopenblas-dev
                 nlohmann-json3-dev libcli11-dev
                 libcairo2-dev fonts-dejavu-core graphviz libgraphviz-dev
                 pocl-opencl-icd ocl-icd-opencl-dev)
missing=()
for p in "${debian_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

venv="$root/.venv"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
if ! "$venv/bin/python" -c 'import halide, cmake' 2>/dev/null ||
   [ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("halide"))')" != "21.0.0" ]; then
  "$venv/bin/pip" install -q --disable-pip-version-check "halide==21.0.0" "cmake>=3.28"
fi
echo "setup: ok (venv at $venv)"
