"""PyTorch on attnforge's training benchmark (bench/cases.py training_cases), on the CPU, float32,
B = 1, H = 8: one training step, the forward then autograd's backward with dY, q, k, v (and
t5_bias's table) requiring gradients:
  autograd  full, causal: torch.nn.functional.scaled_dot_product_attention (is_causal for causal);
            the others written out eagerly (scores, modifier, mask, softmax, ·V: T × T tensors),
            the modifier's constants (ALiBi's bias, the mask, the T5 buckets) made once per case
  flex      FlexAttention under torch.compile with score_mod / mask_mod and a block mask (peers.py's,
            and the table read by the T5 buckets); PyTorch has no FlexAttention backward on the CPU,
            so this records the error it raises
Prints JSON on stdout, peers.py's format: {"torch": ..., "threads": ..., "results": [{name, peer,
seconds, gflops (null), note}]}.
  .venv-peers/bin/python bench/peers_training.py [--threads 2] [--T 1024 2048] [--filter causal] [--check]
      [--check-attnforge DIR]
--check first compares every peer's output and gradients with a float64 reference of the cases'
definitions on a small shape and stops if one differs. --check-attnforge DIR does the same for
attnforge's (build/bench/training_bench --dump=DIR). Needs scripts/setup_peers.sh;
scripts/training_bench.sh runs it."""
import argparse
import json
import math
import os
import re
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import flex_attention

import cases
import peers

H = cases.HEADS
CHECK_T = 384  # past the window (256) and T5's longest distance (128); a multiple of Flex's 128 block
log = peers.log
report = peers.report


def t5_buckets(t):
    """(T, T) int64: T5's bucket of kv_idx - q_idx for each (query, key), bidirectional, as
    dsl::t5_bucket<true>(T5_BUCKETS, T5_MAX_DISTANCE) computes it: per direction, distances below
    `exact` get a bucket each, longer ones logarithmically wider buckets up to the longest distance;
    keys after the query use the upper half of the buckets."""
    per_side = cases.T5_BUCKETS // 2
    exact = per_side // 2
    rel = torch.arange(t)[None, :] - torch.arange(t)[:, None]
    n = rel.abs()
    large = (exact + torch.log(n.double() / exact) / math.log(cases.T5_MAX_DISTANCE / exact) * (per_side - exact))
    within = torch.where(n < exact, n.double(), large.clamp(max=per_side - 1))
    return (torch.where(rel > 0, per_side, 0) + within).long()  # truncated, as gather truncates


def t5_bias(table, buckets):
    """(H, T, T): table[bucket of (query, key), head]."""
    return table[buckets].permute(2, 0, 1)


def eager_fn(variant, t):
    """A case's attention written out with torch ops (every T × T intermediate stored); the
    constants of its modifier and mask made here, once."""
    keep = None if variant in ("full", "t5_bias") else peers.keep_matrix(variant, t)
    if variant == "alibi_causal":
        distance = torch.arange(t)[:, None] - torch.arange(t)[None, :]
        alibi = -peers.alibi_slopes()[:, None, None] * distance  # (H, T, T)
    buckets = t5_buckets(t) if variant == "t5_bias" else None

    def attend(q, k, v, table=None):
        s = q @ k.transpose(-1, -2) * (1.0 / math.sqrt(q.shape[-1]))
        if variant == "alibi_causal":
            s = s + alibi
        elif variant == "softcap_causal":
            s = cases.CAP * torch.tanh(s / cases.CAP)
        elif variant == "t5_bias":
            s = s + t5_bias(table, buckets)
        if keep is not None:
            s = s.masked_fill(~keep, float("-inf"))
        return torch.softmax(s, dim=-1) @ v
    return attend


def autograd_fn(variant, t):
    """PyTorch's attention for a training step: SDPA where it expresses the case (and has a fused
    CPU kernel with a backward: no mask but causal), else eager_fn."""
    if variant == "full":
        return lambda q, k, v: F.scaled_dot_product_attention(q, k, v)
    if variant == "causal":
        return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return eager_fn(variant, t)


def flex_fn(variant, t, table=None):
    """FlexAttention compiled for one case; t5_bias's score_mod reads `table` (which requires grad)."""
    if variant != "t5_bias":
        return peers.flex_fn(variant, t)
    buckets = t5_buckets(t)

    def t5(score, b, h, q_idx, kv_idx):
        return score + table[buckets[q_idx, kv_idx], h]
    compiled = torch.compile(flex_attention, dynamic=False)
    return lambda q, k, v, _table: compiled(q, k, v, score_mod=t5)


def make_inputs(variant, t, dh, dtype=torch.float32, seed=0):
    """q, k, v (and t5_bias's table), each requiring its gradient, and dY."""
    g = torch.Generator().manual_seed(seed)
    inputs = [torch.randn(1, H, t, dh, generator=g, dtype=dtype) for _ in range(3)]
    if variant == "t5_bias":
        inputs.append(0.5 * torch.randn(cases.T5_BUCKETS, H, generator=g, dtype=dtype))
    dy = torch.randn(1, H, t, dh, generator=g, dtype=dtype)
    return [x.requires_grad_() for x in inputs], dy


def step(fn, inputs, dy):
    """One training step: the forward, then the gradients of every input into its .grad; returns
    the forward's output."""
    for x in inputs:
        x.grad = None
    y = fn(*inputs)
    y.backward(dy)
    return y


def reference(variant, q, k, v, table=None):
    """float64, written from the cases' definitions: peers.reference, and T5's bias here."""
    if variant != "t5_bias":
        return peers.reference(variant, q, k, v)
    q, k, v, table = (x.double() for x in (q, k, v, table))
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + t5_bias(table, t5_buckets(q.shape[-2]))
    return torch.softmax(s, dim=-1) @ v


def reference_step(variant, inputs, dy):
    """The float64 reference's output and gradients of `inputs`."""
    leaves = [x.detach().double().requires_grad_() for x in inputs]
    y = reference(variant, *leaves)
    return [y.detach()] + list(torch.autograd.grad(y, leaves, dy.double()))


def relative_error(got, want):
    """Largest |got - want| over the largest |want| (at least 1): gradients summed over many pairs
    (a table's) are large, and their float32 rounding with them."""
    return ((got.double() - want).abs().max() / max(1.0, want.abs().max().item())).item()


def compare(what, names, got, want, tolerance):
    """The worst relative_error of `got` against `want`; stops the run if one is past `tolerance`."""
    worst = 0.0
    for n, a, b in zip(names, got, want):
        err = relative_error(a, b)
        worst = max(worst, err)
        if not err <= tolerance:
            sys.exit(f"peers_training.py: {what}: {n} differs from the float64 reference by {err:.2e} > {tolerance}")
    log(f"check {what}: output and gradients within {worst:.2e} of the float64 reference")
    return worst


def check(selected, t=CHECK_T, tolerance=1e-4):
    """Every peer's output and gradients against the float64 reference at T = CHECK_T."""
    done = set()
    for _, variant, _, dh in selected:
        if (variant, dh) in done:
            continue
        done.add((variant, dh))
        inputs, dy = make_inputs(variant, t, dh)
        want = reference_step(variant, inputs, dy)
        names = ["y"] + [f"d_{n}" for n in ("q", "k", "v", "table")[:len(inputs)]]
        for peer in ("autograd", "flex"):
            try:
                fn = autograd_fn(variant, t) if peer == "autograd" else flex_fn(variant, t, *inputs[3:])
                y = step(fn, inputs, dy).detach()
            except Exception as e:  # timing will note the failure; the other peers still run
                log(f"check {variant} Dh={dh} T={t} {peer}: {peers.failure_note(e)}")
                continue
            compare(f"{variant} Dh={dh} T={t} {peer}", names, [y] + [x.grad for x in inputs], want, tolerance)
        torch._dynamo.reset()


def check_attnforge(directory, tolerance=1e-4):
    """attnforge's output and gradients, as training_bench --dump=DIRECTORY wrote them, against the
    float64 reference of the same tensors."""
    for path in sorted(p for p in os.listdir(directory) if p.endswith(".json")):
        variant = path[:-len(".json")]
        with open(os.path.join(directory, path)) as f:
            shapes = json.load(f)
        tensors = {n: torch.from_file(os.path.join(directory, f"{variant}.{n}.f32"), size=math.prod(s),
                                      dtype=torch.float32).view(s) for n, s in shapes.items()}
        inputs = [tensors[n] for n in ("q", "k", "v", "table") if n in tensors]
        names = ["y"] + [f"d_{n}" for n in ("q", "k", "v", "table") if n in tensors]
        want = reference_step(variant, inputs, tensors["dy"])
        compare(f"attnforge {variant} T={tensors['q'].shape[-2]}", names, [tensors[n] for n in names], want, tolerance)


class case_peers(peers.case_peers):
    """One case's training steps, built once and timed as often as asked (peers.case_peers)."""

    PEERS = ("autograd", "flex")

    def make_inputs(self):
        """q, k, v (and the table); dY, which the steps also need, kept as self.dy."""
        inputs, self.dy = make_inputs(self.variant, self.t, self.dh)
        return inputs

    def make_fn(self, peer):
        if peer == "autograd":
            return autograd_fn(self.variant, self.t)
        return flex_fn(self.variant, self.t, *self.inputs[3:])

    def flops(self):
        return None  # the table reports milliseconds

    def time_fn(self, fn, min_time):
        return peers.time_call(lambda: step(fn, self.inputs, self.dy), [], min_time, grad=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--T", type=int, nargs="+", default=list(cases.TRAINING_TS))
    ap.add_argument("--filter", default="", help="regex on case names, e.g. 'causal/T:1024/'")
    ap.add_argument("--min-time", type=float, default=1.0, help="seconds of timed steps per case and peer")
    ap.add_argument("--check", action="store_true", help="first check every peer against a float64 reference")
    ap.add_argument("--check-attnforge", metavar="DIR", help="first check training_bench --dump=DIR's gradients")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    selected = [c for c in cases.training_cases(args.T) if re.search(args.filter, c[0])]
    if args.check_attnforge:
        check_attnforge(args.check_attnforge)
    if args.check:
        check(selected)

    results = []
    for c in selected:
        on_case = case_peers(*c)
        results += on_case.time(args.min_time)
        on_case.close()
    json.dump(report(results), sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
