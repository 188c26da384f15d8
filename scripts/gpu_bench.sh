#!/usr/bin/env bash
# The GPU benchmark, on a machine with an NVIDIA GPU (the device tool, when lent): the measured
# fp32 FMA peak (bench/gpu/fma_peak.cu, built here with nvcc), attnforge's CUDA kernels
# (build/bench/gpu/gpu_bench, built beforehand with -DATTN_GPU_BENCH=ON, see bench/gpu) and the
# peers (bench/gpu/peers_gpu.py: SDPA, FlexAttention) on the same shapes, one CSV on stdout.
#   bash scripts/gpu_bench.sh [--no-peers] [T...]      (default T: 1024 4096 8192)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
peers=1
if [[ "${1:-}" == --no-peers ]]; then peers=0; shift; fi
ts=("$@")
[[ ${#ts[@]} -gt 0 ]] || ts=(1024 4096 8192)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader >&2 || true
nvcc -O3 -arch=native "$root/bench/gpu/fma_peak.cu" -o "$tmp/fma_peak"
"$tmp/fma_peak" | tee "$tmp/peak" >&2
peak=$(sed -n 's/^fma_peak_tflops,//p' "$tmp/peak")
status=0
"$root/build/bench/gpu/gpu_bench" --peak-tflops "$peak" "${ts[@]}" || status=$?
if [[ $peers == 1 ]]; then
  python3 "$root/bench/gpu/peers_gpu.py" --peak-tflops "$peak" "${ts[@]}" | tail -n +2 || status=$?
fi
exit $status
