"""PyTorch's SDPA on bfloat16 tensors, on precision_bench's cases: reads its Markdown table on
standard input and prints it with two more columns, PyTorch's time and attnforge's bfloat16
speed-up over it (scripts/precision_bench.sh runs it after the table, in the same run).
   .venv-peers/bin/python bench/precision_peer.py [--rounds N] < table.md"""
import argparse
import os
import re
import sys
import time

import torch


def best_ms(call, rounds):
    """The best of `rounds` calls, after two that warm up."""
    call()
    call()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def sdpa_ms(case, queries, keys, dh, rounds):
    """SDPA on the case's bfloat16 tensors; "GQA H/G" in the case: K and V with G heads (enable_gqa)."""
    g = torch.Generator().manual_seed(0)
    gqa = re.search(r"GQA (\d+)/(\d+)", case)
    kv_heads = int(gqa.group(2)) if gqa else 8
    q = torch.randn(1, 8, queries, dh, generator=g).to(torch.bfloat16)
    k = torch.randn(1, kv_heads, keys, dh, generator=g).to(torch.bfloat16)
    v = torch.randn(1, kv_heads, keys, dh, generator=g).to(torch.bfloat16)
    causal = "causal" in case
    sdpa = torch.nn.functional.scaled_dot_product_attention
    with torch.no_grad():
        return best_ms(lambda: sdpa(q, k, v, is_causal=causal, enable_gqa=gqa is not None), rounds)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5, help="timed calls per case (decode: 4 times as many, as precision_bench)")
    args = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("HL_NUM_THREADS", "2")))
    for line in sys.stdin.read().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| case"):
            print(line + " PyTorch SDPA bfloat16 ms | attnforge bfloat16 over PyTorch |")
        elif line.startswith("|---"):
            print(line + "---|---|")
        elif line.startswith("| "):
            case, queries, keys, dh = cells[0], int(cells[1]), int(cells[2]), int(cells[3])
            ours = float(cells[6])
            rounds = args.rounds * (4 if case.startswith("decode") else 1)
            theirs = sdpa_ms(case, queries, keys, dh, rounds)
            print(line + f" {theirs:.3f} | {theirs / ours:.2f}x |", flush=True)
        else:
            print(line)


if __name__ == "__main__":
    main()
