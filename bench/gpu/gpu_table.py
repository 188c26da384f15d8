"""The GPU tables from scripts/gpu_bench.sh's CSV: per case, attnforge's default GPU schedule, its
best schedule of those timed, SDPA and FlexAttention, in TFLOP/s and as a fraction of the measured
fp32 FMA peak, and the ratios; then the default schedule's backward against its forward and the
peers' backwards (where the run timed them: peers_gpu.py --backward).
  python3 bench/gpu/gpu_table.py GPU_BENCH.csv [--docs docs/performance.md]
      [--date D] [--gpu NAME] [--driver V] [--commit C] [--command CMD] [--fma-peak-tflops P] [--note TEXT]
The CSV's '# key: value' lines (date, gpu, driver, commit, command, fma_peak_tflops, written by gpu_bench.sh) name the run;
the options replace them (for a CSV without them). --docs writes the table, with that line, as
this GPU's section of the GPU benchmark in that file (bench/performance_doc.py)."""
import argparse
import collections
import csv
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import performance_doc  # noqa: E402

KIND = "gpu-benchmark"  # the section kind in docs/performance.md
MASK_NAMES = {"alibi": "ALiBi + causal", "softcap": "softcap 20 + causal", "window": "sliding window 256"}
KEYS = ("date", "gpu", "driver", "commit", "command", "fma_peak_tflops")  # what names a run
IMPLS = ("attnforge", "sdpa", "flex")  # the CSV's impl column, each also with "-backward"


def read_run(path):
    """({(mask, T, Dh): {schedule or peer: (TFLOP/s, fraction of peak, ms)}}, {key: value} of '# key: value'
    lines, the peers' torch version, {(mask, T, Dh): {attnforge, sdpa or flex: the backward's (TFLOP/s,
    fraction of peak, ms)}})."""
    cases, about, torch, backward = collections.defaultdict(dict), {}, None, collections.defaultdict(dict)
    with open(path) as f:
        for line in f:
            if line.startswith("#") and ":" in line:
                key, value = line[1:].split(":", 1)
                about[key.strip()] = value.strip()
                continue
            row = next(csv.reader([line]))
            if len(row) != 9 or row[0].removesuffix("-backward") not in IMPLS:
                continue
            impl, schedule, mask, t, dh, ms, gflops, peak, _err = row
            measured = (float(gflops) / 1e3, float(peak), float(ms))
            if not impl.startswith("attnforge"):
                torch = schedule.removeprefix("torch ")
            if impl.endswith("-backward"):
                backward[(mask, int(t), int(dh))][impl.removesuffix("-backward")] = measured
                continue
            name = schedule if impl == "attnforge" else impl
            cases[(mask, int(t), int(dh))][name] = measured
    return cases, about, torch, backward


ORDER = ["full", "causal", "alibi", "softcap", "window"]  # bench/gpu/kernels.cpp's masks


def in_order(keys):
    return sorted(keys, key=lambda k: (ORDER.index(k[0]) if k[0] in ORDER else len(ORDER), k[0], k[1], k[2]))


def table(cases):
    lines = ["| mask | T | Dh | attnforge default: TFLOP/s (of peak) | best attnforge schedule: TFLOP/s | "
             "SDPA: TFLOP/s (of peak) | FlexAttention: TFLOP/s | default / SDPA | default / Flex |",
             "|---|---|---|---|---|---|---|---|---|"]
    for key in in_order(cases):
        c = cases[key]
        if not {"default", "flex"} <= c.keys():
            continue
        best, label = max((v[0], k) for k, v in c.items() if k not in ("sdpa", "flex"))
        label = "default" if label == "default" else f"`{label}`"
        d, fl = c["default"], c["flex"]
        sdpa = f"{c['sdpa'][0]:.1f} ({c['sdpa'][1]:.0%})" if "sdpa" in c else "(not run)"
        ratio = f"{d[0] / c['sdpa'][0]:.3f}" if "sdpa" in c else "–"
        lines.append(f"| {MASK_NAMES.get(key[0], key[0])} | {key[1]} | {key[2]} | {d[0]:.2f} ({d[1]:.1%}) | {best:.2f} ({label}) | "
                     f"{sdpa} | {fl[0]:.1f} | {ratio} | {d[0] / fl[0]:.2f} |")
    return "\n".join(lines) + "\n"


def backward_table(cases, backward):
    """The default schedule's backward (d_q, d_k, d_v from the saved output and log-sum-exp) beside its
    forward, and the peers' backwards (autograd's, from the graph their forward kept)."""
    lines = ["| mask | T | Dh | forward ms | backward ms | backward / forward | backward TFLOP/s (of peak) | "
             "SDPA backward: TFLOP/s | FlexAttention backward: TFLOP/s | backward / SDPA's | backward / Flex's |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for key in in_order(backward):
        b = backward[key]
        if "attnforge" not in b:
            continue
        mine = b["attnforge"]
        f = cases.get(key, {}).get("default")
        forward = f"{f[2]:.3f}" if f else "(not run)"
        ratio = f"{mine[2] / f[2]:.2f}" if f else "–"
        peers = [f"{b[p][0]:.1f}" if p in b else "(not run)" for p in ("sdpa", "flex")]
        speedups = [f"{mine[0] / b[p][0]:.2f}" if p in b else "–" for p in ("sdpa", "flex")]
        lines.append(f"| {MASK_NAMES.get(key[0], key[0])} | {key[1]} | {key[2]} | {forward} | {mine[2]:.3f} | {ratio} | "
                     f"{mine[0]:.2f} ({mine[1]:.1%}) | {peers[0]} | {peers[1]} | {speedups[0]} | {speedups[1]} |")
    return "\n".join(lines) + "\n" if len(lines) > 2 else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", help="scripts/gpu_bench.sh's output")
    ap.add_argument("--docs", help="write the table into this file (docs/performance.md) as this GPU's section")
    for key in KEYS:
        ap.add_argument(f"--{key.replace('_', '-')}", dest=key, help=f"the run's {key} (default: the CSV's '# {key}:' line)")
    ap.add_argument("--note", help="a paragraph written below the table (what a reader must know about this run)")
    args = ap.parse_args()
    cases, about, torch, backward = read_run(args.csv)
    for key in KEYS:
        about[key] = getattr(args, key) or about.get(key, "unknown")
    text = table(cases)
    if backward_rows := backward_table(cases, backward):
        text += ("\nThe backward (d_q, d_k, d_v from the output and log-sum-exp its forward saved; FLOPs 2.5 times the "
                 "forward's) with the default schedule:\n\n" + backward_rows)
    print(text, end="")
    if args.docs:
        driver = f" (driver {about['driver']})" if about["driver"] != "unknown" else ""
        about_run = (
                f"Measured {about['date']} on {about['gpu']}{driver}, commit {about['commit']}, by `{about['command']}` "
                f"(kernels built with `-DATTN_GPU_BENCH=ON`, target `gpu_bench`); fp32, B = 4, H = 16; fp32 FMA peak "
                f"measured in the same run (bench/gpu/fma_peak.cu): {about['fma_peak_tflops']} TFLOP/s; SDPA and "
                f"FlexAttention from PyTorch {torch or 'unknown'}, TF32 off; FLOPs counted over the query-key pairs a mask "
                f"keeps (causal: half); SDPA runs full and causal attention only.")
        body = f"### {about['gpu']}, {about['date']}\n\n{about_run}\n\n{text}"
        if args.note:
            body += f"\n{args.note}\n"
        performance_doc.write_section(KIND, about["gpu"], body, args.docs)
        print(f"(written into {args.docs})", file=sys.stderr)


if __name__ == "__main__":
    main()
