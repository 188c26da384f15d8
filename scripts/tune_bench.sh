#!/usr/bin/env bash
# Default vs tuned vs each Halide autoscheduler on the CPU benchmark's attention cases, measured
# by attn-tune in one run (its re-timed medians), printed as one table in GFLOP/s (the kept pairs'
# flops, as bench/cases.py and bench/attention_bench.cpp count them).
#   bash scripts/tune_bench.sh [--T '1024 2048'] [--budget SECONDS_PER_CASE] [--db FILE] [--cases 'full causal']
#                              [--update-docs]
# Records go to the tuning database (--db, else attn-tune's default). Builds attn-tune first.
# --update-docs writes the table, with date, CPU, commit and this command, as this CPU's section
# of the tuning results in docs/performance.md (replacing that CPU's earlier section).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
Ts="1024 2048"; budget=300; db=""; cases="full causal sliding_window_256 alibi_causal softcap_causal"; docs=""
command="bash scripts/tune_bench.sh${*:+$(printf ' %q' "$@")}"
while (($#)); do
  case "$1" in
    --T) Ts="$2"; shift 2 ;;
    --budget) budget="$2"; shift 2 ;;
    --db) db="$2"; shift 2 ;;
    --cases) cases="$2"; shift 2 ;;
    --update-docs) docs="$root/docs/performance.md"; shift ;;
    *) echo "tune_bench.sh: unknown argument '$1' (--T, --budget, --db, --cases, --update-docs)" >&2; exit 2 ;;
  esac
done
bash "$root/scripts/build.sh" --target attn-tune >/dev/null
summary=$(mktemp)
trap 'rm -f "$summary" "$summary.cases"' EXIT
db_args=(); [ -n "$db" ] && db_args=(--db "$db")
# The benchmark's cases are attnforge's named variants (attn-tune --list).
kernel_of() {
  case "$1" in
    full) echo attention ;; causal) echo causal_attention ;; sliding_window_256) echo sliding_window_attention ;;
    alibi_causal) echo alibi_causal_attention ;; softcap_causal) echo softcap_causal_attention ;;
    *) echo "tune_bench.sh: unknown case '$1'" >&2; exit 2 ;;
  esac
}
tune() {  # case T Dh
  "$root/build/tuner/attn-tune" "$(kernel_of "$1")" --bind "T=$2" --bind "Dh=$3" --budget "$budget" --summary "$summary" "${db_args[@]}"
  echo "$1" >>"$summary.cases"
}
for T in $Ts; do
  for c in $cases; do tune "$c" "$T" 64; done
  for c in full causal; do  # the benchmark's Dh = 128 cases
    case " $cases " in *" $c "*) tune "$c" "$T" 128 ;; esac
  done
done
"$root/.venv/bin/python" - "$summary" "$root/bench" "$docs" "$command" "$budget" <<'PY'
import json, sys
summary, bench, docs, command, budget = sys.argv[1:]
sys.path.insert(0, bench)
import cases, performance_doc
rows = [json.loads(l) for l in open(summary) if l.strip()]
for r, case in zip(rows, open(summary + ".cases").read().split()):  # GFLOP/s as the benchmark counts them
    r["case"], r["T"], r["Dh"] = case, r["sizes"]["T"], r["sizes"]["Dh"]
    for e in [r["default"], r["tuned"], *r["autoschedulers"].values()]:
        if e.get("status") == "ok": e["gflops"] = cases.flops(case, r["T"], r["Dh"]) / (e["ms"] * 1e-3) / 1e9
autos = ["Mullapudi2016", "Li2018", "Adams2019"]
def g(e): return f"{e['gflops']:.1f}" if e.get("status") == "ok" else e.get("status", "-")
lines = ["| case | T | Dh | default GFLOP/s | tuned GFLOP/s | tuned / default | " + " | ".join(autos) + " | tuned schedule |",
         "|---|---|---|---|---|---|" + "---|" * len(autos) + "---|"]
for r in rows:
    d, t = r["default"], r["tuned"]
    ratio = f"{t['gflops'] / d['gflops']:.2f}x" if d.get("status") == "ok" and t.get("status") == "ok" else "-"
    lines.append(f"| {r['case']} | {r['T']} | {r['Dh']} | {g(d)} | {g(t)} | {ratio} | " +
                 " | ".join(g(r["autoschedulers"].get(a, {})) for a in autos) + f" | `{t.get('schedule', '')}` |")
text = "\n".join(lines) + "\n"
print(text, end="")
if docs:
    machine, date = performance_doc.cpu_model(), performance_doc.today()
    performance_doc.write_section("tuning", machine, f"### {machine}, {date}\n\nMeasured {date} on {machine}, "
                                  f"commit {performance_doc.commit()}, by `{command}`: attn-tune's re-timed medians, "
                                  f"{budget} s a case, H = 8, B = 1.\n\n{text}", docs)
    print(f"(written into {docs})", file=sys.stderr)
PY
