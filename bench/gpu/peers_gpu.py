"""The GPU peers of bench/gpu/gpu_bench, on the same shapes in the same run: PyTorch's
scaled_dot_product_attention (the backend it picks for fp32; full and causal) and FlexAttention
(torch.compile'd, masks through a block mask, ALiBi and softcap as score_mod; every case). fp32
with TF32 off, so every product is plain fp32 like attnforge's.
Each timing is the median of the calls made in about 2 s (at least 3), timed with CUDA events.
Prints CSV rows as gpu_bench does: impl,schedule,mask,T,Dh,ms,gflops,peak_fraction,max_error
(max_error: against the same attention in float64 on the first and last head). With --backward
each peer's backward too (impl sdpa-backward, flex-backward: autograd's d_q, d_k, d_v from a
random d_out, the forward's graph kept; FLOPs 2.5 times the forward's, as gpu_bench counts them;
max_error: on the first head, relative to each gradient's largest magnitude, against float64
autograd).

usage: python3 peers_gpu.py [--peak-tflops P] [--masks full,causal,...] [--backward] T...
Benchmark-only: needs torch with CUDA (the GPU machine has it); the build and the tests never do.
"""
import argparse
import statistics
import sys
import time

import torch
import torch.nn.functional as F

B, H = 4, 16


def timed(fn, seconds=2.0):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times, begin = [], time.perf_counter()
    while len(times) < 3 or time.perf_counter() - begin < seconds:
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
        if len(times) >= 50:
            break
    return statistics.median(times)


def alibi_slopes():
    """ALiBi's slopes for H heads (a power of two): 2^(-8(h+1)/H), as attnforge's alibi()."""
    return torch.tensor([2.0 ** (-8.0 * (h + 1) / H) for h in range(H)], device="cuda")


SLOPES = None


def alibi(score, b, h, qi, kv):
    return score - SLOPES[h] * (qi - kv)


def softcap(score, b, h, qi, kv):
    return 20.0 * torch.tanh(score / 20.0)


def causal_keep(b, h, qi, kv):
    return qi >= kv


def window_keep(b, h, qi, kv):
    return (qi >= kv) & (qi - kv < 256)


# mask: (the keys kept, as FlexAttention's mask_mod; the score modifier), as bench/gpu/kernels.cpp defines them
MASKS = {"full": (None, None), "causal": (causal_keep, None), "alibi": (causal_keep, alibi),
         "softcap": (causal_keep, softcap), "window": (window_keep, None)}


def kept_pairs(mask, t):
    if mask == "window":
        return sum(min(i + 1, 256) for i in range(t))
    return 0.5 * t * t if MASKS[mask][0] else float(t) * t


def reference(qd, kd, vd, mask, b, h):
    """One head's attention in the precision of its inputs, as bench/gpu/kernels.cpp defines it."""
    keep, score_mod = MASKS[mask]
    t = qd.shape[0]
    s = qd @ kd.T / qd.shape[1] ** 0.5
    qi = torch.arange(t, device="cuda").view(-1, 1)
    kv = torch.arange(t, device="cuda").view(1, -1)
    if score_mod is not None:
        s = score_mod(s, b, h, qi, kv)
    if keep is not None:
        s = s.masked_fill(~keep(b, h, qi, kv), float("-inf"))
    return torch.softmax(s, dim=-1) @ vd


def error(out, q, k, v, mask):
    """The largest error on the first and last head against the same attention in float64."""
    worst = 0.0
    for b, h in ((0, 0), (B - 1, H - 1)):
        ref = reference(q[b, h].double(), k[b, h].double(), v[b, h].double(), mask, b, h)
        worst = max(worst, (out[b, h].double() - ref).abs().max().item())
    return worst


def backward_error(grads, q, k, v, d_out, mask):
    """The gradients' largest error on the first head, each relative to its largest magnitude,
    against float64 autograd."""
    qd, kd, vd = (x[0, 0].detach().double().requires_grad_() for x in (q, k, v))
    want = torch.autograd.grad(reference(qd, kd, vd, mask, 0, 0), (qd, kd, vd), d_out[0, 0].double())
    return max(((g[0, 0].double() - w).abs().max() / w.abs().max()).item() for g, w in zip(grads, want))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--peak-tflops", type=float, default=0)
    parser.add_argument("--masks", default="full,causal,alibi,softcap,window",
                        help="comma-separated: full, causal (SDPA and Flex); alibi, softcap, window (Flex)")
    parser.add_argument("--backward", action="store_true", help="time each peer's backward too")
    parser.add_argument("T", type=int, nargs="*", default=[1024, 4096, 8192])
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    # Each shape and mask is a compilation of its own: past dynamo's recompile limit (8 by default)
    # flex_attention would fall back to its unfused implementation and time that instead.
    torch._dynamo.config.recompile_limit = 1024
    torch._dynamo.config.cache_size_limit = 1024
    flex = torch.compile(flex_attention, dynamic=False)
    global SLOPES
    SLOPES = alibi_slopes()
    print("impl,schedule,mask,T,Dh,ms,gflops,peak_fraction,max_error", flush=True)
    for t in args.T:
        for mask in args.masks.split(","):
            for dh in (64, 128):
                g = torch.Generator(device="cuda").manual_seed(t + dh)
                q, k, v = (torch.rand(B, H, t, dh, device="cuda", generator=g) * 2 - 1 for _ in range(3))
                keep, score_mod = MASKS[mask]
                flops = 4.0 * B * H * kept_pairs(mask, t) * dh
                block = create_block_mask(keep, None, None, t, t, device="cuda") if keep else None
                impls = {"flex": lambda q, k, v: flex(q, k, v, score_mod=score_mod, block_mask=block)}
                if mask in ("full", "causal"):
                    impls = {"sdpa": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=mask == "causal"),
                             **impls}

                def row(name, ms, passes, err):
                    gflops = passes * flops / (ms * 1e6)
                    peak = gflops / (args.peak_tflops * 1e3) if args.peak_tflops else 0.0
                    print(f"{name},torch {torch.__version__},{mask},{t},{dh},{ms:.3f},{gflops:.1f},{peak:.4f},{err:.2g}", flush=True)

                for name, fn in impls.items():
                    try:
                        row(name, timed(lambda: fn(q, k, v)), 1.0, error(fn(q, k, v), q, k, v, mask))
                        if args.backward:
                            qg, kg, vg = (x.detach().requires_grad_() for x in (q, k, v))
                            out = fn(qg, kg, vg)
                            d_out = torch.rand(out.shape, device="cuda", generator=g) * 2 - 1
                            grads = lambda: torch.autograd.grad(out, (qg, kg, vg), d_out, retain_graph=True)
                            row(f"{name}-backward", timed(grads), 2.5, backward_error(grads(), q, k, v, d_out, mask))
                            del qg, kg, vg, out, d_out
                    except Exception as e:  # a peer that cannot run a case is reported, not fatal
                        print(f"{name} {mask} T={t} Dh={dh}: {type(e).__name__}: {str(e)[:200]}", file=sys.stderr)
                        continue
                del q, k, v
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
