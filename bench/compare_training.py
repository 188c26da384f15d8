"""The measurements behind scripts/training_bench.sh: one training case at a time (bench/cases.py
training_cases), its rounds alternating attnforge (training_bench: forward, backward, both) and
PyTorch (peers_training.py: autograd and FlexAttention, where torch imports), as bench/compare.py
does for the forward and with its pieces.
  python bench/compare_training.py --bench build/bench/training_bench --out DIR [--T 1024 2048]
      [--rounds 3] [--threads 2] [--min-time 0.5] [--bench-arg=--benchmark_min_time=0.2]...
Where torch imports, it first checks that both sides compute the cases' definitions: every peer's
output and gradients, and attnforge's (training_bench --dump at T = 384), against a float64
reference; a difference stops the run. Writes DIR/attnforge.CASE.ROUND.json and
DIR/peers.CASE.ROUND.json, CASE the case's index in training_cases' order; bench/training_table.py
reads them."""
import os
import subprocess
import sys

import cases
import compare


def run_attnforge(bench, bench_args, case, out):
    """The forward, the backward and the two in a row, on one case."""
    name, _, t, _ = case
    compare.run_bench(bench, [*bench_args, f"--lengths={t}"], f"^{name}/(forward|backward|step)/", out, name)


def check_attnforge(bench, peers, out):
    """attnforge's output and gradients of every variant against the float64 reference."""
    dump = os.path.join(out, "check")
    os.makedirs(dump, exist_ok=True)
    rc = subprocess.run([bench, f"--dump={dump}", f"--lengths={peers.CHECK_T}"]).returncode
    if rc != 0:
        sys.exit(f"{bench} --dump failed (exit status {rc})")
    peers.check_attnforge(dump)


def main():
    args = compare.parse(compare.arguments(__doc__, cases.TRAINING_TS, "training_bench"))
    selected = cases.training_cases(args.T)
    if not selected:
        sys.exit(f"compare_training.py: no training case at T = {' '.join(map(str, args.T))}")
    peers = None if args.no_peers else compare.torch_peers(args.threads, "peers_training")
    if peers:  # each stops the run if a side differs from the float64 reference
        check_attnforge(args.bench, peers, args.out)
        peers.check(selected)
    compare.alternate(selected, args.rounds, args.out,
                      lambda case, out: run_attnforge(args.bench, args.bench_arg, case, out), peers, args.min_time)


if __name__ == "__main__":
    main()
