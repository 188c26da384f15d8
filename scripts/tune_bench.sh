#!/usr/bin/env bash
# Default vs tuned vs each Halide autoscheduler on the CPU benchmark's attention cases, measured
# by attn-tune in one run (its re-timed medians), printed as one table in GFLOP/s (cost model's
# flops, as bench/attention_bench.cpp counts them).
#   bash scripts/tune_bench.sh [--T '1024 2048'] [--budget SECONDS_PER_CASE] [--db FILE] [--cases 'full causal']
# Records go to the tuning database (--db, else attn-tune's default). Builds attn-tune first.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
Ts="1024 2048"; budget=300; db=""; cases="full causal sliding_window_256 alibi_causal softcap_causal"
while (($#)); do
  case "$1" in
    --T) Ts="$2"; shift 2 ;;
    --budget) budget="$2"; shift 2 ;;
    --db) db="$2"; shift 2 ;;
    --cases) cases="$2"; shift 2 ;;
    *) echo "tune_bench.sh: unknown argument '$1' (--T, --budget, --db, --cases)" >&2; exit 2 ;;
  esac
done
bash "$root/scripts/build.sh" --target attn-tune >/dev/null
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
db_args=(); [ -n "$db" ] && db_args=(--db "$db")
for T in $Ts; do
  for c in $cases; do
    "$root/build/tuner/attn-tune" "$c" --T "$T" --Dh 64 --budget "$budget" --summary "$summary" "${db_args[@]}"
  done
  for c in full causal; do  # the benchmark's Dh = 128 cases
    case " $cases " in *" $c "*) "$root/build/tuner/attn-tune" "$c" --T "$T" --Dh 128 --budget "$budget" --summary "$summary" "${db_args[@]}" ;; esac
  done
done
"$root/.venv/bin/python" - "$summary" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
autos = ["Mullapudi2016", "Li2018", "Adams2019"]
def g(e): return f"{e['gflops']:.1f}" if e.get("status") == "ok" else e.get("status", "-")
print("| case | T | Dh | default GFLOP/s | tuned GFLOP/s | tuned / default | " + " | ".join(autos) + " | tuned schedule |")
print("|---|---|---|---|---|---|" + "---|" * len(autos) + "---|")
for r in rows:
    d, t = r["default"], r["tuned"]
    ratio = f"{t['gflops'] / d['gflops']:.2f}x" if d.get("status") == "ok" and t.get("status") == "ok" else "-"
    print(f"| {r['case']} | {r['T']} | {r['Dh']} | {g(d)} | {g(t)} | {ratio} | " +
          " | ".join(g(r["autoschedulers"].get(a, {})) for a in autos) + f" | `{t.get('schedule', '')}` |")
PY
