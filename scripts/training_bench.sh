#!/usr/bin/env bash
# A training step (forward + backward) of attnforge against PyTorch autograd in one command: builds
# training_bench, checks that both sides' outputs and gradients match a float64 reference, times
# attnforge's forward, backward and both, and PyTorch's forward + backward (SDPA, eager ops,
# FlexAttention, if scripts/setup_peers.sh installed PyTorch), on the same cases and thread count,
# and prints one Markdown table (also written to build/bench/training.md).
#   bash scripts/training_bench.sh [--quick] [--update-docs] [--threads N] [--T "LIST"] [--rounds N]
#     --quick          T = 256 only, one short round: checks the pipeline, numbers are rough
#     --update-docs    writes the table, with date, CPU, commit and this command, as this CPU's
#                      section of the training comparison in docs/performance.md
#     --threads N      threads for both attnforge (HL_NUM_THREADS) and PyTorch (default 2)
#     --T "1024 2048"  only these sequence lengths (default: bench/cases.py TRAINING_TS; the
#                      variants but full and causal stop at 2048)
#     --rounds N       rounds per case, attnforge then PyTorch in each, one case at a time (default
#                      3); the table takes each time's best round
# Run it on a quiet machine: other load on the cores changes every number.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
quick=0 update=0 threads=2 lengths="" rounds=3
command="bash scripts/training_bench.sh${*:+$(printf ' %q' "$@")}"
usage="usage: bash scripts/training_bench.sh [--quick] [--update-docs] [--threads N] [--T \"LIST\"] [--rounds N]"
while (($#)); do
  case "$1" in
    --quick) quick=1 ;;
    --update-docs) update=1 ;;
    --threads) threads=$2; shift ;;
    --T) lengths=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
  shift
done
if ! [[ $rounds =~ ^[1-9][0-9]*$ ]]; then echo "training_bench.sh: --rounds wants a positive integer, got '$rounds'" >&2; exit 2; fi

ATTN_JOBS=${ATTN_JOBS:-2} bash "$root/scripts/build.sh" --target training_bench
out="$root/build/bench"
export HL_NUM_THREADS=$threads OMP_NUM_THREADS=$threads

if ((quick)); then
  lengths=$(cd "$root/bench" && python3 -c 'import cases; print(*cases.TRAINING_QUICK_TS)') rounds=1
  bench_args=(--benchmark_min_time=0.2)
  peer_args=(--min-time 0.2)
else
  bench_args=()
  peer_args=(--min-time 0.5)
fi
[ -n "$lengths" ] || lengths=$(cd "$root/bench" && python3 -c 'import cases; print(*cases.TRAINING_TS)')

# Each case in turn, its rounds alternating attnforge and PyTorch (bench/compare_training.py).
python="$root/.venv-peers/bin/python" peer_flag=()
if ! [ -x "$python" ] || ! "$python" -c 'import torch' 2>/dev/null; then
  echo "== PyTorch not installed: peer columns stay empty. Install it (once, ~3 GB) with: bash scripts/setup_peers.sh"
  python=python3 peer_flag=(--no-peers)
fi
runs="$out/training"
rm -rf "$runs"
# shellcheck disable=SC2086  # $lengths: a list of numbers
"$python" "$root/bench/compare_training.py" --bench "$out/training_bench" --out "$runs" --T $lengths \
  --rounds "$rounds" --threads "$threads" "${peer_args[@]}" "${bench_args[@]/#/--bench-arg=}" "${peer_flag[@]}"

echo "== table"
docs_args=()
((update)) && docs_args=(--docs "$root/docs/performance.md")
python3 "$root/bench/training_table.py" "$runs"/*.json --command "$command" "${docs_args[@]}" | tee "$out/training.md"
