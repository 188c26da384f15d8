#!/usr/bin/env bash
# The whole comparison in one command: builds attention_bench, runs attnforge's fused and generic
# kernels and PyTorch's SDPA and FlexAttention (if scripts/setup_peers.sh installed them) on the same
# cases and thread count, and prints one Markdown table (also written to build/bench/compare.md).
#   bash scripts/compare.sh [--quick] [--update-docs] [--threads N] [--T "LIST"] [--rounds N]
#     --quick          T = 512 only, one short round: checks the pipeline, numbers are rough
#     --update-docs    writes the table, with date, CPU, commit and this command, as this CPU's
#                      section of docs/performance.md (replacing that CPU's earlier section)
#     --threads N      threads for both attnforge (HL_NUM_THREADS) and PyTorch (default 2)
#     --T "1024 2048"  only these sequence lengths (default: all of bench/cases.py)
#     --rounds N       rounds per case, attnforge then PyTorch in each, one case at a time (default
#                      3); the table takes each case's best round on each side, both sides timed
#                      seconds apart, so that a busy spell on a shared machine slows both
# Run it on a quiet machine: other load on the cores changes every number.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
quick=0 update=0 threads=2 lengths="" rounds=3
command="bash scripts/compare.sh${*:+$(printf ' %q' "$@")}"
while (($#)); do
  case "$1" in
    --quick) quick=1 ;;
    --update-docs) update=1 ;;
    --threads) threads=$2; shift ;;
    --T) lengths=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    *) echo "usage: bash scripts/compare.sh [--quick] [--update-docs] [--threads N] [--T \"LIST\"] [--rounds N]" >&2; exit 2 ;;
  esac
  shift
done
if ! [[ $rounds =~ ^[1-9][0-9]*$ ]]; then echo "compare.sh: --rounds wants a positive integer, got '$rounds'" >&2; exit 2; fi

ATTN_JOBS=${ATTN_JOBS:-2} bash "$root/scripts/build.sh" --target attention_bench
out="$root/build/bench"
export HL_NUM_THREADS=$threads OMP_NUM_THREADS=$threads

if ((quick)); then
  lengths=512 rounds=1
  bench_args=(--benchmark_min_time=0.2)
  peer_args=(--min-time 0.2)
else
  bench_args=()
  peer_args=(--min-time 0.5)
fi
[ -n "$lengths" ] || lengths=$(cd "$root/bench" && python3 -c 'import cases; print(*cases.TS)')

# Each case in turn, its rounds alternating attnforge and PyTorch (bench/compare.py).
python="$root/.venv-peers/bin/python" peer_flag=()
if ! [ -x "$python" ] || ! "$python" -c 'import torch' 2>/dev/null; then
  echo "== PyTorch not installed: peer columns stay empty. Install it (once, ~3 GB) with: bash scripts/setup_peers.sh"
  python=python3 peer_flag=(--no-peers)
fi
runs="$out/compare"
rm -rf "$runs"
# shellcheck disable=SC2086  # $lengths: a list of numbers
"$python" "$root/bench/compare.py" --bench "$out/attention_bench" --out "$runs" --T $lengths --rounds "$rounds" \
  --threads "$threads" "${peer_args[@]}" "${bench_args[@]/#/--bench-arg=}" "${peer_flag[@]}"

echo "== table"
docs_args=()
((update)) && docs_args=(--docs "$root/docs/performance.md")
python3 "$root/bench/compare_table.py" "$runs"/*.json --command "$command" "${docs_args[@]}" | tee "$out/compare.md"
