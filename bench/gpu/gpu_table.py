"""The README's GPU table from scripts/gpu_bench.sh's CSV: per case, attnforge's default GPU
schedule, its best schedule of those timed, SDPA and FlexAttention, in TFLOP/s and as a fraction
of the measured fp32 FMA peak, and the ratios.   usage: python3 gpu_table.py GPU_BENCH.csv"""
import collections
import csv
import sys


def main():
    cases = collections.defaultdict(dict)
    with open(sys.argv[1]) as f:
        for row in csv.reader(f):
            if len(row) != 9 or row[0] not in ("attnforge", "sdpa", "flex"):
                continue
            impl, schedule, mask, t, dh, _ms, gflops, peak, _err = row
            name = schedule if impl == "attnforge" else impl
            cases[(mask, int(t), int(dh))][name] = (float(gflops) / 1e3, float(peak))
    print("| mask | T | Dh | attnforge default: TFLOP/s (of peak) | best attnforge schedule: TFLOP/s | SDPA: TFLOP/s (of peak) "
          "| FlexAttention: TFLOP/s | default / SDPA | default / Flex |")
    print("|---|---|---|---|---|---|---|---|---|")
    for key in sorted(cases, key=lambda k: (k[0] != "full", k[1], k[2])):
        c = cases[key]
        if not {"default", "sdpa", "flex"} <= c.keys():
            continue
        best, label = max((v[0], k) for k, v in c.items() if k not in ("sdpa", "flex"))
        label = "default" if label == "default" else f"`{label}`"
        d, s, fl = c["default"], c["sdpa"], c["flex"]
        print(f"| {key[0]} | {key[1]} | {key[2]} | {d[0]:.2f} ({d[1]:.1%}) | {best:.2f} ({label}) | {s[0]:.1f} ({s[1]:.0%}) "
              f"| {fl[0]:.1f} | {d[0] / s[0]:.3f} | {d[0] / fl[0]:.2f} |")


if __name__ == "__main__":
    main()
