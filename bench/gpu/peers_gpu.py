"""The GPU peers of bench/gpu/gpu_bench, on the same shapes in the same run: PyTorch's
scaled_dot_product_attention (the backend it picks for fp32) and FlexAttention (torch.compile'd,
causal through a block mask). fp32 with TF32 off, so every product is plain fp32 like attnforge's.
Each timing is the median of the calls made in about 2 s (at least 3), timed with CUDA events.
Prints CSV rows as gpu_bench does: impl,schedule,mask,T,Dh,ms,gflops,peak_fraction,max_error
(max_error: against float64 SDPA math on the first and last head).

usage: python3 peers_gpu.py [--peak-tflops P] T...
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


def error(out, q, k, v, causal):
    worst = 0.0
    for b, h in ((0, 0), (B - 1, H - 1)):
        ref = F.scaled_dot_product_attention(q[b, h].double(), k[b, h].double(), v[b, h].double(), is_causal=causal)
        worst = max(worst, (out[b, h].double() - ref).abs().max().item())
    return worst


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--peak-tflops", type=float, default=0)
    parser.add_argument("T", type=int, nargs="*", default=[1024, 4096, 8192])
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    flex = torch.compile(flex_attention, dynamic=False)
    print("impl,schedule,mask,T,Dh,ms,gflops,peak_fraction,max_error", flush=True)
    for t in args.T:
        for mask in ("full", "causal"):
            for dh in (64, 128):
                g = torch.Generator(device="cuda").manual_seed(t + dh)
                q, k, v = (torch.rand(B, H, t, dh, device="cuda", generator=g) * 2 - 1 for _ in range(3))
                causal = mask == "causal"
                flops = 4.0 * B * H * t * t * dh * (0.5 if causal else 1.0)
                block = None
                if causal:
                    block = create_block_mask(lambda b, h, qi, kv: qi >= kv, None, None, t, t, device="cuda")
                impls = {
                    "sdpa": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                    "flex": lambda: flex(q, k, v, block_mask=block),
                }
                for name, fn in impls.items():
                    try:
                        ms = timed(fn)
                        err = error(fn(), q, k, v, causal)
                    except Exception as e:  # a peer that cannot run a case is reported, not fatal
                        print(f"{name} {mask} T={t} Dh={dh}: {type(e).__name__}: {str(e)[:200]}", file=sys.stderr)
                        continue
                    gflops = flops / (ms * 1e6)
                    peak = gflops / (args.peak_tflops * 1e3) if args.peak_tflops else 0.0
                    print(f"{name},torch {torch.__version__},{mask},{t},{dh},{ms:.3f},{gflops:.1f},{peak:.4f},{err:.2g}", flush=True)
                del q, k, v
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
