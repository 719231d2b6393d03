#!/usr/bin/env python3
"""Write to stdout a CSV of variants of public rows whose cells are written as other tables write
them: numbers with thousands grouping, zero fractions, `~`, `n/a`; other spellings of GPUs,
models, precisions, sharding and recompute; a blank `cp`, GB200 node sizes. Each variant changes
one row of `data/published_runs*.csv` in one or two cells; its id says which. It checks that
`autoplan validate` reads what held-out rows may write (a variant's error is not meaningful: a
changed GPU or model is still compared with the original row's measurement).

    python3 tools/cell_variants.py > /tmp/variants.csv
    autoplan validate --runs /tmp/variants.csv
"""

import csv
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data")


def rows(name):
    with open(os.path.join(DATA, name), newline="") as f:
        return list(csv.DictReader(f))


def main():
    first = rows("published_runs.csv")
    second = rows("published_runs_2.csv")
    header = list(first[0].keys())
    by_id = {r["id"]: r for r in first + second}
    out = []

    def v(base, name, **cells):
        r = dict(by_id[base])
        r["id"] = name
        r.update(cells)
        out.append(r)

    shape = ["params_b", "layers", "hidden", "ffn_hidden", "heads", "kv_heads", "vocab",
             "moe_experts", "moe_topk", "moe_shared_experts", "moe_ffn_hidden"]

    def named(base, name):
        r = dict(by_id[base])
        r["id"] = "model:" + name
        r["model"] = name
        for c in shape:
            r[c] = ""
        out.append(r)

    l70 = "nemo2407_h100_LLAMA3-70B_64gpu"
    # Numbers and "no value" spellings.
    for name, cells in [
        ("seq_float", {"seq_len": "8192.0"}),
        ("seq_8k", {"seq_len": "8K"}),
        ("ep_na", {"ep": "n/a"}),
        ("ep_dash", {"ep": "-"}),
        ("vpp_na", {"vpp": "N/A"}),
        ("etp_nan", {"etp": "nan"}),
        ("cp_blank", {"cp": ""}),
        ("mbs_float", {"micro_batch": "1.0"}),
        ("gb_grouped", {"global_batch": "1,024"}),
        ("meas_tilde", {"measured_tokens_per_s_per_gpu": "~1524"}),
        ("meas_grouped", {"measured_tokens_per_s_per_gpu": "1,524"}),
        ("gpn_na", {"gpus_per_node": "n/a"}),
        ("sp_degree_tp", {"sp": "4"}),
        ("sp_degree_cp", {"sp": "2 (Ulysses)", "cp": ""}),
    ]:
        v(l70, "cell:" + name, **cells)
    for g in ["NVIDIA H100 80GB HBM3", "H100 SXM5 80GB", "DGX H100", "H100 (SXM)", "8x H100 SXM",
              "H100 80G", "H100 NVL", "H100 PCIe", "GH200", "H200 SXM 141GB", "B200",
              "A100-SXM-80GB", "H800", "MI300X", "H100 SXM5 (Eos)"]:
        v(l70, "gpu:" + g, gpu=g)
    for p in ["BF16", "bf16 mixed", "FP8 (delayed scaling)", "fp8-hybrid", "FP8 E4M3",
              "FP8 current scaling", "fp8 blockwise", "FP8-CS", "FP8-DS", "Transformer Engine FP8",
              "fp16 mixed", "bfloat16", "NVFP4", "n/a"]:
        v(l70, "precision:" + p, precision=p)
    for z in ["ZeRO-1", "ZeRO stage 1", "zero1", "distributed optimizer (ZeRO-1)", "dist-opt",
              "--use-distributed-optimizer", "ZeRO-2", "FSDP", "FULL_SHARD", "SHARD_GRAD_OP",
              "HYBRID_SHARD", "NO_SHARD", "Megatron DDP", "DP (no sharding)", "n/a"]:
        v(l70, "zero:" + z, zero_stage=z)
    for rc in ["full", "selective", "none", "full (uniform)", "selective (core attention)",
               "core_attn", "activation checkpointing", "AC: full", "partial",
               "selective + CPU offload", "block, 4 layers", "None (no recomputation)",
               "layernorm, moe_act", "n/a"]:
        v(l70, "recompute:" + rc, recompute=rc)
    # Model names, the shape columns blank.
    for n in ["Llama 3 70B", "Meta-Llama-3-70B", "llama3_70b", "Llama 3.1 70B",
              "Llama-3.1-70B-Instruct", "LLAMA3.1-70B"]:
        named(l70, n)
    for n in ["GPT-3 175B", "gpt3_175b", "GPT-3 (175B)", "GPT 175B"]:
        named("nemo2407_h100_GPT3-175B_512gpu", n)
    for n in ["Mixtral 8x7B", "Mixtral-8x7B-v0.1"]:
        named("mcore08_mixtral8x7b_64xH100", n)
    for n in ["Llama-2-70b-hf", "LLaMA2 70B", "Llama 2 (70B)"]:
        named("nemo2407_h100_LLAMA2-70B_64gpu", n)
    for n in ["Qwen3-235B-A22B", "Qwen3 235B", "Qwen3-235B"]:
        named("mzoo_h100_Qwen3_235B_a22B_xnode_ep32", n)
    for n in ["Nemotron-4 340B", "Nemotron-4-340B-Base"]:
        named("nemo2407_h100_Nemotron-340B_128gpu", n)
    # Grace-Blackwell node sizes and GPU names.
    gb = "bridge2511_gb200_LLAMA3_70B_64gpu_fp8"
    for g in ["4", "72", "8", ""]:
        v(gb, "gpus_per_node:" + g, gpus_per_node=g)
    for g in ["GB200 NVL72", "NVIDIA GB200 NVL72 (Grace Blackwell)", "GB300 NVL72", "B300"]:
        v(gb, "gpu:" + g, gpu=g, gpus_per_node="")

    w = csv.DictWriter(sys.stdout, fieldnames=header, lineterminator="\n")
    w.writeheader()
    w.writerows(out)


if __name__ == "__main__":
    main()
