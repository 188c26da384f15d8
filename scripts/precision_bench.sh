#!/usr/bin/env bash
# bfloat16 against float32 tensors in one command: builds precision_bench and prints one Markdown
# table of prefill (full and causal, T x T, H = 8) and decode (1 and 8 queries against a long
# key/value cache) with both element types, the same kernels otherwise, alternating in one run;
# then, if scripts/setup_peers.sh installed PyTorch, its SDPA on the same bfloat16 tensors.
#   bash scripts/precision_bench.sh [--quick] [--update-docs] [--threads N] [--rounds N] [--target T]
#     --quick          T = 256 and a cache of 2048 keys, few rounds: checks the pipeline only
#     --update-docs    writes the table, with date, CPU, commit and this command, as this CPU's
#                      section of the precision comparison in docs/performance.md
#     --threads N      threads (HL_NUM_THREADS, default 2)
#     --rounds N       rounds per case, both kernels in each (default 5; decode 4 times as many)
#     --target T       both kernels compiled for Halide target T instead of this CPU's features, e.g.
#                      x86-64-linux-avx2-fma-f16c: the code a CPU with those features only runs
#                      (bfloat16 converted as loaded), timed on this CPU; no PyTorch column (PyTorch
#                      runs this CPU's own instructions); its own section in the docs
# Run it on a quiet machine: other load on the cores changes every number.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
quick=0 update=0 threads=2 rounds=5 target=
command="bash scripts/precision_bench.sh${*:+$(printf ' %q' "$@")}"
usage="usage: bash scripts/precision_bench.sh [--quick] [--update-docs] [--threads N] [--rounds N] [--target T]"
while (($#)); do
  case "$1" in
    --quick) quick=1 ;;
    --update-docs) update=1 ;;
    --threads) threads=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --target) target=$2; shift ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
  shift
done
if ! [[ $rounds =~ ^[1-9][0-9]*$ ]]; then echo "precision_bench.sh: --rounds wants a positive integer, got '$rounds'" >&2; exit 2; fi

ATTN_JOBS=${ATTN_JOBS:-2} bash "$root/scripts/build.sh" --target precision_bench
args=(--rounds "$rounds")
((quick)) && args+=(--quick)
[ -n "$target" ] && args+=(--target "$target")
table=$(HL_NUM_THREADS=$threads ATTN_TUNING_DB=off "$root/build/bench/precision_bench" "${args[@]}")
# PyTorch's SDPA on the same bfloat16 cases, after attnforge's rows (bench/precision_peer.py).
python="$root/.venv-peers/bin/python" peers="PyTorch's SDPA on the same bfloat16 tensors timed after attnforge's rows."
if [ -n "$target" ]; then
  peers="Kernels compiled for \`$target\` (what a CPU with only those features runs), timed on this CPU; no PyTorch column: PyTorch runs this CPU's own instructions."
elif [ -x "$python" ] && "$python" -c 'import torch' 2>/dev/null; then
  table=$(HL_NUM_THREADS=$threads "$python" "$root/bench/precision_peer.py" --rounds "$rounds" <<<"$table")
  peers="$peers PyTorch $("$python" -c 'import torch; print(torch.__version__)')."
else
  echo "== PyTorch not installed: no PyTorch column. Install it (once, ~3 GB) with: bash scripts/setup_peers.sh"
  peers=""
fi
echo "$table"
if ((update)); then
  "$root/.venv/bin/python" - "$root/bench" "$command" "$threads" "$table" "$peers" "$target" <<'PY'
import sys
bench, command, threads, table, peers, target = sys.argv[1:]
sys.path.insert(0, bench)
import performance_doc
machine, date = performance_doc.cpu_model(), performance_doc.today()
if target:  # a section of its own: this CPU running another target's code
    machine = f"{machine}, kernels for {target}"
performance_doc.write_section("cpu-precision", machine, f"### {machine}, {date}\n\n{performance_doc.provenance(command)}: "
                              f"{threads} threads, batch 1, H = 8; each time the best of its rounds. Prefill kernels are "
                              f"compiled with N_Q bound, decode kernels take it at the call; bfloat16 dot products (vdpbf16ps): "
                              f"the products on them (P rounded to bfloat16 for P·V), or none, every tensor converted to "
                              f"float32 as loaded (describe()). GQA 8/2: K and V of 2 heads, each read by 4 of the 8 query heads. K and V read alone: "
                              f"each byte of the decode's K and V read once by a plain loop on as many threads, each its share of K, "
                              f"then of V (one tensor at a time, as the kernels read a key tile's K, then its V), float32 and "
                              f"bfloat16 alternating, its float32 time over its bfloat16 time. {peers}\n\n{table}\n")
print(f"(written into {performance_doc.DOC})", file=sys.stderr)
PY
fi
