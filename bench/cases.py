"""The benchmark's cases and how their FLOPs are counted; shared by peers.py and compare_table.py
(Python stdlib only). bench/attention_bench.cpp registers the same cases under the same names.
The training benchmark's cases (TRAINING_*, training_cases) are shared the same way by
peers_training.py, compare_training.py and training_table.py; bench/training_bench.cpp registers them."""

HEADS = 8
WINDOW = 256  # sliding window: a query sees itself and the 255 keys before it
CAP = 20.0  # softcap: cap·tanh(score / cap)
D_MODEL = 512  # mha_proj: x (T, 512), W_Q, W_K, W_V, W_O (512 × 512), 8 heads of 64
TS = (512, 1024, 2048, 4096)
QUICK_TS = (512,)

# (variant, head widths it runs with)
VARIANTS = (("full", (64, 128)), ("causal", (64, 128)), ("sliding_window_256", (64,)),
            ("alibi_causal", (64,)), ("softcap_causal", (64,)), ("mha_proj", (64,)))

# Timed beside a variant (attnforge only): the same fused kernel without the softmax. ReLU attention
# (weights relu(s)/T) has full attention's tiles and products and none of its maxima, exp, sums or
# rescaling: full attention's speed were its softmax free.
NO_SOFTMAX = {"full": "relu"}

FLOP_COUNTING = ("GFLOP/s count 4·Dh·H FLOPs per (query, key) pair the mask keeps: T² for full, "
                 "T(T+1)/2 for causal (and ALiBi, softcap), Σᵢ min(i+1, 256) ≈ 256·T for the sliding window; "
                 "MHA with projections adds 4 products of 2·T·D² (D = 512). Softmax and score modifiers are not counted.")


def name(variant, t, dh):
    return f"{variant}/T:{t}/Dh:{dh}"


def no_softmax_name(variant, t, dh):
    """The case of the variant's kernel without its softmax (NO_SOFTMAX), or None."""
    return name(NO_SOFTMAX[variant], t, dh) if variant in NO_SOFTMAX else None


def cases(ts=TS):
    """[(name, variant, T, Dh)] in table order."""
    return [(name(v, t, dh), v, t, dh) for v, dhs in VARIANTS for dh in dhs for t in ts]


# The training step (forward and backward): (variant, head widths, longest T it runs at). The
# variants written out eagerly in PyTorch materialise T × T scores, as attnforge's generic backward
# does; they stop at T = 2048. t5_bias: score + table[T5 bucket of kv_idx - q_idx, head], the
# table (T5_BUCKETS × HEADS) a weight that gets a gradient; bidirectional buckets, no mask.
TRAINING_VARIANTS = (("full", (64, 128), 4096), ("causal", (64, 128), 4096), ("alibi_causal", (64,), 2048),
                     ("softcap_causal", (64,), 2048), ("sliding_window_256", (64,), 2048), ("t5_bias", (64,), 2048))
TRAINING_TS = (1024, 2048, 4096)
TRAINING_QUICK_TS = (256,)
T5_BUCKETS = 32  # 16 per direction: 8 exact distances, then logarithmic buckets up to T5_MAX_DISTANCE
T5_MAX_DISTANCE = 128


def training_cases(ts=TRAINING_TS):
    """[(name, variant, T, Dh)] of the training benchmark in table order: each variant at the
    lengths of `ts` up to its longest."""
    return [(name(v, t, dh), v, t, dh) for v, dhs, longest in TRAINING_VARIANTS for dh in dhs for t in ts
            if t <= longest]


def kept_pairs(variant, t):
    if variant in ("full", "relu", "mha_proj"):
        return t * t
    if variant == "sliding_window_256":
        w = min(WINDOW, t)
        return w * t - w * (w - 1) // 2
    return t * (t + 1) // 2


def flops(variant, t, dh):
    f = 4 * dh * HEADS * kept_pairs(variant, t)
    if variant == "mha_proj":
        f += 4 * 2 * t * D_MODEL * D_MODEL
    return f
