#!/usr/bin/env python3
"""Measure on one GPU what autoplan's compute model prices (needs PyTorch and a CUDA GPU).

Seven parts, each written to CSV files under $OUT (default: the current directory); what they
hold and what the model takes from them: results/h100/README.md.

- `gemm`: isolated GEMMs `m×k · k×n` (m = tokens, n = output features, k = input features,
  autoplan's convention), BF16 and FP8 (e4m3 operands through `torch._scaled_mm`, per-tensor
  scales, BF16 output), at the per-GPU shapes of published runs autoplan validates against,
  squares, skinny and odd shapes. CUDA-graph-timed (the GPU's time) and eager, over rotating
  input sets (so that repeats do not run out of L2). → gemm.csv
- `ratio`: FP8 and BF16 rates on five large shapes, alternated over rounds. → ratio.csv
- `grouped`: one EP rank's local experts, one GEMM per expert and one grouped kernel.
  → grouped.csv
- `attention`: causal FlashAttention (SDPA) forward and backward at training shapes.
  → attention.csv
- `fp8cast`: expert GEMMs in BF16 against FP8 with TE-style current scaling (amax + cast).
  → fp8cast.csv
- `block`: one Qwen3-30B-A3B block at the per-GPU shapes of published_runs.csv's
  `bridge2511_h100_Qwen3_30B_a3B_16gpu_fp8` (tp 1, ep 8, micro-batch 2 × 4096 tokens):
  attention (RMSNorm, QKV, q/k-norm, RoPE, causal FlashAttention through SDPA with 4 KV heads,
  output projection) and the MoE layer as one EP rank runs it with forced-balanced routing
  (router, top-8, permute, the 16 local experts' SwiGLU GEMMs on 8 · 8192 · 8 / 128 = 4096
  tokens each, unpermute; the all-to-alls are not run: one GPU). Forward + backward in BF16:
  event- and graph-timed, the profiler's kernel count and busy time, the host's issue time;
  the experts' forward alone in BF16 and in emulated FP8 current scaling. → block.csv,
  block_kernels.csv

- `moe`: a MoE layer's router, token permutation and un-permutation, and the whole layer
  without its all-to-alls, at four published rows' per-GPU shapes, in plain PyTorch. → moe.csv
- `hbm`: a copy, an add and a SwiGLU activation over sizes, bytes moved per second. → hbm.csv
- `fp8block`: FP8 GEMMs with 1x128/128x128 block scales (DeepSeek-V3's recipe) against
  per-tensor FP8 and BF16, trying scale layouts until cuBLAS takes one. → fp8block.csv
- `attncp`: one context-parallel rank's attention calls per ring step kind (causal on its two
  chunks, two query chunks against one key chunk, one against two). → attention_cp.csv
- `attnseq`, `grouped_dsv3`, `moeops`: see results/h100/README.md.

Usage: `OUT=results/h100 python3 tools/gpu/probe.py [PART]...` (parts run in the order named;
`gemm ratio grouped attention fp8cast block` when none is named). `cargo test -p autoplan-cost --test h100_probe -- --nocapture`
reads the files against the model.
"""
import csv
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

OUT = os.environ.get("OUT", ".")
DEV = "cuda"
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True


def median_time(fn, iters, warm=5):
    """Median seconds of `fn()` over `iters` CUDA-event timed calls after `warm` warm-ups."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for s, e in ev:
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in ev) * 1e-3


# (label, m, n, k): m tokens, n outputs, k inputs (autoplan's GemmPricer::time(2mnk, m, n, k)).
SHAPES = [
    ("square-8192", 8192, 8192, 8192),
    ("square-4096", 4096, 4096, 4096),
    ("square-2048", 2048, 2048, 2048),
    ("square-1024", 1024, 1024, 1024),
    ("square-512", 512, 512, 512),
    ("skinny-128x4096x4096", 128, 4096, 4096),
    ("skinny-512x4096x4096", 512, 4096, 4096),
    # Qwen3-30B-A3B, tp 1, micro-batch 2 × 4096 (bridge2511 row); experts: 4096 tokens each.
    ("qwen3-30b qkv", 8192, 5120, 2048),
    ("qwen3-30b out", 8192, 2048, 4096),
    ("qwen3-30b router", 8192, 128, 2048),
    ("qwen3-30b expert fc1", 4096, 1536, 2048),
    ("qwen3-30b expert fc2", 4096, 2048, 768),
    ("qwen3-30b lm-head", 8192, 151936, 2048),
    # Llama3-8B, tp 1, 1 × 8192 (bridge2511 row).
    ("llama3-8b qkv", 8192, 6144, 4096),
    ("llama3-8b out", 8192, 4096, 4096),
    ("llama3-8b fc1", 8192, 28672, 4096),
    ("llama3-8b fc2", 8192, 4096, 14336),
    # Llama3-70B, tp 4, 1 × 8192 (bridge2511 row).
    ("llama3-70b tp4 qkv", 8192, 2560, 8192),
    ("llama3-70b tp4 out", 8192, 8192, 2048),
    ("llama3-70b tp4 fc1", 8192, 14336, 8192),
    ("llama3-70b tp4 fc2", 8192, 8192, 7168),
    # GPT-3 175B, tp 8, 1 × 2048 (Megatron 2021 rows).
    ("gpt3-175b tp8 qkv", 2048, 4608, 12288),
    ("gpt3-175b tp8 out", 2048, 12288, 1536),
    ("gpt3-175b tp8 fc1", 2048, 6144, 12288),
    ("gpt3-175b tp8 fc2", 2048, 12288, 6144),
    # DeepSeek-V3 routed expert (hidden 7168, expert 2048), 1024 and 4096 tokens.
    ("deepseek-v3 expert fc1 1k", 1024, 4096, 7168),
    ("deepseek-v3 expert fc2 1k", 1024, 7168, 2048),
    ("deepseek-v3 expert fc1 4k", 4096, 4096, 7168),
    ("deepseek-v3 expert fc2 4k", 4096, 7168, 2048),
    # Wave quantisation on 132 SMs with 128×256 tiles: 132 tiles (one full wave) and 144.
    ("waves-132 tiles", 128 * 12, 256 * 11, 4096),
    ("waves-144 tiles", 128 * 12, 256 * 12, 4096),
    # Sharded and odd shapes (tp 8 of a 5120-wide layer, few tokens, sizes off the tiles).
    ("odd 4096x640x5120", 4096, 640, 5120),
    ("odd 768x4096x4096", 768, 4096, 4096),
    ("odd 256x7168x2048", 256, 7168, 2048),
    ("odd 3008x3008x3008", 3008, 3008, 3008),
    ("odd 1024x1408x2048", 1024, 1408, 2048),
    ("odd 16384x512x4096", 16384, 512, 4096),
]

# Large shapes on which the FP8 : BF16 rate is taken (alternating, several rounds).
RATIO_SHAPES = [
    ("square-8192", 8192, 8192, 8192),
    ("llama3-8b fc1", 8192, 28672, 4096),
    ("llama3-70b tp4 fc1", 8192, 14336, 8192),
    ("gpt3-175b tp8 fc1", 2048, 6144, 12288),
    ("deepseek-v3 expert fc1 4k", 4096, 4096, 7168),
]


def ratio_part(rounds=5):
    """FP8 and BF16 rates on large GEMMs, alternating dtype each round so that clock and
    temperature drift hits both alike; `ratio.csv` has every timing."""
    rows = []
    for label, m, n, k in RATIO_SHAPES:
        flops = 2.0 * m * n * k
        a = [torch.randn(m, k, device=DEV, dtype=torch.bfloat16) for _ in range(2)]
        w = [torch.randn(n, k, device=DEV, dtype=torch.bfloat16) for _ in range(2)]
        a8 = [x.to(torch.float8_e4m3fn) for x in a]
        w8 = [x.to(torch.float8_e4m3fn) for x in w]
        one = torch.tensor(1.0, device=DEV)
        i = [0]

        def bf16():
            j = i[0] % 2
            i[0] += 1
            return a[j] @ w[j].t()

        def fp8():
            j = i[0] % 2
            i[0] += 1
            return torch._scaled_mm(a8[j], w8[j].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

        reps = max(2, min(20, int(2e13 / flops)))
        for r in range(rounds):
            for dt, f in (("bf16", bf16), ("fp8", fp8)):
                t = graph_time(f, reps)
                rows.append((label, m, n, k, dt, r, t, flops / t / 1e12))
        b = statistics.median(x[7] for x in rows if x[0] == label and x[4] == "bf16")
        e = statistics.median(x[7] for x in rows if x[0] == label and x[4] == "fp8")
        print(f"{label:26s} bf16 {b:7.1f} TF/s ({b/989:.3f} of 989)  fp8 {e:7.1f} TF/s ({e/1979:.3f} of 1979)"
              f"  fp8/(2 bf16) {e/(2*b):.3f}", flush=True)
        del a, w, a8, w8
        torch.cuda.empty_cache()
    with open(os.path.join(OUT, "ratio.csv"), "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["label", "m", "n", "k", "dtype", "round", "time_s", "tflops"])
        for r in rows:
            wr.writerow([*r[:6], f"{r[6]:.9g}", f"{r[7]:.4g}"])


def graph_time(fn, reps, replays=15):
    """Median seconds of one `fn()` when `reps` calls are captured in one CUDA graph and the
    graph is replayed: the GPU's time, without the host's launch gaps (cf. `median_time`)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps):
            fn()
    t = median_time(g.replay, replays, warm=3)
    del g
    return t / reps


def gemm_part():
    rows = []
    sets = 3
    for label, m, n, k in SHAPES:
        flops = 2.0 * m * n * k
        iters = max(10, min(200, int(2e13 / flops)))
        # BF16: C[m,n] = A[m,k] · W[n,k]ᵀ (a Linear's layout).
        a = [torch.randn(m, k, device=DEV, dtype=torch.bfloat16) for _ in range(sets)]
        w = [torch.randn(n, k, device=DEV, dtype=torch.bfloat16) for _ in range(sets)]
        i = [0]

        def bf16():
            j = i[0] % sets
            i[0] += 1
            return a[j] @ w[j].t()

        reps = max(1, min(30, int(3e13 / flops)))
        t = graph_time(bf16, reps)
        te = median_time(bf16, iters)
        rows.append((label, m, n, k, "bf16", t, flops / t / 1e12, te))
        # FP8 e4m3, per-tensor scales: `_scaled_mm` wants A row-major, B column-major.
        try:
            a8 = [x.to(torch.float8_e4m3fn) for x in a]
            w8 = [x.to(torch.float8_e4m3fn) for x in w]
            one = torch.tensor(1.0, device=DEV)

            def fp8():
                j = i[0] % sets
                i[0] += 1
                return torch._scaled_mm(a8[j], w8[j].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

            t8 = graph_time(fp8, reps)
            te8 = median_time(fp8, iters)
            rows.append((label, m, n, k, "fp8", t8, flops / t8 / 1e12, te8))
        except Exception as e:  # a shape _scaled_mm refuses (dims must be multiples of 16)
            print(f"fp8 {label}: {e}", file=sys.stderr)
        del a, w
        torch.cuda.empty_cache()
        r = rows[-1]
        print(f"{label:26s} {m:6d} {n:6d} {k:6d}  bf16 {t*1e6:8.1f} us {flops/t/1e12:6.1f} TF/s (eager {te*1e6:7.1f})"
              + (f"  fp8 {r[5]*1e6:8.1f} us {r[6]:6.1f} TF/s (eager {r[7]*1e6:7.1f})" if r[4] == "fp8" else ""), flush=True)
    with open(os.path.join(OUT, "gemm.csv"), "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["label", "m", "n", "k", "dtype", "time_s", "tflops", "eager_time_s"])
        for r in rows:
            wr.writerow([r[0], r[1], r[2], r[3], r[4], f"{r[5]:.9g}", f"{r[6]:.4g}", f"{r[7]:.9g}"])


# (label, experts, rows per expert, n, k): the local experts of one EP rank.
GROUPED = [
    ("qwen3-235b fc1 tp4/ep8", 16, 512, 3072, 4096),
    ("qwen3-235b fc2 tp4/ep8", 16, 512, 4096, 1536),
    ("qwen3-235b fc1 ep32", 4, 2048, 3072, 4096),
    ("qwen3-30b fc1 ep8", 16, 4096, 1536, 2048),
    ("qwen3-30b fc2 ep8", 16, 4096, 2048, 768),
    ("mixtral fc1 ep8", 1, 8192, 28672, 4096),
    ("deepseek-v3 fc1", 8, 1024, 4096, 7168),
]


def grouped_part(shapes=None, fname="grouped.csv"):
    """The local experts' GEMMs three ways: one cuBLAS GEMM per expert (graph-timed: the GPU's
    time; eager: with the host's launches), and one grouped kernel (`torch._grouped_mm`)."""
    rows = []
    for label, E, m, n, k in shapes or GROUPED:
        x = torch.randn(E * m, k, device=DEV, dtype=torch.bfloat16)
        w = torch.randn(E, n, k, device=DEV, dtype=torch.bfloat16)
        xs = x.split(m, dim=0)
        flops = 2.0 * E * m * n * k

        def loop():
            return [xs[e] @ w[e].t() for e in range(E)]

        t_loop = graph_time(loop, 1)
        t_eager = median_time(loop, 20)
        t_grp = float("nan")
        try:
            offs = torch.arange(m, E * m + 1, m, device=DEV, dtype=torch.int32)
            wt = w.transpose(-2, -1)

            def grp():
                return torch._grouped_mm(x, wt, offs=offs, out_dtype=torch.bfloat16)

            ref = torch.cat(loop())
            out = grp()
            err = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
            if not err < 1e-2:
                raise RuntimeError(f"grouped_mm differs from the loop: {err:.3g}")
            t_grp = graph_time(grp, 1)
        except Exception as e:
            print(f"grouped {label}: {e}", file=sys.stderr)
        rows.append((label, E, m, n, k, t_loop, t_eager, t_grp))
        print(f"{label:24s} E={E:3d} m={m:5d} n={n:6d} k={k:5d}  loop {t_loop*1e6:8.1f} us"
              f" ({flops/t_loop/1e12:6.1f} TF/s)  eager {t_eager*1e6:8.1f} us  grouped {t_grp*1e6:8.1f} us"
              f" ({flops/t_grp/1e12:6.1f} TF/s)", flush=True)
        del x, w, xs
        torch.cuda.empty_cache()
    with open(os.path.join(OUT, fname), "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["label", "experts", "rows", "n", "k", "loop_graph_s", "loop_eager_s", "grouped_graph_s"])
        for r in rows:
            wr.writerow([*r[:5], f"{r[5]:.9g}", f"{r[6]:.9g}", f"{r[7]:.9g}"])


# (label, experts, rows per expert, n, k) for the FP8 current-scaling comparison.
FP8CAST = [
    ("qwen3-30b fc1 ep8", 16, 4096, 1536, 2048),
    ("qwen3-30b fc2 ep8", 16, 4096, 2048, 768),
    ("qwen3-235b fc1 tp4/ep8", 16, 512, 3072, 4096),
    ("deepseek-v3 fc1", 8, 1024, 4096, 7168),
    ("llama3-8b fc1", 1, 8192, 28672, 4096),
]


def fp8cast_part():
    """A Linear's forward GEMMs in BF16 against FP8 with per-tensor current scaling as
    Transformer Engine runs it: an amax reduction and a scaled cast of the input (and of the
    weight unless its FP8 copy is cached), then the FP8 GEMM. The quantisation is compiled
    (`torch.compile`: one reduction and one cast kernel per tensor, as TE's). Graph-timed."""
    fmax = torch.finfo(torch.float8_e4m3fn).max
    # Each expert's view has its own storage offset: let Dynamo compile per view.
    torch._dynamo.config.recompile_limit = 1 << 20
    torch._dynamo.config.accumulated_recompile_limit = 1 << 20

    @torch.compile(fullgraph=True, dynamic=False)
    def quant(x):
        scale = (x.abs().amax().float() / fmax).clamp(min=1e-12)
        return (x.float() / scale).to(torch.float8_e4m3fn), scale

    rows = []
    for label, E, m, n, k in FP8CAST:
        x = torch.randn(E * m, k, device=DEV, dtype=torch.bfloat16)
        w = torch.randn(E, n, k, device=DEV, dtype=torch.bfloat16)
        xs = x.split(m, dim=0)
        wq = [quant(w[e]) for e in range(E)]

        def bf16():
            return [xs[e] @ w[e].t() for e in range(E)]

        def fp8_cached():
            out = []
            for e in range(E):
                x8, sx = quant(xs[e])
                out.append(torch._scaled_mm(x8, wq[e][0].t(), scale_a=sx, scale_b=wq[e][1], out_dtype=torch.bfloat16))
            return out

        def fp8_full():
            out = []
            for e in range(E):
                x8, sx = quant(xs[e])
                w8, sw = quant(w[e])
                out.append(torch._scaled_mm(x8, w8.t(), scale_a=sx, scale_b=sw, out_dtype=torch.bfloat16))
            return out

        def gemm_only():
            return [
                torch._scaled_mm(quant_x[e][0], wq[e][0].t(), scale_a=quant_x[e][1], scale_b=wq[e][1], out_dtype=torch.bfloat16)
                for e in range(E)
            ]

        quant_x = [quant(xs[e]) for e in range(E)]
        res = {}
        for name, f in (("bf16", bf16), ("fp8_gemm_only", gemm_only), ("fp8_cached_weight", fp8_cached), ("fp8_full", fp8_full)):
            try:
                res[name] = graph_time(f, 1)
            except Exception as e:
                print(f"fp8cast {label} {name}: {e}", file=sys.stderr)
                res[name] = float("nan")
        rows.append((label, E, m, n, k, res["bf16"], res["fp8_gemm_only"], res["fp8_cached_weight"], res["fp8_full"]))
        print(f"{label:24s} bf16 {res['bf16']*1e6:8.1f} us  fp8 GEMMs only {res['fp8_gemm_only']*1e6:8.1f}"
              f"  + input casts {res['fp8_cached_weight']*1e6:8.1f}  + weight casts {res['fp8_full']*1e6:8.1f}", flush=True)
        del x, w, xs, wq, quant_x
        torch.cuda.empty_cache()
    with open(os.path.join(OUT, "fp8cast.csv"), "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["label", "experts", "rows", "n", "k", "bf16_s", "fp8_gemm_s", "fp8_input_cast_s", "fp8_all_casts_s"])
        for r in rows:
            wr.writerow([*r[:5], *(f"{t:.9g}" for t in r[5:])])


# (label, batch, seq, query heads, kv heads, head dim): causal self-attention cores.
ATTENTION = [
    ("llama3-8b 8k", 1, 8192, 32, 8, 128),
    ("qwen3-30b mb2 4k", 2, 4096, 32, 4, 128),
    ("gpt3-175b tp8 2k", 1, 2048, 12, 12, 128),
    ("llama3-70b tp4 8k", 1, 8192, 16, 2, 128),
    ("long 32k", 1, 32768, 8, 1, 128),
    ("mha 4k d64", 4, 4096, 32, 32, 64),
]


def attention_part():
    """FlashAttention (PyTorch SDPA; cuDNN's or FlashAttention's kernel, whichever it picks)
    forward and forward + backward, causal, BF16, graph-timed. FLOPs of the forward: 4·b·h·d·s²/2
    (QKᵀ and PV over the causal half)."""
    rows = []
    for label, b, s, h, kv, d in ATTENTION:
        flops = 4.0 * b * h * d * s * s / 2
        t_f, t_b = sdpa_times(b, h, kv, s, s, d, d, True, gqa=kv != h)
        rows.append((label, b, s, h, kv, d, t_f, t_b))
        print(f"{label:20s} b={b} s={s:6d} h={h:3d} kv={kv:3d} d={d:3d}  fwd {t_f*1e3:7.3f} ms"
              f" ({flops/t_f/1e12:6.1f} TF/s)  bwd {t_b*1e3:7.3f} ms (x{t_b/t_f:4.2f} fwd)", flush=True)
    with open(os.path.join(OUT, "attention.csv"), "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["label", "batch", "seq", "heads", "kv_heads", "head_dim", "fwd_s", "bwd_s"])
        for r in rows:
            wr.writerow([*r[:6], f"{r[6]:.9g}", f"{r[7]:.9g}"])


def rmsnorm(x, w, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def rope(x, cos, sin):
    # x [b, heads, s, d]; rotate halves (Llama/Qwen convention).
    d = x.shape[-1] // 2
    x1, x2 = x[..., :d], x[..., d:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


class Qwen3Block:
    """One Qwen3-30B-A3B block on one EP rank of the bridge2511 plan (module docstring)."""

    def __init__(self, b=2, s=4096, h=2048, heads=32, kv=4, d=128, experts=128, top_k=8, ffn=768, ep=8):
        dt = torch.bfloat16
        self.b, self.s, self.h, self.heads, self.kv, self.d = b, s, h, heads, kv, d
        self.E, self.k, self.ffn, self.ep = experts, top_k, ffn, ep
        p = lambda *shape: (torch.randn(*shape, device=DEV, dtype=dt) * 0.02).requires_grad_()
        self.n1 = torch.ones(h, device=DEV, dtype=dt, requires_grad=True)
        self.n2 = torch.ones(h, device=DEV, dtype=dt, requires_grad=True)
        self.qn = torch.ones(d, device=DEV, dtype=dt, requires_grad=True)
        self.kn = torch.ones(d, device=DEV, dtype=dt, requires_grad=True)
        self.wqkv = p((heads + 2 * kv) * d, h)
        self.wo = p(h, heads * d)
        self.wr = p(experts, h)
        local = experts // ep
        self.local = local
        self.w1 = [p(2 * ffn, h) for _ in range(local)]
        self.w2 = [p(h, ffn) for _ in range(local)]
        pos = torch.arange(s, device=DEV, dtype=torch.float32)
        inv = 1.0 / (1e6 ** (torch.arange(0, d // 2, device=DEV, dtype=torch.float32) / (d // 2)))
        ang = torch.outer(pos, inv)
        self.cos, self.sin = ang.cos().to(dt), ang.sin().to(dt)
        t = b * s
        # Forced-balanced routing: token i's j-th choice is expert (i·k + j) mod E, so every
        # expert gets t·k/E tokens of this rank; after the (unrun) all-to-all, each of the
        # `local` experts holds ep · t·k/E tokens.
        choice = (torch.arange(t * top_k, device=DEV) % experts).view(t, top_k)
        self.order = torch.argsort(choice.flatten(), stable=True)  # (token, choice) of each row
        self.src = self.order // top_k  # token of each permuted row
        self.rows_local = ep * t * top_k // experts  # 4096 rows per local expert

    def attention(self, x):
        b, s, h, H, kv, d = self.b, self.s, self.h, self.heads, self.kv, self.d
        y = rmsnorm(x, self.n1)
        qkv = y @ self.wqkv.t()
        q, k, v = qkv.split([H * d, kv * d, kv * d], dim=-1)
        q = rmsnorm(q.view(b, s, H, d), self.qn).transpose(1, 2)
        k = rmsnorm(k.view(b, s, kv, d), self.kn).transpose(1, 2)
        v = v.view(b, s, kv, d).transpose(1, 2)
        q, k = rope(q, self.cos, self.sin), rope(k, self.cos, self.sin)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        o = o.transpose(1, 2).reshape(b * s, H * d)
        return x + (o @ self.wo.t()).view(b, s, h)

    def moe(self, x):
        b, s, h = self.b, self.s, self.h
        t = b * s
        y = rmsnorm(x, self.n2).view(t, h)
        logits = (y @ self.wr.t()).float()
        probs = torch.softmax(logits, dim=-1)
        topv, _topi = torch.topk(probs, self.k, dim=-1)  # computed, then routing is forced
        gate = (topv / topv.sum(-1, keepdim=True)).to(y.dtype).flatten()
        # Local permute, then what the all-to-all would deliver: ep ranks' worth of rows for
        # the local experts (here this rank's rows stand in for the other ranks').
        local_in = y.index_select(0, self.src)  # [t·k, h] = the local experts' ep·t·k/E rows each
        outs = []
        for e, chunk in enumerate(local_in.split(self.rows_local, dim=0)):
            a = chunk @ self.w1[e].t()
            g, u = a.chunk(2, dim=-1)
            outs.append((F.silu(g) * u) @ self.w2[e].t())
        z = torch.cat(outs, dim=0) * gate[self.order].unsqueeze(-1)
        out = torch.zeros(t, h, device=DEV, dtype=z.dtype).index_add_(0, self.src, z)
        return x + out.view(b, s, h)

    def block(self, x):
        return self.moe(self.attention(x))


def fp8_linear(x, w):
    """`x · wᵀ` as Transformer Engine's FP8 current scaling runs it: per-tensor amax of each
    operand, cast to e4m3 with that scale, FP8 GEMM, BF16 out (forward only)."""
    fmax = torch.finfo(torch.float8_e4m3fn).max
    sx = (x.abs().amax().float() / fmax).clamp(min=1e-12)
    sw = (w.abs().amax().float() / fmax).clamp(min=1e-12)
    x8 = (x / sx).to(torch.float8_e4m3fn)
    w8 = (w / sw).to(torch.float8_e4m3fn)
    return torch._scaled_mm(x8, w8.t(), scale_a=sx, scale_b=sw, out_dtype=torch.bfloat16)


def block_part():
    blk = Qwen3Block()
    x = torch.randn(blk.b, blk.s, blk.h, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    gy = torch.randn_like(x)
    params = [blk.n1, blk.n2, blk.qn, blk.kn, blk.wqkv, blk.wo, blk.wr, *blk.w1, *blk.w2]
    res = []
    kern = []

    def experts(fp8):
        # The 16 local experts' forward alone, on the rows the all-to-all would deliver.
        y = torch.randn(blk.local * blk.rows_local, blk.h, device=DEV, dtype=torch.bfloat16)
        lin = fp8_linear if fp8 else (lambda a, w: a @ w.t())

        def f():
            with torch.no_grad():
                outs = []
                for e, chunk in enumerate(y.split(blk.rows_local, dim=0)):
                    g, u = lin(chunk, blk.w1[e]).chunk(2, dim=-1)
                    outs.append(lin((F.silu(g) * u).contiguous(), blk.w2[e]))
                return torch.cat(outs)

        return f

    for name, f in (("attention", blk.attention), ("moe", blk.moe), ("block", blk.block)):
        def step():
            y = f(x)
            y.backward(gy)

        t_f = median_time(lambda: f(x), 20)
        t_fb = median_time(step, 20)
        # Host time to issue one forward + backward (no synchronisation inside).
        hs = []
        for _ in range(10):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            step()
            hs.append(time.perf_counter() - t0)
        torch.cuda.synchronize()
        host = statistics.median(hs)
        # The GPU's own time: forward + backward captured in a CUDA graph and replayed.
        for p_ in params + [x]:
            p_.grad = None
        try:
            t_graph = graph_time(step, 1)
        except Exception as e:
            print(f"graph capture of {name}: {e}", file=sys.stderr)
            t_graph = float("nan")
        # GPU busy time, kernel count and the kernels' shares, from the profiler.
        busy, kernels = float("nan"), -1
        try:
            from torch.profiler import ProfilerActivity, profile

            for _ in range(3):
                step()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                step()
                torch.cuda.synchronize()
            evs = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
            kernels = len(evs)
            busy = sum(e.device_time for e in evs) * 1e-6  # µs → s
            agg = {}
            for e in evs:
                c, t = agg.get(e.name, (0, 0.0))
                agg[e.name] = (c + 1, t + e.device_time * 1e-6)
            for kname, (c, t) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
                kern.append((name, kname[:120], c, t))
        except Exception as e:
            print(f"profiler: {e}", file=sys.stderr)
        res.append((name, t_f, t_fb, t_graph, busy, kernels, host))
        print(f"{name:10s} fwd {t_f*1e3:7.3f} ms  fwd+bwd {t_fb*1e3:7.3f} ms (graph {t_graph*1e3:7.3f})"
              f"  kernels {kernels:4d} busy {busy*1e3:7.3f} ms  host issue {host*1e3:7.3f} ms", flush=True)
    for name, fp8 in (("experts fwd bf16", False), ("experts fwd fp8", True)):
        f = experts(fp8)
        t_e = median_time(f, 20)
        try:
            t_g = graph_time(f, 1)
        except Exception as e:
            print(f"graph capture of {name}: {e}", file=sys.stderr)
            t_g = float("nan")
        res.append((name, t_e, float("nan"), t_g, float("nan"), -1, float("nan")))
        print(f"{name:18s} eager {t_e*1e3:7.3f} ms  graph {t_g*1e3:7.3f} ms", flush=True)
    with open(os.path.join(OUT, "block.csv"), "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["part", "fwd_s", "fwd_bwd_s", "graph_s", "gpu_busy_s", "kernels", "host_issue_s"])
        for r in res:
            wr.writerow([r[0], f"{r[1]:.9g}", f"{r[2]:.9g}", f"{r[3]:.9g}", f"{r[4]:.9g}", r[5], f"{r[6]:.9g}"])
    with open(os.path.join(OUT, "block_kernels.csv"), "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["part", "kernel", "count", "total_s"])
        for r in kern:
            wr.writerow([r[0], r[1], r[2], f"{r[3]:.9g}"])
    for part in ("attention", "moe"):
        print(f"-- {part}: top kernels")
        for r in [r for r in kern if r[0] == part][:12]:
            print(f"   {r[3]*1e3:7.3f} ms  x{r[2]:3d}  {r[1][:90]}")


# Sequence sweep of one attention core: (head dim of q/k, head dim of v) × causal × sequence.
# 8 query heads and 1 KV head per GPU (a TP-sharded GQA layer) at batch 1: the per-call shape
# of long-context training; MLA's 192/128 q·k/v head dims (DeepSeek-V2/V3) where SDPA runs it.
ATTN_SEQ = [1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
ATTN_DIMS = [(64, 64), (128, 128), (192, 128)]


def sdpa_times(b, h, kv, sq, sk, dqk, dv, causal, reps=3, replays=15, gqa=True):
    """(forward, backward) seconds of one SDPA call (`h` query heads, `kv` key/value heads,
    `sq` queries against `sk` keys), BF16, graph-timed: the backward is the forward + backward
    call's time less the forward's. `gqa`: SDPA's `enable_gqa`."""
    q = torch.randn(b, h, sq, dqk, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(b, kv, sk, dqk, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(b, kv, sk, dv, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    go = torch.randn(b, h, sq, dv, device=DEV, dtype=torch.bfloat16)

    def fwd():
        with torch.no_grad():
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)

    def fwd_bwd():
        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
        o.backward(go)

    t_f = graph_time(fwd, reps, replays)
    for t in (q, k, v):
        t.grad = None
    t_fb = graph_time(fwd_bwd, 1, replays)
    del q, k, v, go
    torch.cuda.empty_cache()
    return t_f, t_fb - t_f


def attnseq_part():
    """FlashAttention (PyTorch SDPA) forward and forward + backward, BF16, graph-timed, over
    sequence length, head dim and causal masking: how the kernel's rate moves with what
    `crates/cost/src/compute.rs` prices at one rate. FLOPs of the forward: 2·b·h·s²·(d_qk + d_v),
    halved when causal."""
    rows = []
    h, kv, b = 8, 1, 1
    for dqk, dv in ATTN_DIMS:
        for causal in (True, False):
            for s in ATTN_SEQ:
                try:
                    reps = 3 if s <= 16384 else 1
                    replays = 15 if s <= 32768 else 5
                    t_f, t_b = sdpa_times(b, h, kv, s, s, dqk, dv, causal, reps, replays)
                except Exception as e:  # a head-dim pair SDPA has no kernel for
                    print(f"d={dqk}/{dv} causal={causal} s={s}: {str(e)[:120]}", file=sys.stderr, flush=True)
                    torch.cuda.empty_cache()
                    break
                flops = 2.0 * b * h * s * s * (dqk + dv) * (0.5 if causal else 1.0)
                rows.append((b, s, h, kv, dqk, dv, int(causal), t_f, t_b))
                print(f"d={dqk:3d}/{dv:3d} causal={int(causal)} s={s:6d}  fwd {t_f*1e3:8.3f} ms"
                      f" ({flops/t_f/1e12:6.1f} TF/s)  bwd {t_b*1e3:8.3f} ms (x{t_b/t_f:4.2f})", flush=True)
    with open(os.path.join(OUT, "attention_seq.csv"), "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["batch", "seq", "heads", "kv_heads", "head_dim_qk", "head_dim_v", "causal", "fwd_s", "bwd_s"])
        for r in rows:
            wr.writerow([*r[:7], f"{r[7]:.9g}", f"{r[8]:.9g}"])


# DeepSeek-V3's routed experts on one EP rank (hidden 7168, expert FFN 2048; fc1 fuses gate and
# up: n = 2·2048): 4, 8 or 16 local experts (EP 64, 32, 16 of 256) at 128 to 8192 tokens each.
GROUPED_DSV3 = [
    (f"dsv3 {name} E{e} m{m}", e, m, n, k)
    for e in (4, 8, 16)
    for m in (128, 512, 2048, 8192)
    for name, n, k in (("fc1", 4096, 7168), ("fc2", 7168, 2048))
]

def moeops_part():
    """The MoE layer's non-GEMM work at DeepSeek-V3's width (hidden 7168, 256 experts, top-8) for
    4096 and 16384 tokens, BF16, graph-timed: the router (gate GEMM, sigmoid, top-8), the token
    permutation (gather of the routed rows into expert order) and un-permutation (weighted
    scatter-add back), as bytes moved per second; and one expert GEMM in FP8 with per-tensor,
    row-wise and (where this PyTorch has it) 1x128/128x128 block scales against BF16."""
    rows = []
    h, E, k = 7168, 256, 8
    for T in (4096, 16384):
        x = torch.randn(T, h, device=DEV, dtype=torch.bfloat16)
        wg = torch.randn(E, h, device=DEV, dtype=torch.bfloat16)

        def router():
            logits = x @ wg.t()
            s = torch.sigmoid(logits.float())
            return torch.topk(s, k, dim=-1)

        t_r = graph_time(router, 3)
        _, idx = router()
        order = torch.argsort(idx.flatten())
        src = order // k

        def permute():
            return x.index_select(0, src)

        t_p = graph_time(permute, 3)
        y = permute()
        w = torch.rand(T * k, 1, device=DEV, dtype=torch.bfloat16)

        # Un-permutation as the fused kernels do it (a gather, no atomics): each token gathers
        # its k expert outputs back and sums them weighted by the router probabilities.
        inv = torch.empty_like(order)
        inv[order] = torch.arange(order.numel(), device=DEV)

        def unpermute():
            return (y.index_select(0, inv).view(T, k, h) * w.view(T, k, 1)).sum(1)

        t_u = graph_time(unpermute, 3)
        moved = T * k * h * 2 * 2  # read + write of the routed rows, bytes
        rows.append((f"router T{T}", T, t_r, 2.0 * T * h * E / t_r / 1e12))
        rows.append((f"permute T{T}", T, t_p, moved / t_p / 1e9))
        rows.append((f"unpermute T{T}", T, t_u, moved / t_u / 1e9))
        print(f"T={T:6d} router {t_r*1e6:8.1f} us  permute {t_p*1e6:8.1f} us ({moved/t_p/1e9:6.0f} GB/s)"
              f"  unpermute {t_u*1e6:8.1f} us ({moved/t_u/1e9:6.0f} GB/s)", flush=True)
        del x, wg, y
        torch.cuda.empty_cache()
    # FP8 scaling recipes on one DeepSeek-V3 expert fc1 (m tokens × 4096 × 7168).
    f8 = torch.float8_e4m3fn
    for m in (512, 2048, 8192):
        n, kk = 4096, 7168
        a = torch.randn(m, kk, device=DEV, dtype=torch.bfloat16)
        b = torch.randn(n, kk, device=DEV, dtype=torch.bfloat16)
        a8, b8 = a.to(f8), b.to(f8)
        t_bf = graph_time(lambda: a @ b.t(), 3)
        one = torch.ones((), device=DEV, dtype=torch.float32)
        t_pt = graph_time(lambda: torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16), 3)
        t_rw = float("nan")
        try:
            sa = torch.ones(m, 1, device=DEV, dtype=torch.float32)
            sb = torch.ones(1, n, device=DEV, dtype=torch.float32)
            t_rw = graph_time(lambda: torch._scaled_mm(a8, b8.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16), 3)
        except Exception as e:
            print(f"rowwise: {str(e)[:100]}", file=sys.stderr)
        t_bw = float("nan")
        try:
            sa = torch.ones(m, kk // 128, device=DEV, dtype=torch.float32)
            sb = torch.ones(n // 128, kk // 128, device=DEV, dtype=torch.float32)
            t_bw = graph_time(lambda: torch._scaled_mm(a8, b8.t(), scale_a=sa, scale_b=sb.t(), out_dtype=torch.bfloat16), 3)
        except Exception as e:
            print(f"blockwise: {str(e)[:100]}", file=sys.stderr)
        fl = 2.0 * m * n * kk
        for name, t in (("bf16", t_bf), ("fp8 tensorwise", t_pt), ("fp8 rowwise", t_rw), ("fp8 block 1x128/128x128", t_bw)):
            rows.append((f"fc1 m{m} {name}", m, t, fl / t / 1e12 if t == t else float("nan")))
        print(f"m={m:5d} bf16 {fl/t_bf/1e12:5.0f}  fp8 tensor {fl/t_pt/1e12:5.0f}  rowwise {fl/t_rw/1e12:5.0f}"
              f"  block {fl/t_bw/1e12:5.0f} TF/s", flush=True)
        del a, b, a8, b8
        torch.cuda.empty_cache()
    with open(os.path.join(OUT, "moe_ops.csv"), "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["op", "tokens", "time_s", "rate"])
        for r in rows:
            wr.writerow([r[0], r[1], f"{r[2]:.9g}", f"{r[3]:.6g}"])



# (label, tokens t a rank routes, hidden h, experts E, top-k, local experts, expert ffn): the
# MoE layers of published rows as one EP rank runs them under forced-balanced routing (every
# rank receives t·k rows, t·k / local rows per local expert).
MOE = [
    ("qwen3-235b tp4/ep8", 1024, 4096, 128, 8, 16, 1536),
    ("qwen3-235b tp2/ep32", 2048, 4096, 128, 8, 4, 1536),
    ("qwen3-30b ep8 mbs2", 8192, 2048, 128, 8, 16, 768),
    ("deepseek-v3 tp1/ep64", 4096, 7168, 256, 8, 4, 2048),
]


def moe_part():
    """A MoE layer's work beside its all-to-alls, item by item, in plain PyTorch (no fused
    kernels), graph-timed: the router's softmax, top-k, dense probabilities, routing map and
    aux-loss statistic on fp32 logits, forward + backward (the gate GEMM excluded); the
    permutation of the `t·k` routed rows into expert order (`index_select`; its backward is a
    scatter-add) and the un-permutation (weighted by the probabilities, summed over the top-k
    with `index_add_`), forward and forward + backward; and the whole layer (gate GEMM, router,
    permute, the local experts' SwiGLU GEMMs as two grouped kernels, un-permute) forward +
    backward, graph-timed and eager (the host's launches from Python included). → moe.csv"""
    rows = []
    for label, t, h, E, k, local, ffn in MOE:
        R = t * k

        def leaf(*shape):
            return torch.randn(*shape, device=DEV, dtype=torch.bfloat16, requires_grad=True)

        x, wg, y = leaf(t, h), leaf(E, h), leaf(R, h)
        w1, w2 = leaf(local, h, 2 * ffn), leaf(local, ffn, h)
        logits = torch.randn(t, E, device=DEV, requires_grad=True)
        pw = torch.rand(R, 1, device=DEV, dtype=torch.bfloat16, requires_grad=True)
        # Forced balance: token i goes to experts (i·k + j) mod E, j < k (k distinct experts).
        experts = (torch.arange(t, device=DEV)[:, None] * k + torch.arange(k, device=DEV)) % E
        idx = (torch.argsort(experts.flatten(), stable=True) // k).contiguous()
        offs = torch.arange(R // local, R + 1, R // local, device=DEV, dtype=torch.int32)
        go_x = torch.randn(t, h, device=DEV, dtype=torch.bfloat16)
        go_r = torch.randn(R, h, device=DEV, dtype=torch.bfloat16)

        def router(lg):
            scores = torch.softmax(lg, -1)
            p, sel = torch.topk(scores, k, -1)
            probs = torch.zeros_like(scores).scatter(1, sel, p)
            rmap = torch.zeros_like(scores, dtype=torch.bool).scatter(1, sel, True)
            return probs, (probs.mean(0) * rmap.float().mean(0)).sum() * E

        def router_fb():
            probs, aux = router(logits)
            return torch.autograd.grad(probs.sum() + aux, logits)

        def perm_f():
            return x.index_select(0, idx)

        def perm_fb():
            return torch.autograd.grad(x.index_select(0, idx), x, go_r)

        def unperm(z):
            return torch.zeros(t, h, device=DEV, dtype=torch.bfloat16).index_add_(0, idx, z * pw)

        def unperm_f():
            return unperm(y)

        def unperm_fb():
            return torch.autograd.grad(unperm(y), (y, pw), go_x)

        def layer():
            probs, aux = router((x @ wg.t()).float())
            a = torch._grouped_mm(x.index_select(0, idx), w1, offs=offs, out_dtype=torch.bfloat16)
            g, u = a.chunk(2, -1)
            z = torch._grouped_mm(F.silu(g) * u, w2, offs=offs, out_dtype=torch.bfloat16)
            return torch.autograd.grad((unperm(z), aux), (x, wg, w1, w2, pw),
                                       (go_x, torch.ones((), device=DEV)))

        res = [label, t, h, E, k, local, ffn]
        res += [graph_time(f, 1) for f in (router_fb, perm_f, perm_fb, unperm_f, unperm_fb, layer)]
        res.append(median_time(layer, 15))
        rows.append(res)
        print(f"{label:24s} " + " ".join(f"{v*1e6:9.1f}" for v in res[7:]) + " us", flush=True)
        del x, wg, y, w1, w2, logits
        torch.cuda.empty_cache()
    with open(os.path.join(OUT, "moe.csv"), "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["label", "tokens", "hidden", "experts", "top_k", "local_experts", "ffn",
                     "router_fwd_bwd_s", "permute_fwd_s", "permute_fwd_bwd_s", "unpermute_fwd_s",
                     "unpermute_fwd_bwd_s", "layer_fwd_bwd_graph_s", "layer_fwd_bwd_eager_s"])
        for r in rows:
            wr.writerow([*r[:7], *(f"{v:.4g}" for v in r[7:])])


# Streaming kernels over sizes (bytes read + written): a copy, an add of two tensors, and a
# SwiGLU activation (silu(a)·b) as PyTorch runs them (one elementwise kernel each, BF16).
HBM_BYTES = [2**p for p in range(16, 33, 2)]


def hbm_part():
    """Memory-bound kernels' bandwidth against their size: what `memory_bound_time`'s
    `hbm_eff(bytes)` curve prices. Bytes counted: every tensor read and written once."""
    rows = []
    for nbytes in HBM_BYTES:
        n = nbytes // 2 // 2  # bf16 elements per tensor, read + write of one tensor = nbytes
        a = torch.randn(n, device=DEV, dtype=torch.bfloat16)
        b = torch.randn(n, device=DEV, dtype=torch.bfloat16)
        o = torch.empty_like(a)
        reps = max(1, min(50, int(2**31 // nbytes)))
        ops = (
            ("copy", lambda: o.copy_(a), 2 * n * 2),
            ("add", lambda: torch.add(a, b, out=o), 3 * n * 2),
            ("swiglu", lambda: torch.mul(F.silu(a), b, out=o), 3 * n * 2 + 2 * n * 2),
        )
        for name, fn, moved in ops:
            t = graph_time(fn, reps)
            rows.append((name, moved, t, moved / t / 1e9))
            print(f"{name:7s} {moved/1e6:10.3f} MB  {t*1e6:9.2f} us  {moved/t/1e9:7.0f} GB/s", flush=True)
        del a, b, o
        torch.cuda.empty_cache()
    with open(os.path.join(OUT, "hbm.csv"), "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["op", "bytes", "time_s", "gbps"])
        for r in rows:
            wr.writerow([r[0], r[1], f"{r[2]:.9g}", f"{r[3]:.6g}"])


def fp8block_part():
    """FP8 GEMMs with DeepSeek-V3's block scaling (1x128 activation tiles, 128x128 weight
    blocks; its report §3.3.2) against per-tensor scaling and BF16, at expert and dense shapes.
    Scale layouts tried in turn, each checked against the BF16 product of the dequantised
    operands; the first that runs and agrees is timed, and the layout is recorded."""
    f8 = torch.float8_e4m3fn
    rows = []
    shapes = [("dsv3 fc1", m, 4096, 7168) for m in (512, 2048, 8192)] + \
             [("dsv3 fc2", m, 7168, 2048) for m in (512, 2048, 8192)] + \
             [("square", 8192, 8192, 8192), ("llama3-70b tp4 fc1", 8192, 14336, 8192)]
    for label, m, n, k in shapes:
        a = torch.randn(m, k, device=DEV, dtype=torch.bfloat16)
        b = torch.randn(n, k, device=DEV, dtype=torch.bfloat16)
        a8, b8 = a.to(f8), b.to(f8)
        ref = a8.to(torch.bfloat16) @ b8.to(torch.bfloat16).t()
        one = torch.ones((), device=DEV, dtype=torch.float32)
        t_bf = graph_time(lambda: a @ b.t(), 3)
        t_pt = graph_time(lambda: torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16), 3)
        cand = []
        # scale_a: (m, k/128) outer-dim-major (stride (1, m)); scale_b: (k/128, n/128) as the
        # transposed operand's, in both majors.
        sa_cm = torch.ones(k // 128, m, device=DEV, dtype=torch.float32).t()
        sa_rm = torch.ones(m, k // 128, device=DEV, dtype=torch.float32)
        sb_1 = torch.ones(n // 128, k // 128, device=DEV, dtype=torch.float32).t()
        sb_2 = torch.ones(k // 128, n // 128, device=DEV, dtype=torch.float32)
        for name, sa, sb in (("a(m,k/128) col-major, b(k/128,n/128) col-major", sa_cm, sb_1),
                             ("a(m,k/128) col-major, b(k/128,n/128) row-major", sa_cm, sb_2),
                             ("a(m,k/128) row-major, b(k/128,n/128) col-major", sa_rm, sb_1),
                             ("a(m,k/128) row-major, b(k/128,n/128) row-major", sa_rm, sb_2)):
            cand.append((f"_scaled_mm {name}", lambda sa=sa, sb=sb: torch._scaled_mm(
                a8, b8.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)))
        try:
            from torch.nn.functional import ScalingType, SwizzleType
            for name, sa, sb in (("F.scaled_mm col-major a", sa_cm, sb_1), ("F.scaled_mm row-major a", sa_rm, sb_2)):
                cand.append((name, lambda sa=sa, sb=sb: F.scaled_mm(
                    a8, b8.t(), sa, ScalingType.BlockWise1x128, sb, ScalingType.BlockWise128x128,
                    swizzle_a=SwizzleType.NO_SWIZZLE, swizzle_b=SwizzleType.NO_SWIZZLE,
                    output_dtype=torch.bfloat16)))
        except Exception as e:
            print(f"F.scaled_mm: {str(e)[:200]}", file=sys.stderr, flush=True)
        t_bw, how = float("nan"), "none ran"
        for name, fn in cand:
            try:
                out = fn()
                err = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
                if not err < 2e-2:
                    print(f"{label} m{m} {name}: differs {err:.3g}", file=sys.stderr, flush=True)
                    continue
                t_bw, how = graph_time(fn, 3), name
                break
            except Exception as e:
                print(f"{label} m{m} {name}: {str(e)[:300]}", file=sys.stderr, flush=True)
        fl = 2.0 * m * n * k
        for name, t in (("bf16", t_bf), ("fp8 tensorwise", t_pt), ("fp8 block 1x128/128x128", t_bw)):
            rows.append((label, m, n, k, name, t, fl / t / 1e12 if t == t else float("nan"),
                         how if "block" in name else ""))
        print(f"{label:20s} m={m:5d} n={n:5d} k={k:5d} bf16 {fl/t_bf/1e12:5.0f}  fp8 tensor {fl/t_pt/1e12:5.0f}"
              f"  block {fl/t_bw/1e12:5.0f} TF/s ({how})", flush=True)
        del a, b, a8, b8, ref
        torch.cuda.empty_cache()
    with open(os.path.join(OUT, "fp8block.csv"), "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["label", "m", "n", "k", "recipe", "time_s", "tflops", "layout"])
        for r in rows:
            wr.writerow([*r[:5], f"{r[5]:.9g}", f"{r[6]:.4g}", r[7]])



# Context-parallel ring steps (Transformer Engine's p2p CP with Megatron's causal load balancing:
# each rank holds chunks i and 2cp-1-i of c = s/(2cp) tokens): step 0 is causal attention of
# the rank's 2c tokens, the later steps either both local query chunks against one remote
# chunk (full, q = 2c, k = c) or the second local chunk against both remote ones (q = c, k = 2c).
ATTN_CP_SEQ = [16384, 32768, 65536, 131072]
ATTN_CP = [2, 4, 8]


def attncp_part():
    """One CP rank's attention calls (fwd and fwd + bwd, SDPA, BF16, graph-timed) per ring
    step kind, 8 query heads and 1 KV head (a TP-sharded GQA layer), head dims 64 and 128."""
    rows = []
    h, kv, b = 8, 1, 1
    for d in (64, 128):
        for s in ATTN_CP_SEQ:
            for cp in ATTN_CP:
                c = s // (2 * cp)
                for kind, sq, sk, causal in (("causal", 2 * c, 2 * c, True),
                                              ("q2c-k1c", 2 * c, c, False),
                                              ("q1c-k2c", c, 2 * c, False)):
                    t_f, t_b = sdpa_times(b, h, kv, sq, sk, d, d, causal)
                    rows.append((s, cp, kind, b, h, kv, sq, sk, d, int(causal), t_f, t_b))
                    print(f"d={d:3d} s={s:6d} cp={cp} {kind:8s} q={sq:6d} k={sk:6d}  fwd {t_f*1e6:9.1f} us"
                          f"  bwd {t_b*1e6:9.1f} us", flush=True)
    with open(os.path.join(OUT, "attention_cp.csv"), "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["seq", "cp", "step", "batch", "heads", "kv_heads", "q_len", "k_len", "head_dim",
                     "causal", "fwd_s", "bwd_s"])
        for r in rows:
            wr.writerow([*r[:10], f"{r[10]:.9g}", f"{r[11]:.9g}"])


def run_parts(table, default):
    """Run the parts named on the command line (`default` when none is), in the order named;
    one that fails is reported and the others still run."""
    parts = sys.argv[1:] or default
    unknown = [p for p in parts if p not in table]
    if unknown:
        sys.exit(f"unknown part(s) {unknown}; parts: {sorted(table)}")
    for p in parts:
        t0 = time.time()
        try:
            table[p]()
        except Exception as e:  # noqa: BLE001 - report, and run the other parts
            print(f"part {p} failed: {e!r}", file=sys.stderr, flush=True)
        print(f"part {p}: {time.time() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    print(torch.__version__, torch.cuda.get_device_name(), torch.cuda.get_device_properties(0).multi_processor_count, "SMs", flush=True)
    run_parts({
        "gemm": gemm_part, "ratio": ratio_part, "grouped": grouped_part, "attention": attention_part,
        "fp8cast": fp8cast_part, "block": block_part, "moeops": moeops_part, "attnseq": attnseq_part,
        "grouped_dsv3": lambda: grouped_part(GROUPED_DSV3, "grouped_dsv3.csv"), "moe": moe_part,
        "hbm": hbm_part, "fp8block": fp8block_part, "attncp": attncp_part,
    }, ["gemm", "ratio", "grouped", "attention", "fp8cast", "block"])
