#!/usr/bin/env bash
# The GPU benchmark, on a machine with an NVIDIA GPU: the measured fp32 FMA peak
# (bench/gpu/fma_peak.cu, built here with nvcc), attnforge's CUDA kernels (build/bench/gpu/gpu_bench,
# built beforehand with -DATTN_GPU_BENCH=ON, see bench/gpu) and the peers (bench/gpu/peers_gpu.py:
# SDPA, FlexAttention, forward and backward) on the same shapes, one CSV on stdout, led by '# key: value' lines naming
# the run (date, gpu, driver, commit, command, fma_peak_tflops). Its table, and the dated section of
# docs/performance.md: python3 bench/gpu/gpu_table.py RUN.csv [--docs docs/performance.md]
#   bash scripts/gpu_bench.sh [--no-peers] [--masks full,causal,alibi,softcap,window] [T...]
#   (default: those masks; T 1024 4096 8192)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
command="bash scripts/gpu_bench.sh${*:+$(printf ' %q' "$@")}"
peers=1
masks=full,causal,alibi,softcap,window
if [[ "${1:-}" == --no-peers ]]; then peers=0; shift; fi
if [[ "${1:-}" == --masks ]]; then masks=$2; shift 2; fi
ts=("$@")
[[ ${#ts[@]} -gt 0 ]] || ts=(1024 4096 8192)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1) || true
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1) || true
nvcc -O3 -arch=native "$root/bench/gpu/fma_peak.cu" -o "$tmp/fma_peak"
"$tmp/fma_peak" | tee "$tmp/peak" >&2
peak=$(sed -n 's/^fma_peak_tflops,//p' "$tmp/peak")
echo "# date: $(date +%F)"
echo "# gpu: ${gpu:-unknown GPU}"
echo "# driver: ${driver:-unknown}"
echo "# commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "# command: $command"
echo "# fma_peak_tflops: $peak"
status=0
"$root/build/bench/gpu/gpu_bench" --peak-tflops "$peak" --masks "$masks" "${ts[@]}" || status=$?
if [[ $peers == 1 ]]; then
  python3 "$root/bench/gpu/peers_gpu.py" --backward --peak-tflops "$peak" --masks "$masks" "${ts[@]}" | tail -n +2 || status=$?
fi
exit $status
