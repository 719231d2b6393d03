#!/usr/bin/env python3
"""Measure on one GPU what autoplan prices but `probe.py` did not time (needs PyTorch and a CUDA
GPU): four kernels and three whole blocks. What each file holds and what the model takes from it:
results/h200/README.md (the kernels, taken on an H200) and results/h100/README.md (the blocks,
taken on an H100).

- `window`: sliding-window attention against causal attention in one kernel family
  (FlexAttention, compiled by Triton: its block mask skips the key tiles outside the window),
  with cuDNN's causal SDPA at the same shapes as the anchor: what `attention_fwd_time`'s
  windowed tile count (`k̄ = w − w²/2s`, the window's edge tiles) predicts. → window.csv
- `mla`: DeepSeek-V3's attention core (q·k head dim 192, v 128) through each SDPA backend that
  takes it, and the flash backend on V padded to 192. → mla.csv
- `adam`: one fused AdamW step over fp32 master weights, gradients and moments (PyTorch's
  `fused=True`), the gradient norm for clipping (`_foreach_norm`) and the copy to BF16
  weights: the bytes per parameter `optimizer.rs` prices over the time. → adam.csv
- `loss`: the LM head's cross entropy on BF16 logits, forward and backward: Megatron-Core's
  `vocab_parallel_cross_entropy` forward at TP 1 (upcast, max, exp, sum, gather) as eager ops
  under autograd, and `F.cross_entropy` on the upcast logits: what the model's fp32-logits bytes price.
  → loss.csv
- `mptblock`: one MPT transformer block as llm-foundry runs it (eager PyTorch under bf16
  autocast with bf16 weights, FSDP's `PURE` mixed precision: low-precision LayerNorm without
  bias, a fused Wqkv, causal flash attention through SDPA standing in for FlashAttention-2 with
  ALiBi, a GELU MLP of 4h, residual adds), forward and forward + backward, event-timed eager
  and graph-timed, at the per-GPU shapes of the llm-foundry rows (MPT-7B 6 × 2048 tokens,
  MPT-70B 8 × 2048). → mpt_block.csv
- `llamablock`: one Llama-3-8B block as torchtitan writes it (`nn.RMSNorm`, complex RoPE,
  SDPA with 8 KV heads, SwiGLU), BF16, forward and forward + backward, eager and under
  `torch.compile`, at 8K and 32K tokens: the GPU work of the torchtitan rows' blocks at the
  full 700 W (their H100s were capped at 500 W). → llama_block.csv
- `qwen235`: one Qwen3-235B-A22B block on one GPU of ModelZoo's intra-node plan (tp 4 with
  sequence parallelism, ep 8, micro-batch 1 × 4096): the attention on the gathered sequence
  with 16 query heads and 1 KV head, and the MoE layer on the rank's 1024 tokens (router,
  top-8, permutation, 16 local experts of 4096 × 1536 on the 512 rows each the all-to-all
  would deliver under balanced routing, un-permutation), `probe.py`'s plain-PyTorch block,
  forward + backward, eager and graph-timed; the TP and EP collectives are not run.
  → qwen235_block.csv

Usage: `OUT=results/h200 python3 tools/gpu/kernels_probe.py [PART]...` (all seven when none is
named). `cargo test -p autoplan-cost --test h100_probe -- --nocapture` reads `mla.csv` and
`window.csv`, `cargo test -p autoplan-evaluate --test optimizer_bytes` reads `adam.csv`; the
loss and block timings are compared with the model in the READMEs and docs/validation.md.
"""
import csv
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe import DEV, OUT, graph_time, median_time, run_parts, sdpa_times  # noqa: E402


def write(name, header, rows):
    with open(os.path.join(OUT, name), "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(header)
        for r in rows:
            wr.writerow([f"{v:.9g}" if isinstance(v, float) else v for v in r])


def timed(fn, reps=3):
    """Graph-timed seconds of `fn()`, or event-timed when the work cannot be captured."""
    try:
        return graph_time(fn, reps), "graph"
    except Exception as e:  # noqa: BLE001 - a kernel that cannot be captured is timed eagerly
        print(f"  (graph capture failed: {str(e)[:80]}; eager)", flush=True)
        torch.cuda.synchronize()
        return median_time(fn, 10), "eager"


# Sliding windows of the models autoplan bundles or may meet: GPT-OSS 128, Gemma 3 1024,
# Mistral 7B / Gemma 2 4096; the causal call as the window of the whole sequence.
WINDOWS = [128, 1024, 4096]
WINDOW_SHAPES = [(128, 8192), (128, 32768), (64, 8192)]  # (head dim, sequence)


def window_part():
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    torch._dynamo.config.cache_size_limit = 64
    flex = torch.compile(flex_attention, dynamic=False)
    rows = []
    h, kv, b = 8, 1, 1
    for d, s in WINDOW_SHAPES:
        # One mask function for every window (a tensor, not a constant): one compile per shape.
        w_t = torch.tensor(s, device=DEV, dtype=torch.int32)

        def mask(bi, hi, q, k):
            return (q >= k) & (q - k < w_t)

        q = torch.randn(b, h, s, d, device=DEV, dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn(b, kv, s, d, device=DEV, dtype=torch.bfloat16, requires_grad=True)
        v = torch.randn(b, kv, s, d, device=DEV, dtype=torch.bfloat16, requires_grad=True)
        go = torch.randn(b, h, s, d, device=DEV, dtype=torch.bfloat16)
        for w in [s] + [w for w in WINDOWS if w < s]:
            w_t.fill_(w)
            bm = create_block_mask(mask, None, None, s, s, device=DEV)

            def fwd():
                with torch.no_grad():
                    return flex(q, k, v, block_mask=bm, enable_gqa=True)

            def fwd_bwd():
                o = flex(q, k, v, block_mask=bm, enable_gqa=True)
                o.backward(go)

            t0 = time.time()
            fwd_bwd()  # compile (first window of a shape) outside the timings
            torch.cuda.synchronize()
            t_f, how = timed(fwd)
            t_fb, _ = timed(fwd_bwd, 1)
            for t in (q, k, v):
                t.grad = None
            kbar = s / 2 if w >= s else w - w * w / (2 * s)
            flops = 4.0 * b * h * s * kbar * d
            rows.append(("flex", d, s, w, h, kv, t_f, t_fb - t_f, how))
            print(f"flex d={d:3d} s={s:6d} w={w:6d}  fwd {t_f*1e6:9.1f} us ({flops/t_f/1e12:5.1f} TF/s)"
                  f"  bwd {(t_fb-t_f)*1e6:9.1f} us  [{how}, first call {time.time()-t0:.1f} s]", flush=True)
        t_f, t_b = sdpa_times(b, h, kv, s, s, d, d, True)
        rows.append(("sdpa", d, s, s, h, kv, t_f, t_b, "graph"))
        print(f"sdpa d={d:3d} s={s:6d} causal  fwd {t_f*1e6:9.1f} us  bwd {t_b*1e6:9.1f} us", flush=True)
        del q, k, v, go
        torch.cuda.empty_cache()
    write("window.csv", ["kernel", "head_dim", "seq", "window", "heads", "kv_heads", "fwd_s", "bwd_s", "timing"], rows)


def mla_part():
    from torch.nn.attention import SDPBackend, sdpa_kernel

    rows = []
    # (heads per GPU, sequence): DeepSeek-V3's 128 heads at TP 1 and TP 8, 4K tokens.
    for h, s in ((128, 4096), (16, 4096), (16, 16384)):
        for label, backends, dv in (("default", None, 128), ("cudnn", [SDPBackend.CUDNN_ATTENTION], 128),
                                    ("efficient", [SDPBackend.EFFICIENT_ATTENTION], 128),
                                    ("flash-pad-v192", [SDPBackend.FLASH_ATTENTION], 192),
                                    ("cudnn-pad-v192", [SDPBackend.CUDNN_ATTENTION], 192)):
            try:
                if backends is None:
                    t_f, t_b = sdpa_times(1, h, h, s, s, 192, dv, True, gqa=False)
                else:
                    with sdpa_kernel(backends):
                        t_f, t_b = sdpa_times(1, h, h, s, s, 192, dv, True, gqa=False)
            except Exception as e:  # noqa: BLE001 - a backend without a kernel for the shape
                print(f"mla {label} h={h} s={s}: {str(e)[:100]}", flush=True)
                torch.cuda.empty_cache()
                continue
            flops = 2.0 * h * s * s * (192 + 128) * 0.5
            rows.append((label, h, s, 192, dv, t_f, t_b))
            print(f"mla {label:15s} h={h:3d} s={s:6d} dv={dv}  fwd {t_f*1e6:9.1f} us ({flops/t_f/1e12:5.1f} TF/s)"
                  f"  bwd {t_b*1e6:9.1f} us (x{t_b/t_f:4.2f})", flush=True)
    write("mla.csv", ["backend", "heads", "seq", "head_dim_qk", "head_dim_v", "fwd_s", "bwd_s"], rows)


ADAM_PARAMS = [64 << 20, 256 << 20, 1 << 30]


def adam_part():
    rows = []
    for total in ADAM_PARAMS:
        n_t = 32
        sizes = [total // n_t] * n_t
        p = [torch.randn(n, device=DEV, dtype=torch.float32, requires_grad=True) for n in sizes]
        for x in p:
            x.grad = torch.randn_like(x) * 1e-3
        opt = torch.optim.AdamW(p, lr=1e-4, fused=True)
        opt.step()  # allocates m and v
        w16 = [torch.empty(n, device=DEV, dtype=torch.bfloat16) for n in sizes]
        grads = [x.grad for x in p]
        ops = (
            # grad r4, master r4 w4, m and v r4 w4 each: 28 B per parameter
            ("adamw-fused", lambda: opt.step(), 28),
            ("grad-norm", lambda: torch._foreach_norm(grads), 4),
            ("copy-bf16", lambda: torch._foreach_copy_(w16, p), 6),
        )
        for name, fn, per in ops:
            t = median_time(fn, 10, warm=3)
            moved = per * total
            rows.append((name, total, per, t))
            print(f"{name:12s} {total/1e6:8.1f} M params  {t*1e3:8.3f} ms  {moved/t/1e9:7.0f} GB/s", flush=True)
        del p, opt, w16, grads
        torch.cuda.empty_cache()
    write("adam.csv", ["op", "params", "bytes_per_param", "time_s"], rows)


def vocab_parallel_ce(logits, target):
    """Megatron-Core `tensor_parallel/cross_entropy.py` `_VocabParallelCrossEntropy` at TP 1:
    fp32 upcast, max, subtract, exp, sum, the target's logit; softmax kept for backward."""
    x = logits.float()
    m = x.max(dim=-1, keepdim=True)[0]
    x = x - m
    pred = x.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    e = x.exp()
    s = e.sum(dim=-1)
    return (torch.log(s) - pred).mean()


# (vocabulary, tokens): GPT-3's padded 50257, Llama 3's, Qwen's.
LOSS_SHAPES = [(50304, 8192), (128256, 8192), (151936, 4096), (151936, 8192)]


def loss_part():
    rows = []
    for vocab, t in LOSS_SHAPES:
        logits = torch.randn(t, vocab, device=DEV, dtype=torch.bfloat16, requires_grad=True)
        target = torch.randint(0, vocab, (t,), device=DEV)
        for name, f in (("megatron-eager", vocab_parallel_ce),
                        ("torch-ce-fp32", lambda x, y: F.cross_entropy(x.float(), y))):
            def fwd():
                with torch.no_grad():
                    return f(logits, target)

            def fwd_bwd():
                f(logits, target).backward()

            t_f, _ = timed(fwd)
            logits.grad = None
            t_fb, _ = timed(fwd_bwd, 1)
            logits.grad = None
            rows.append((name, vocab, t, t_f, t_fb - t_f))
            print(f"{name:15s} V={vocab:6d} t={t:5d}  fwd {t_f*1e3:7.3f} ms  bwd {(t_fb-t_f)*1e3:7.3f} ms"
                  f"  ({t_fb*1e9/(t*vocab):6.2f} ns per logit)", flush=True)
        del logits, target
        torch.cuda.empty_cache()
    write("loss.csv", ["impl", "vocab", "tokens", "fwd_s", "bwd_s"], rows)


# (name, hidden, heads, micro-batch): the llm-foundry H100 rows' models and micro-batches.
MPT_SHAPES = [("mpt-7b", 4096, 32, 6), ("mpt-70b", 8192, 64, 8)]


class MptBlock(torch.nn.Module):
    """llm-foundry `MPTBlock` (models/layers/blocks.py): x + attn(norm_1(x)), then
    x + ffn(norm_2(x)); no biases, no dropout (MPT's `resid_pdrop` 0)."""

    def __init__(self, h, heads):
        super().__init__()
        self.heads = heads
        self.norm_1 = torch.nn.LayerNorm(h, bias=False)
        self.wqkv = torch.nn.Linear(h, 3 * h, bias=False)
        self.out_proj = torch.nn.Linear(h, h, bias=False)
        self.norm_2 = torch.nn.LayerNorm(h, bias=False)
        self.up = torch.nn.Linear(h, 4 * h, bias=False)
        self.down = torch.nn.Linear(4 * h, h, bias=False)

    @staticmethod
    def lp_norm(norm, x):
        # `LPLayerNorm`: input and weight downcast to the autocast dtype, autocast off.
        with torch.autocast("cuda", enabled=False):
            return F.layer_norm(x.to(torch.bfloat16), norm.normalized_shape,
                                norm.weight.to(torch.bfloat16), None, norm.eps)

    def forward(self, x):
        b, s, h = x.shape
        a = self.lp_norm(self.norm_1, x)
        q, k, v = self.wqkv(a).chunk(3, dim=-1)
        q, k, v = (t.view(b, s, self.heads, h // self.heads).transpose(1, 2) for t in (q, k, v))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out_proj(o.transpose(1, 2).reshape(b, s, h))
        m = self.lp_norm(self.norm_2, x)
        return x + self.down(F.gelu(self.up(m)))


def mptblock_part():
    rows = []
    s = 2048
    for name, h, heads, mbs in MPT_SHAPES:
        blk = MptBlock(h, heads).to(DEV, torch.bfloat16)
        x = torch.randn(mbs, s, h, device=DEV, dtype=torch.bfloat16, requires_grad=True)
        go = torch.randn(mbs, s, h, device=DEV, dtype=torch.bfloat16)

        def fwd():
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                return blk(x)

        def fwd_bwd():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                y = blk(x)
            y.backward(go)

        e_f = median_time(fwd, 10, warm=3)
        e_fb = median_time(fwd_bwd, 10, warm=3)
        g_f, _ = timed(fwd)
        g_fb, _ = timed(fwd_bwd, 1)
        tokens = mbs * s
        # Model FLOPs of the block (GEMMs 24·h² per token, causal attention 2·s·h per token), ×3.
        flops = 3.0 * tokens * (24.0 * h * h + 2.0 * s * h)
        rows.append((name, h, heads, mbs, s, e_f, e_fb, g_f, g_fb))
        print(f"{name:8s} {mbs}x{s}: fwd {e_f*1e3:7.2f} ms eager / {g_f*1e3:7.2f} graph;"
              f" fwd+bwd {e_fb*1e3:7.2f} eager / {g_fb*1e3:7.2f} graph"
              f" ({flops/g_fb/1e12:5.1f} TF/s model FLOPs)", flush=True)
        del blk, x, go
        torch.cuda.empty_cache()
    write("mpt_block.csv", ["model", "hidden", "heads", "mbs", "seq", "fwd_eager_s", "fwd_bwd_eager_s",
                            "fwd_graph_s", "fwd_bwd_graph_s"], rows)


class LlamaBlock(torch.nn.Module):
    """torchtitan `models/llama3/model/model.py` TransformerBlock: h = x + attn(norm(x)),
    out = h + ffn(norm(h)); RoPE by complex multiplication, SDPA causal with GQA."""

    def __init__(self, h=4096, heads=32, kv=8, ffn=14336):
        super().__init__()
        self.heads, self.kv, self.d = heads, kv, h // heads
        self.attention_norm = torch.nn.RMSNorm(h, eps=1e-5)
        self.wq = torch.nn.Linear(h, heads * self.d, bias=False)
        self.wk = torch.nn.Linear(h, kv * self.d, bias=False)
        self.wv = torch.nn.Linear(h, kv * self.d, bias=False)
        self.wo = torch.nn.Linear(heads * self.d, h, bias=False)
        self.ffn_norm = torch.nn.RMSNorm(h, eps=1e-5)
        self.w1 = torch.nn.Linear(h, ffn, bias=False)
        self.w2 = torch.nn.Linear(ffn, h, bias=False)
        self.w3 = torch.nn.Linear(h, ffn, bias=False)

    @staticmethod
    def rope(x, freqs):
        xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(xc * freqs).flatten(3).type_as(x)

    def forward(self, x, freqs):
        b, s, _ = x.shape
        a = self.attention_norm(x)
        q = self.wq(a).view(b, s, self.heads, self.d)
        k = self.wk(a).view(b, s, self.kv, self.d)
        v = self.wv(a).view(b, s, self.kv, self.d)
        q, k = self.rope(q, freqs), self.rope(k, freqs)
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           is_causal=True, enable_gqa=True)
        h = x + self.wo(o.transpose(1, 2).reshape(b, s, -1))
        m = self.ffn_norm(h)
        return h + self.w2(F.silu(self.w1(m)) * self.w3(m))


def llamablock_part():
    rows = []
    torch._dynamo.config.cache_size_limit = 64
    for s in (8192, 32768):
        blk = LlamaBlock().to(DEV, torch.bfloat16)
        pos = torch.arange(s, device=DEV, dtype=torch.float32)
        inv = 1.0 / (500000.0 ** (torch.arange(0, 128, 2, device=DEV, dtype=torch.float32) / 128))
        freqs = torch.polar(torch.ones(s, 64, device=DEV), torch.outer(pos, inv)).view(1, s, 1, 64)
        x = torch.randn(1, s, 4096, device=DEV, dtype=torch.bfloat16, requires_grad=True)
        go = torch.randn(1, s, 4096, device=DEV, dtype=torch.bfloat16)
        compiled = torch.compile(blk)
        for mode, f in (("eager", blk), ("compile", compiled)):
            def fwd():
                with torch.no_grad():
                    return f(x, freqs)

            def fwd_bwd():
                f(x, freqs).backward(go)

            t0 = time.time()
            fwd_bwd()
            fwd()
            torch.cuda.synchronize()
            t_f = median_time(fwd, 10, warm=3)
            t_fb = median_time(fwd_bwd, 10, warm=3)
            gemm = 2.0 * s * (4096 * 4096 * 2 + 2 * 4096 * 1024 + 3 * 4096 * 14336)
            attn = 2.0 * 32 * s * s * 128  # causal: 4·s²/2·d per head
            flops = 3.0 * (gemm + attn)
            rows.append(("llama3-8b", mode, s, t_f, t_fb))
            print(f"llama3-8b {mode:7s} s={s:6d}: fwd {t_f*1e3:7.2f} ms, fwd+bwd {t_fb*1e3:7.2f} ms"
                  f" ({flops/t_fb/1e12:5.1f} TF/s model FLOPs; first calls {time.time()-t0:.0f} s)", flush=True)
        del blk, compiled, x, go
        torch.cuda.empty_cache()
    write("llama_block.csv", ["model", "mode", "seq", "fwd_s", "fwd_bwd_s"], rows)


def qwen235_part():
    from probe import Qwen3Block

    rows = []
    attn = Qwen3Block(b=1, s=4096, h=4096, heads=16, kv=1, d=128, experts=128, top_k=8, ffn=1536, ep=8)
    moe = Qwen3Block(b=1, s=1024, h=4096, heads=16, kv=1, d=128, experts=128, top_k=8, ffn=1536, ep=8)
    for name, blk, s, f in (("attention", attn, 4096, attn.attention), ("moe", moe, 1024, moe.moe)):
        x = torch.randn(1, s, 4096, device=DEV, dtype=torch.bfloat16, requires_grad=True)
        gy = torch.randn_like(x)

        def fwd():
            with torch.no_grad():
                return f(x)

        def fwd_bwd():
            f(x).backward(gy)

        e_f = median_time(fwd, 20)
        e_fb = median_time(fwd_bwd, 20)
        g_fb, how = timed(fwd_bwd, 1)
        rows.append(("qwen3-235b-a22b tp4 ep8", name, s, e_f, e_fb, g_fb))
        print(f"qwen3-235b {name:9s} ({s} tokens): fwd {e_f*1e3:7.3f} ms eager, fwd+bwd {e_fb*1e3:7.3f} ms"
              f" eager / {g_fb*1e3:7.3f} ms {how}", flush=True)
    write("qwen235_block.csv", ["plan", "part", "tokens", "fwd_eager_s", "fwd_bwd_eager_s", "fwd_bwd_graph_s"], rows)


if __name__ == "__main__":
    print(torch.__version__, torch.cuda.get_device_name(), flush=True)
    run_parts({"window": window_part, "mla": mla_part, "adam": adam_part, "loss": loss_part,
               "mptblock": mptblock_part, "llamablock": llamablock_part, "qwen235": qwen235_part},
              ["mla", "adam", "loss", "window", "mptblock", "llamablock", "qwen235"])
