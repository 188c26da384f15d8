#!/usr/bin/env bash
# The whole comparison in one command: builds attention_bench, runs attnforge's fused and generic
# kernels and PyTorch's SDPA and FlexAttention (if scripts/setup_peers.sh installed them) on the same
# cases and thread count, and prints one Markdown table (also written to build/bench/compare.md).
#   bash scripts/compare.sh [--quick] [--update-readme] [--threads N]
#     --quick          T = 512 only, shorter timing: checks the pipeline, numbers are rough
#     --update-readme  writes the table into README.md between the results markers
#     --threads N      threads for both attnforge (HL_NUM_THREADS) and PyTorch (default 2)
#     --T "1024 2048"  only these sequence lengths (default: all of bench/cases.py)
# Run it on a quiet machine: other load on the cores changes every number.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
quick=0 update=0 threads=2 lengths=""
while (($#)); do
  case "$1" in
    --quick) quick=1 ;;
    --update-readme) update=1 ;;
    --threads) threads=$2; shift ;;
    --T) lengths=$2; shift ;;
    *) echo "usage: bash scripts/compare.sh [--quick] [--update-readme] [--threads N] [--T \"LIST\"]" >&2; exit 2 ;;
  esac
  shift
done

ATTN_JOBS=${ATTN_JOBS:-2} bash "$root/scripts/build.sh" --target attention_bench
out="$root/build/bench"
export HL_NUM_THREADS=$threads OMP_NUM_THREADS=$threads

if ((quick)); then
  bench_args=(--benchmark_filter=/T:512/ --benchmark_min_time=0.2)
  peer_args=(--T 512 --min-time 0.2)
else
  bench_args=(--benchmark_repetitions=3 --benchmark_report_aggregates_only=true)
  peer_args=(--min-time 1.0)
fi
if [ -n "$lengths" ]; then
  bench_args+=("--benchmark_filter=/T:(${lengths// /|})/")
  # shellcheck disable=SC2206
  peer_args+=(--T $lengths)
fi

echo "== attnforge (fused and generic), $threads threads"
"$out/attention_bench" "${bench_args[@]}" --benchmark_out="$out/attnforge.json" --benchmark_out_format=json

peers="$root/.venv-peers/bin/python"
rm -f "$out/peers.json"
if [ -x "$peers" ] && "$peers" -c 'import torch' 2>/dev/null; then
  echo "== PyTorch SDPA and FlexAttention, $threads threads"
  # --check: each peer against a float64 reference of the cases first, so both sides compute the same thing.
  if "$peers" "$root/bench/peers.py" --threads "$threads" --check "${peer_args[@]}" > "$out/peers.json.tmp"; then
    mv "$out/peers.json.tmp" "$out/peers.json"
  else
    echo "== peers.py failed (see above): peer columns stay empty" >&2
  fi
else
  echo "== PyTorch not installed: peer columns stay empty. Install it (once, ~3 GB) with: bash scripts/setup_peers.sh"
fi

echo "== table"
readme_args=()
((update)) && readme_args=(--readme "$root/README.md")
python3 "$root/bench/compare_table.py" "$out/attnforge.json" "$out/peers.json" "${readme_args[@]}" | tee "$out/compare.md"
