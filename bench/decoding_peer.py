"""PyTorch's SDPA on bench/decoding.cpp's shapes: a few queries against S = 8192 keys, H = 8, Dh = 64.
   .venv-peers/bin/python bench/decoding_peer.py     (scripts/setup_peers.sh makes .venv-peers)"""
import time
import torch

torch.set_num_threads(int(__import__("os").environ.get("HL_NUM_THREADS", "2")))
keys = 8192
k, v = torch.randn(1, 8, keys, 64), torch.randn(1, 8, keys, 64)
for nq in (1, 2, 4, 6, 48):
    q = torch.randn(1, 8, nq, 64)
    call = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v)
    call()
    best = 1e9
    for _ in range(15):
        t0 = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - t0)
    print(f"SDPA queries {nq:3d}: {best * 1e3:.3f} ms ({2 * 8 * keys * 64 * 4 / best * 1e-9:.1f} GB/s)")
