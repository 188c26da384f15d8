"""The measurements behind scripts/compare.sh: one case at a time, its rounds alternating attnforge
(attention_bench: the fused and the generic kernel) and PyTorch (peers.py: SDPA and FlexAttention,
where torch imports), so that both sides of a ratio are timed seconds apart. On a shared machine the
speed drifts over minutes; timed a whole sequence length apart, one side of a ratio could land in a
busy spell the other missed. Flex compiles once per case, before the first round.
  python bench/compare.py --bench build/bench/attention_bench --out DIR [--T 512 1024] [--rounds 3]
      [--threads 2] [--min-time 0.5] [--bench-arg=--benchmark_min_time=0.2]...
Writes DIR/attnforge.CASE.ROUND.json (Google Benchmark) and DIR/peers.CASE.ROUND.json (peers.py's
format), CASE the case's index in bench/cases.py's order; bench/compare_table.py reads them."""
import argparse
import importlib
import json
import os
import subprocess
import sys

import cases


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def torch_peers(threads, module="peers"):
    """The peers' module (peers.py, or peers_training.py) with torch set to `threads`, or None where
    torch does not import."""
    try:
        peers = importlib.import_module(module)
    except ImportError as e:
        log(f"== PyTorch not available ({e}): peer columns stay empty. Install it (once, ~3 GB) with: "
            "bash scripts/setup_peers.sh")
        return None
    peers.torch.set_num_threads(threads)
    return peers


def run_bench(bench, bench_args, name_filter, out, name):
    """A Google Benchmark program on the benchmarks `name_filter` matches, its JSON report into
    `out`; its exit status is checked (a benchmark that reports an error does not fail it)."""
    rc = subprocess.run([bench, *bench_args, f"--benchmark_filter={name_filter}", f"--benchmark_out={out}",
                         "--benchmark_out_format=json"]).returncode
    if rc != 0:
        sys.exit(f"{bench} failed on {name} (exit status {rc})")


def run_attnforge(bench, bench_args, case, out):
    """Both of attnforge's kernels on one case (and its fused kernel without the softmax, where
    cases.NO_SOFTMAX names one)."""
    name, variant, t, dh = case
    no_softmax = cases.no_softmax_name(variant, t, dh)
    extra = f"|{no_softmax}/fused" if no_softmax else ""
    run_bench(bench, bench_args, f"^({name}/(fused|generic){extra})/", out, name)


def alternate(selected, rounds, out, attnforge, peers, min_time):
    """Each case in turn, `rounds` times attnforge(case, JSON path) then the peers' timing (peers:
    the module, or None), into out/attnforge.CASE.ROUND.json and out/peers.CASE.ROUND.json."""
    os.makedirs(out, exist_ok=True)
    for index, case in enumerate(selected):
        name = case[0]
        on_case = peers.case_peers(*case) if peers else None
        for r in range(1, rounds + 1):
            log(f"== {name} ({index + 1} of {len(selected)}), round {r} of {rounds}")
            attnforge(case, os.path.join(out, f"attnforge.{index}.{r}.json"))
            if on_case:
                with open(os.path.join(out, f"peers.{index}.{r}.json"), "w") as f:
                    json.dump(peers.report(on_case.time(min_time)), f, indent=1)
        if on_case:
            on_case.close()


def arguments(description, lengths, bench_help):
    """The command line shared with compare_training.py."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", required=True, help=bench_help)
    ap.add_argument("--out", required=True, help="directory for the JSON reports")
    ap.add_argument("--T", type=int, nargs="+", default=list(lengths))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2, help="PyTorch's threads (attnforge's: HL_NUM_THREADS)")
    ap.add_argument("--min-time", type=float, default=0.5, help="seconds of timed calls per case, peer and round")
    ap.add_argument("--bench-arg", action="append", default=[], help=f"passed to {bench_help}")
    ap.add_argument("--no-peers", action="store_true", help="attnforge only")
    return ap


def parse(ap):
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error(f"--rounds wants a positive integer, got {args.rounds}")
    return args


def main():
    args = parse(arguments(__doc__, cases.TS, "attention_bench"))
    selected = cases.cases(args.T)
    peers = None if args.no_peers else torch_peers(args.threads)
    if peers:
        peers.check_once_per_variant(selected)  # stops the run if a peer differs from the float64 reference
    alternate(selected, args.rounds, args.out,
              lambda case, out: run_attnforge(args.bench, args.bench_arg, case, out), peers, args.min_time)


if __name__ == "__main__":
    main()
