//! The per-model constants: [`ModelMemory::new`] and its steps (attention, dense MLP, MoE,
//! bytes per parameter), each from the model's fields alone.

use autoplan_graph::{Attention, ModelSpec, Norm, Optimizer, Positions, Precision};

use crate::{Acts, ModelMemory, Params, B16};

/// Weights of one MLP of width `f`: (matrices, column biases, row bias).
fn mlp_params(m: &ModelSpec, f: f64) -> (f64, f64, f64) {
    let h = m.hidden as f64;
    let k = m.mlp.input_matrices() as f64;
    let (mats, col_bias) = ((k + 1.0) * h * f, k * f);
    if m.bias {
        (mats, col_bias, h)
    } else {
        (mats, 0.0, 0.0)
    }
}

/// Inner activation bytes per token of one MLP of width `f` (graph crate's convention: GELU
/// stores its input and output, SwiGLU gate, up and their product).
fn mlp_inner(m: &ModelSpec, f: f64) -> f64 {
    B16 * f * (m.mlp.input_matrices() + 1) as f64
}

fn norm(m: &ModelSpec, w: f64) -> f64 {
    match m.norm {
        Norm::LayerNorm => 2.0 * w,
        Norm::RmsNorm => w,
    }
}

/// The attention node's constants (graph crate `attention_layer`, split by TP).
struct AttnConsts {
    params: Params,
    act: Acts,
    /// The output projection's weights (seed 001 replicates it).
    out: f64,
    kv_heads: f64,
    /// MLA's up-projected `Q`, `K`, `V` per token (0 for GQA).
    mla_qkv: f64,
}

/// The MoE block's constants; a dense model's are zero (load factor 1).
struct MoeConsts {
    fixed: Params,
    act: Acts,
    experts: f64,
    top_k: f64,
    load_factor: f64,
    routed_in: f64,
    routed_inner: f64,
    routed_inner_lin: f64,
}

/// Attention parameters and activations; `drop` is one dropout mask per token (`h` bytes
/// with dropout, else 0).
fn attention(m: &ModelSpec, dropout: bool, drop: f64) -> AttnConsts {
    let h = m.hidden as f64;
    let a = m.heads as f64;
    let mut attn = Params {
        replicated: norm(m, h),
        ..Params::default()
    };
    // Norm input and projection input (Korthikanti: 2sbh each), output dropout mask.
    let mut attn_act = Acts {
        seq: 2.0 * B16 * h + drop,
        lin_seq: B16 * h,
        ..Acts::default()
    };
    let attn_out;
    let kv_heads;
    let mut mla_qkv = 0.0;
    match m.attention {
        Attention::Gqa {
            kv_heads: g,
            head_dim: d,
        } => {
            let (g, d) = (g as f64, d as f64);
            kv_heads = g;
            attn.split = 2.0 * h * a * d; // q, o
            attn.kv = 2.0 * h * g * d;
            if m.bias {
                attn.split += a * d;
                attn.kv += 2.0 * g * d;
                attn.replicated += h;
            }
            attn_out = a * d * h;
            attn_act.split = B16 * 2.0 * a * d; // Q, o input
            attn_act.lin_split = B16 * a * d;
            attn_act.kv = B16 * 2.0 * g * d; // K, V
        }
        Attention::Mla {
            q_lora_rank,
            kv_lora_rank,
            qk_nope_head_dim,
            qk_rope_head_dim,
            v_head_dim,
        } => {
            kv_heads = a;
            let (rkv, dn, dr, dv) = (
                kv_lora_rank as f64,
                qk_nope_head_dim as f64,
                qk_rope_head_dim as f64,
                v_head_dim as f64,
            );
            let dqk = dn + dr;
            match q_lora_rank {
                Some(rq) => {
                    let rq = rq as f64;
                    attn.replicated += h * rq + norm(m, rq);
                    attn.split += rq * a * dqk;
                    attn_act.seq += B16 * 2.0 * rq; // q_a output, q_b input
                    attn_act.lin_seq += B16 * rq;
                }
                None => attn.split += h * a * dqk,
            }
            attn.replicated += h * (rkv + dr) + norm(m, rkv);
            attn.split += rkv * a * (dn + dv) + a * dv * h;
            if m.bias {
                attn.replicated += h;
            }
            attn_out = a * dv * h;
            attn_act.seq += B16 * (rkv + dr + rkv); // kv_a output, kv_b input
            attn_act.lin_seq += B16 * rkv;
            attn_act.split = B16 * (2.0 * a * dqk + 2.0 * a * dv); // Q, K, V, o input
            mla_qkv = B16 * (2.0 * a * dqk + a * dv);
            attn_act.lin_split = B16 * a * dv;
        }
    }
    // Softmax output (2 bytes), with dropout its mask (1) and output (2): 5·a·s.
    attn_act.scores = a * m.training.seq_len as f64 * if dropout { 5.0 } else { 2.0 };
    AttnConsts {
        params: attn,
        act: attn_act,
        out: attn_out,
        kv_heads,
        mla_qkv,
    }
}

/// The dense MLP's parameters and activations.
fn dense_mlp(m: &ModelSpec, drop: f64) -> (Params, Acts) {
    let h = m.hidden as f64;
    let (mats, col_bias, row_bias) = mlp_params(m, m.ffn_hidden as f64);
    let mlp = Params {
        split: mats + col_bias,
        replicated: row_bias + norm(m, h),
        kv: 0.0,
    };
    // A parallel block's MLP norm reads the block input the attention already stores (graph
    // crate `dense_mlp_layer`).
    let norm_in = if m.parallel_block { 0.0 } else { B16 * h };
    let mlp_act = Acts {
        seq: norm_in + B16 * h + drop,
        split: mlp_inner(m, m.ffn_hidden as f64),
        lin_seq: B16 * h,                     // fc1 input
        lin_split: B16 * m.ffn_hidden as f64, // fc2 input
        ..Acts::default()
    };
    (mlp, mlp_act)
}

/// The MoE block's parameters and activations (all zero, load factor 1, without MoE).
fn moe(m: &ModelSpec, drop: f64) -> MoeConsts {
    let h = m.hidden as f64;
    let mut c = MoeConsts {
        fixed: Params::default(),
        act: Acts::default(),
        experts: 0.0,
        top_k: 0.0,
        load_factor: 1.0,
        routed_in: 0.0,
        routed_inner: 0.0,
        routed_inner_lin: 0.0,
    };
    if let Some(moe) = &m.moe {
        let e = moe.experts as f64;
        let (sm, sc, sr) = mlp_params(m, moe.shared_ffn_hidden as f64);
        let shared = moe.shared_experts as f64;
        c.fixed = Params {
            split: shared * (sm + sc),
            replicated: norm(m, h) + h * e + shared * sr,
            kv: 0.0,
        };
        let (em, ec, er) = mlp_params(m, moe.expert_ffn_hidden as f64);
        c.experts = e * (em + ec + er);
        c.top_k = moe.expected_experts_per_token();
        c.load_factor = moe.capacity_factor.unwrap_or(moe.load_imbalance).max(1.0);
        // Norm input and output (router and shared-expert input), fp32 router logits.
        c.act = Acts {
            seq: 2.0 * B16 * h + 4.0 * e + drop,
            split: shared * mlp_inner(m, moe.shared_ffn_hidden as f64),
            lin_seq: B16 * h, // shared experts' fc1 input
            lin_split: shared * B16 * moe.shared_ffn_hidden as f64,
            ..Acts::default()
        };
        c.routed_in = c.top_k * B16 * h;
        c.routed_inner = c.top_k * mlp_inner(m, moe.expert_ffn_hidden as f64);
        c.routed_inner_lin = c.top_k * B16 * moe.expert_ffn_hidden as f64;
    }
    c
}

/// (16-bit or fp32 weight bytes, optimizer bytes per parameter beyond the fp32
/// master-gradient copy: the fp32 master weights of 16-bit training plus the states).
fn bytes_per_param(m: &ModelSpec) -> (f64, f64) {
    let (weight_bytes, master) = match m.training.precision {
        Precision::Fp32 | Precision::Tf32 => (4.0, 0.0),
        // Low-precision recipes (FP8, MXFP8, NVFP4) keep 16-bit weights and fp32 masters:
        // Transformer Engine casts per GEMM (`--fp8-param-gather` is not modelled).
        _ => (2.0, 4.0),
    };
    let states = match m.training.optimizer {
        Optimizer::Adam => 8.0,
        // Two BF16 moments (DeepSeek-V3 §3.3.3).
        Optimizer::AdamBf16Moments => 4.0,
        Optimizer::Sgd => 4.0,
    };
    (weight_bytes, master + states)
}

impl ModelMemory {
    /// The per-model constants, from the model's fields alone (no allocation).
    pub fn new(m: &ModelSpec) -> ModelMemory {
        let h = m.hidden as f64;
        let dropout = m.dropout();
        let drop = if dropout { h } else { 0.0 };
        let attn = attention(m, dropout, drop);
        let (mlp, mlp_act) = dense_mlp(m, drop);
        let moe = moe(m, drop);
        let (weight_bytes, optimizer_bytes) = bytes_per_param(m);
        // Replicated on the first stage: the learned position table and BLOOM's embedding norm.
        let positions = match m.positions {
            Positions::Learned => m.max_positions as f64 * h,
            Positions::Rope | Positions::Alibi => 0.0,
        } + m.embedding_norm_params();
        ModelMemory {
            hidden: h,
            seq_len: m.training.seq_len as f64,
            vocab: m.vocab as f64,
            global_batch: m.training.global_batch as f64,
            blocks: m.layers,
            dense_blocks: m.dense_blocks(),
            mtp_modules: m.mtp_modules as f64,
            kv_heads: attn.kv_heads,
            tied: m.tied_embeddings,
            weight_bytes,
            optimizer_bytes,
            attn: attn.params,
            attn_out: attn.out,
            mlp,
            moe_fixed: moe.fixed,
            experts: moe.experts,
            expert_count: m.moe.as_ref().map_or(0.0, |x| x.experts as f64),
            positions,
            final_norm: norm(m, h),
            mtp_fixed: 2.0 * h * h + 3.0 * norm(m, h),
            // The MTP block is MoE in MoE models (graph crate `mtp_layer`).
            mtp_block_is_moe: m.moe.is_some(),
            attn_act: attn.act,
            mlp_act,
            moe_act: moe.act,
            moe_routed_in: moe.routed_in,
            moe_routed_inner: moe.routed_inner,
            top_k: moe.top_k,
            load_factor: moe.load_factor,
            dropout,
            dropout_bytes: drop,
            embedding_norm: m.embedding_norm,
            mla_qkv: attn.mla_qkv,
            // Every low-precision recipe stores its GEMM inputs at 1 byte, NVFP4 included (its
            // FP4 copy and block scales plus the 16-bit inputs its recipe keeps for the weight
            // gradient are not itemised: 1 byte is the FP8 figure, an upper bound for FP4).
            fp8: m.training.precision.is_low_precision(),
            moe_routed_inner_lin: moe.routed_inner_lin,
        }
    }
}
