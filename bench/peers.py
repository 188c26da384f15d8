"""PyTorch on attnforge's benchmark cases (bench/cases.py), on the CPU, float32, B = 1, H = 8:
  sdpa  torch.nn.functional.scaled_dot_product_attention (eager): is_causal for causal, a boolean
        attn_mask for the sliding window, an additive float mask for ALiBi; softcap: n/a (no score hook)
  flex  FlexAttention under torch.compile, with score_mod / mask_mod and a block mask, as attention-gym
        writes them; one compile per case
Prints JSON on stdout: {"torch": ..., "threads": ..., "results": [{name, peer, seconds, gflops, note}]}.
  .venv-peers/bin/python bench/peers.py [--threads 2] [--T 512 1024] [--filter causal] [--check]
--check first compares every peer with a float64 reference of the cases' definitions on a small shape
and stops if one differs. Needs scripts/setup_peers.sh; scripts/compare.sh runs it."""
import argparse
import json
import math
import re
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

import cases

H = cases.HEADS


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# Slopes of ALiBi: head h (0-based) adds -m_h·(q_idx - kv_idx), m_h = 2^(-8(h+1)/H).
def alibi_slopes(dtype=torch.float32):
    return torch.exp2(-8.0 * (torch.arange(H, dtype=dtype) + 1) / H)


# mask_mod / score_mod for FlexAttention: True keeps a (query, key) pair.
def causal_mask(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def sliding_window_mask(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) & (q_idx - kv_idx < cases.WINDOW)


def flex_mods(variant):
    """(score_mod, mask_mod) of a case; None where there is none."""
    if variant == "alibi_causal":
        slopes = alibi_slopes()

        def alibi(score, b, h, q_idx, kv_idx):
            return score + slopes[h] * (kv_idx - q_idx)
        return alibi, causal_mask
    if variant == "softcap_causal":
        def softcap(score, b, h, q_idx, kv_idx):
            return cases.CAP * torch.tanh(score / cases.CAP)
        return softcap, causal_mask
    return None, {"causal": causal_mask, "sliding_window_256": sliding_window_mask}.get(variant)


def keep_matrix(variant, t):
    """(T, T) booleans: which keys each query sees."""
    i = torch.arange(t)[:, None]
    j = torch.arange(t)[None, :]
    if variant in ("full", "mha_proj"):
        return torch.ones(t, t, dtype=torch.bool)
    if variant == "sliding_window_256":
        return (j <= i) & (i - j < cases.WINDOW)
    return j <= i


def sdpa_fn(variant, t):
    """An attention (q, k, v) -> out with SDPA, or None where SDPA cannot express the case."""
    if variant in ("full", "mha_proj"):
        return lambda q, k, v: F.scaled_dot_product_attention(q, k, v)
    if variant == "causal":
        return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)
    if variant == "sliding_window_256":
        keep = keep_matrix(variant, t)
        return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    if variant == "alibi_causal":
        i = torch.arange(t)[:, None]
        j = torch.arange(t)[None, :]
        bias = -alibi_slopes()[:, None, None] * (i - j)  # (H, T, T)
        bias = bias.masked_fill(~keep_matrix(variant, t), float("-inf"))[None]
        return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    return None  # softcap: SDPA has no hook on the scores


def flex_fn(variant, t):
    """FlexAttention compiled for one case (the block mask lets it skip masked key blocks)."""
    score_mod, mask_mod = flex_mods(variant)
    block_mask = create_block_mask(mask_mod, None, None, t, t, device="cpu") if mask_mod else None
    compiled = torch.compile(flex_attention, dynamic=False)
    return lambda q, k, v: compiled(q, k, v, score_mod=score_mod, block_mask=block_mask)


def mha(attend):
    """x (T, D) -> heads -> attend -> concat -> @ W_O, as attnforge's variants::multi_head_self_attention."""
    def run(x, wq, wk, wv, wo):
        t, d = x.shape

        def split(y):
            return y.view(1, t, H, d // H).transpose(1, 2)  # (1, H, T, D/H)
        o = attend(split(x @ wq), split(x @ wk), split(x @ wv))
        return o.transpose(1, 2).reshape(t, d) @ wo
    return run


def peer_fn(peer, variant, t):
    """A callable over the case's tensors, or None (n/a)."""
    if variant == "mha_proj":
        # Projections in eager mode for both (one GEMM each); compiling the whole layer with
        # flex_attention inside fails to lower on the CPU in torch 2.15 (q, k, v are strided views).
        return mha(sdpa_fn(variant, t) if peer == "sdpa" else flex_fn(variant, t))
    return sdpa_fn(variant, t) if peer == "sdpa" else flex_fn(variant, t)


def make_inputs(variant, t, dh, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    if variant == "mha_proj":
        d = cases.D_MODEL
        return [torch.randn(t, d, generator=g, dtype=dtype)] + \
               [0.04 * torch.randn(d, d, generator=g, dtype=dtype) for _ in range(4)]
    return [torch.randn(1, H, t, dh, generator=g, dtype=dtype) for _ in range(3)]


def reference(variant, *inputs):
    """float64, written from the cases' definitions (as attnforge's tests write theirs)."""
    inputs = [x.double() for x in inputs]
    if variant == "mha_proj":
        return mha(lambda q, k, v: reference("full", q, k, v))(*inputs)
    q, k, v = inputs
    t, dh = q.shape[-2], q.shape[-1]
    s = q @ k.transpose(-1, -2) / math.sqrt(dh)
    i = torch.arange(t)[:, None]
    j = torch.arange(t)[None, :]
    if variant == "alibi_causal":
        s = s - alibi_slopes(torch.float64)[:, None, None] * (i - j)
    if variant == "softcap_causal":
        s = cases.CAP * torch.tanh(s / cases.CAP)
    s = s.masked_fill(~keep_matrix(variant, t), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def check(selected, t=384, tolerance=1e-4):
    """Every peer against the float64 reference at T = 384 (past the window, a multiple of Flex's 128 block)."""
    worst = 0.0
    for _, variant, _, dh in selected:
        inputs = make_inputs(variant, t, dh)
        want = reference(variant, *inputs)
        for peer in ("sdpa", "flex"):
            fn = peer_fn(peer, variant, t)
            if fn is None:
                continue
            try:
                with torch.no_grad():
                    err = (fn(*inputs).double() - want).abs().max().item()
            except Exception as e:  # timing will note the failure; the other peers still run
                log(f"check {variant} Dh={dh} T={t} {peer}: failed: {type(e).__name__}")
                continue
            worst = max(worst, err)
            log(f"check {variant} Dh={dh} T={t} {peer}: max |error| = {err:.2e}")
            if not err <= tolerance:
                sys.exit(f"peers.py --check: {peer} on {variant} differs from the reference by {err:.2e} > {tolerance}")
        torch._dynamo.reset()
    log(f"check: every peer within {tolerance} of the float64 reference (worst {worst:.2e})")


def time_call(fn, args, min_time, grad=False):
    """Median seconds of one call; warm-up calls first (the first one compiles). Autograd records
    the calls only with `grad` (a training step's forward and backward)."""
    with torch.set_grad_enabled(grad):
        fn(*args)
        fn(*args)
        times = []
        while len(times) < 3 or (sum(times) < min_time and len(times) < 1000):
            t0 = time.perf_counter()
            fn(*args)
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


class case_peers:
    """One case's peers: built once (Flex compiles on its first call), timed as often as asked.
    A subclass changes what is built and timed through make_inputs, make_fn, flops and time_fn
    (peers_training.py: a training step)."""

    PEERS = ("sdpa", "flex")

    def __init__(self, name, variant, t, dh):
        self.name, self.variant, self.t, self.dh = name, variant, t, dh
        self.inputs = self.make_inputs()
        self.fns = {}  # peer -> callable, None (n/a) or the exception building it raised
        for peer in self.PEERS:
            try:
                self.fns[peer] = self.make_fn(peer)
            except Exception as e:  # one failing peer must not lose the others' numbers
                self.fns[peer] = e

    def make_inputs(self):
        return make_inputs(self.variant, self.t, self.dh)

    def make_fn(self, peer):
        """A callable over self.inputs, or None where the peer cannot express the case."""
        return peer_fn(peer, self.variant, self.t)

    def flops(self):
        """FLOPs of one call, or None where GFLOP/s are not reported."""
        return cases.flops(self.variant, self.t, self.dh)

    def time_fn(self, fn, min_time):
        return time_call(fn, self.inputs, min_time)

    def time(self, min_time):
        """[{name, peer, seconds, gflops, note}], one row per peer."""
        rows = []
        for peer, fn in self.fns.items():
            row = {"name": self.name, "peer": peer, "seconds": None, "gflops": None, "note": ""}
            try:
                if isinstance(fn, Exception):
                    raise fn
                if fn is None:
                    row["note"] = "n/a: SDPA has no hook on the scores (softcap)"
                else:
                    start = time.perf_counter()
                    row["seconds"] = self.time_fn(fn, min_time)
                    flops = self.flops()
                    row["gflops"] = flops / row["seconds"] / 1e9 if flops else None
                    rate = f", {row['gflops']:.1f} GFLOP/s" if row["gflops"] else ""
                    log(f"{self.name} {peer}: {row['seconds'] * 1e3:.2f} ms{rate} "
                        f"({time.perf_counter() - start:.0f} s with warm-up)")
            except Exception as e:
                row["note"] = failure_note(e)
                self.fns[peer] = e  # not retried in later rounds
                log(f"{self.name} {peer}: {row['note']}")
            rows.append(row)
        return rows

    def close(self):
        torch._dynamo.reset()  # compiled code of this case is not reused


def failure_note(e):
    """'failed: Type: the first line of its message' (at most 200 characters of it)."""
    return f"failed: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"


def check_once_per_variant(selected):
    one_per_variant = {}  # (variant, Dh) -> a case
    for c in selected:
        one_per_variant.setdefault((c[1], c[3]), c)
    check(list(one_per_variant.values()))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--T", type=int, nargs="+", default=list(cases.TS))
    ap.add_argument("--filter", default="", help="regex on case names, e.g. 'causal/T:512/'")
    ap.add_argument("--min-time", type=float, default=1.0, help="seconds of timed calls per case and peer")
    ap.add_argument("--check", action="store_true", help="first check every peer against a float64 reference")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    selected = [c for c in cases.cases(args.T) if re.search(args.filter, c[0])]
    if args.check:
        check_once_per_variant(selected)

    results = []
    for c in selected:
        peers = case_peers(*c)
        results += peers.time(args.min_time)
        peers.close()

    json.dump(report(results), sys.stdout, indent=1)
    print()


def report(results):
    return {"torch": torch.__version__, "threads": torch.get_num_threads(), "results": results}


if __name__ == "__main__":
    main()
