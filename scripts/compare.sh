#!/usr/bin/env bash
# The whole comparison in one command: builds attention_bench, runs attnforge's fused and generic
# kernels and PyTorch's SDPA and FlexAttention (if scripts/setup_peers.sh installed them) on the same
# cases and thread count, and prints one Markdown table (also written to build/bench/compare.md).
#   bash scripts/compare.sh [--quick] [--update-readme] [--threads N] [--T "LIST"] [--rounds N]
#     --quick          T = 512 only, one short round: checks the pipeline, numbers are rough
#     --update-readme  writes the table into README.md between the results markers
#     --threads N      threads for both attnforge (HL_NUM_THREADS) and PyTorch (default 2)
#     --T "1024 2048"  only these sequence lengths (default: all of bench/cases.py)
#     --rounds N       rounds per sequence length, attnforge then PyTorch in each (default 3); the
#                      table takes each case's best round, so that a busy spell on a shared machine
#                      slows one round of both sides, not all of one side's numbers
# Run it on a quiet machine: other load on the cores changes every number.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
quick=0 update=0 threads=2 lengths="" rounds=3
while (($#)); do
  case "$1" in
    --quick) quick=1 ;;
    --update-readme) update=1 ;;
    --threads) threads=$2; shift ;;
    --T) lengths=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    *) echo "usage: bash scripts/compare.sh [--quick] [--update-readme] [--threads N] [--T \"LIST\"] [--rounds N]" >&2; exit 2 ;;
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

peers="$root/.venv-peers/bin/python"
have_peers=0
if [ -x "$peers" ] && "$peers" -c 'import torch' 2>/dev/null; then
  have_peers=1
else
  echo "== PyTorch not installed: peer columns stay empty. Install it (once, ~3 GB) with: bash scripts/setup_peers.sh"
fi

# One JSON per sequence length, round and side; the table reads them all.
runs="$out/compare"
rm -rf "$runs"
mkdir -p "$runs"
check=(--check)  # peers.py compares each peer with a float64 reference once, before its first timing
for t in $lengths; do
  for ((r = 1; r <= rounds; r++)); do
    echo "== T = $t, round $r of $rounds: attnforge (fused and generic), $threads threads"
    "$out/attention_bench" "${bench_args[@]}" "--benchmark_filter=/T:$t/" \
      --benchmark_out="$runs/attnforge.$t.$r.json" --benchmark_out_format=json
    ((have_peers)) || continue
    echo "== T = $t, round $r of $rounds: PyTorch SDPA and FlexAttention, $threads threads"
    if "$peers" "$root/bench/peers.py" --threads "$threads" "${check[@]}" --T "$t" "${peer_args[@]}" \
        > "$runs/peers.$t.$r.json.tmp"; then
      mv "$runs/peers.$t.$r.json.tmp" "$runs/peers.$t.$r.json"
      check=()
    else
      echo "== peers.py failed (see above): this round's peer columns stay empty" >&2
    fi
  done
done

echo "== table"
readme_args=()
((update)) && readme_args=(--readme "$root/README.md")
python3 "$root/bench/compare_table.py" "$runs"/*.json "${readme_args[@]}" | tee "$out/compare.md"
