"""Merges attention_bench's Google Benchmark JSON and peers.py's JSON into one Markdown table
(Python stdlib only); scripts/compare.sh runs it.
  python3 bench/compare_table.py FILE.json... [--docs docs/performance.md] [--command "bash scripts/compare.sh"]
Each FILE is attention_bench's output or peers.py's (told apart by their contents). With several of
either (scripts/compare.sh's rounds), each case's time is its best over them: on a shared machine
other load only slows a run, and rounds that alternate attnforge and PyTorch case by case
(bench/compare.py) give both the same chances.
--docs writes the table, with its date, CPU, commit and command, as this CPU's section of the CPU
comparison in that file (bench/performance_doc.py: a new run replaces its own machine's section)."""
import argparse
import json
import os
import re
import statistics
import sys

import cases
import performance_doc

KIND = "cpu-comparison"  # the section kind in docs/performance.md
UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
PATHS = ("fused", "generic")  # the last part of attention_bench's names (training_bench's: its parts)


def attnforge_runs(report, paths=PATHS):
    """{(case name, path): (seconds, label, flops)} of one report: the median aggregate where repetitions
    ran, else the median run; `paths`: the names' last parts to read."""
    runs = {}
    for b in report["benchmarks"]:
        if b.get("error_occurred"):
            continue
        name = b.get("run_name", b["name"])
        kind = b.get("aggregate_name") if b.get("run_type") == "aggregate" else "run"
        if kind not in ("median", "run"):
            continue
        seconds = b["real_time"] * UNIT_SECONDS[b.get("time_unit", "ns")]
        runs.setdefault(name, {}).setdefault(kind, []).append((seconds, b.get("label", ""), b.get("flops")))
    out = {}
    for name, kinds in runs.items():
        rows = kinds.get("median") or kinds["run"]
        seconds = statistics.median(r[0] for r in rows)
        m = re.match(rf"(.+)/({'|'.join(paths)})(/|$)", name)  # names end in /real_time and the like
        if not m:
            continue
        out[(m.group(1), m.group(2))] = (seconds, rows[0][1], rows[0][2])
    return out


def best_attnforge_runs(reports, paths=PATHS):
    """attnforge_runs over several reports: each case's fastest, and the most reports one case is in
    (compare.sh's rounds: it writes one report per case and round)."""
    best, seen = {}, {}
    for report in reports:
        for key, run in attnforge_runs(report, paths).items():
            seen[key] = seen.get(key, 0) + 1
            if key not in best or run[0] < best[key][0]:
                best[key] = run
    return best, max(seen.values(), default=1)


def best_peer_rows(peer_reports):
    """{(case name, peer): row}: each case's fastest timed row over the reports, else its first note."""
    best = {}
    for report in peer_reports:
        for row in report.get("results", []):
            key = (row["name"], row["peer"])
            old = best.get(key)
            if old is None or (row["seconds"] is not None and (old["seconds"] is None or row["seconds"] < old["seconds"])):
                best[key] = row
    return best


def fmt(x, digits=1):
    return "—" if x is None else f"{x:.{digits}f}"


PEERS = {"sdpa": "SDPA", "flex": "Flex"}


def peer_cell(row):
    """GFLOP/s of a peer's row, "n/a" where it cannot express the case, "failed" where it broke."""
    if row is None:
        return None, "—"
    if row["gflops"] is not None:
        return row["gflops"], fmt(row["gflops"])
    return None, "n/a" if row["note"].startswith("n/a") else "failed"


def table(reports, peer_reports, command="bash scripts/compare.sh"):
    # The best FMA peak measured in the run: at the start of each report, and after each case (attention_bench).
    peaks = []
    for report in reports:
        context = report.get("context", {})
        peaks += [float(context["fma_peak_gflops"])] if "fma_peak_gflops" in context else []
        peaks += [float(b["fma_peak"]) for b in report["benchmarks"] if "fma_peak" in b]
    peak = max(peaks, default=float("nan"))
    threads = reports[0].get("context", {}).get("threads", "?")
    runs, rounds = best_attnforge_runs(reports)
    peer_rows = best_peer_rows(peer_reports)
    peers = peer_reports[0] if peer_reports else None
    ts = sorted({int(re.search(r"/T:(\d+)", case).group(1)) for case, _ in runs})

    torch_text = f"PyTorch {peers['torch']} ({peers['threads']} threads, torch.set_num_threads)" if peers else \
        "PyTorch not installed (bash scripts/setup_peers.sh), so its columns are empty"
    lines = [
        f"{performance_doc.provenance(command)}: attnforge with "
        f"{threads} threads (HL_NUM_THREADS), {torch_text}; FMA peak measured in the same run on "
        f"{threads} threads: {peak:.1f} GFLOP/s.",
        "",
        "| case | attnforge fused GFLOP/s | fraction of FMA peak | generic GFLOP/s | SDPA GFLOP/s | Flex GFLOP/s "
        "| fused/SDPA | fused/Flex | no softmax GFLOP/s | no softmax/SDPA | fused path |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    notes = set()
    for name, variant, t, dh in cases.cases(ts):
        fused, generic = runs.get((name, "fused")), runs.get((name, "generic"))
        if not fused and not generic:
            continue
        flops = cases.flops(variant, t, dh)
        no_softmax = runs.get((cases.no_softmax_name(variant, t, dh), "fused"))
        for run in (fused, generic, no_softmax):
            if run and run[2] is not None and abs(run[2] - flops) > 1e-6 * flops:
                sys.exit(f"compare_table: {name}: attention_bench counts {run[2]:.0f} FLOPs, bench/cases.py {flops}")
        f_gf, g_gf, n_gf = (flops / run[0] / 1e9 if run else None for run in (fused, generic, no_softmax))
        cells = [fmt(f_gf), fmt(f_gf / peak if f_gf else None, 3), fmt(g_gf)]
        ratios, peer_gflops = [], {}
        for p in PEERS:
            row = peer_rows.get((name, p))
            gflops, text = peer_cell(row)
            peer_gflops[p] = gflops
            cells.append(text)
            ratios.append(fmt(f_gf / gflops if f_gf and gflops else None, 2))
            if row and row["note"]:
                notes.add(f"{PEERS[p]}: {row['note']}")
        ratios += [fmt(n_gf), fmt(n_gf / peer_gflops["sdpa"] if n_gf and peer_gflops["sdpa"] else None, 2)]
        path = re.search(r"path=(\S+)", fused[1]) if fused else None
        label = f"{variant} T={t} Dh={dh}" if variant != "mha_proj" else f"MHA with projections, D=512, 8 heads, T={t}"
        lines.append(f"| {label} | " + " | ".join(cells + ratios + [path.group(1) if path else "—"]) + " |")
    lines += [
        "",
        f"H = 8, B = 1, float32; GFLOP/s from median times" +
        (f", each case's best of {rounds} rounds (scripts/compare.sh: attnforge and PyTorch alternate, "
         "one case at a time)" if rounds > 1 else "") + f". {cases.FLOP_COUNTING} Ratios above 1: attnforge's "
        "fused kernel is faster. No softmax: the same fused kernel with ReLU weights (relu(s)/T, "
        "attention_bench's relu case, timed beside it) in place of the softmax, full attention's "
        "speed were its softmax free; no softmax/SDPA is the most fused/SDPA could be with these products. "
        "Fused path: what `jit_options{.path = automatic}` ran (`kernel.compiled().describe()`).",
    ]
    if notes:
        lines += [""] + [f"- {n}" for n in sorted(notes)]
    return "\n".join(lines) + "\n"


def write_docs(path, text, kind=KIND):
    """The table as this CPU's dated section of `kind` (the CPU comparison) in `path`."""
    machine = performance_doc.cpu_model()
    performance_doc.write_section(kind, machine, f"### {machine}, {performance_doc.today()}\n\n{text}", path)


def read_reports(files, program="attention_bench"):
    """(Google Benchmark reports, peers' reports) of `files`, told apart by their contents; a file
    that does not exist is skipped (a peer that did not run)."""
    reports, peer_reports = [], []
    for path in files:
        if not os.path.exists(path):
            continue
        with open(path) as f:
            report = json.load(f)
        if "benchmarks" in report:
            reports.append(report)
        elif "results" in report:
            peer_reports.append(report)
        else:
            sys.exit(f"{os.path.basename(sys.argv[0])}: {path} is neither {program}'s JSON nor the peers'")
    if not reports:
        sys.exit(f"{os.path.basename(sys.argv[0])}: no {program} JSON among " + " ".join(files))
    return reports, peer_reports


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", help="attention_bench's --benchmark_out JSON and peers.py's JSON; "
                    "a file that does not exist is skipped (a peer that did not run)")
    ap.add_argument("--docs", help="write the table into this file (docs/performance.md) as this CPU's section")
    ap.add_argument("--command", default="bash scripts/compare.sh", help="the command that ran, named in the text")
    args = ap.parse_args()
    reports, peer_reports = read_reports(args.files)
    text = table(reports, peer_reports, args.command)
    print(text, end="")
    if args.docs:
        write_docs(args.docs, text)
        print(f"(written into {args.docs})", file=sys.stderr)


if __name__ == "__main__":
    main()
