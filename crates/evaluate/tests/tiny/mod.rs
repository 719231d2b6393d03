//! The tiny models the evaluator's hand-checked tests share (`evaluate.rs`, `mechanisms.rs`).
#![allow(dead_code)]

use autoplan_cluster::Precision;
use autoplan_graph::{
    Attention, Family, Mlp, ModelSpec, Moe, Norm, Optimizer, Positions, Routing, Training,
};

/// GPT-style: 2 blocks, h 512, 8 heads of 64, GELU 4h, vocab 1024, seq 512, tied.
pub fn tiny_gpt() -> ModelSpec {
    ModelSpec {
        name: "tiny-gpt".into(),
        family: Family::Gpt,
        layers: 2,
        hidden: 512,
        heads: 8,
        attention: Attention::Gqa {
            kv_heads: 8,
            head_dim: 64,
        },
        window: None,
        ffn_hidden: 2048,
        mlp: Mlp::Gelu,
        norm: Norm::LayerNorm,
        positions: Positions::Learned,
        max_positions: 512,
        vocab: 1024,
        tied_embeddings: true,
        bias: true,
        embedding_norm: false,
        parallel_block: false,
        moe: None,
        mtp_modules: 0,
        training: Training {
            seq_len: 512,
            global_batch: 32,
            precision: Precision::Bf16,
            optimizer: Optimizer::Adam,
            tokens: None,
        },
    }
}

/// Llama-style MoE: 4 blocks (first dense), 16 experts of 512, top-2, h 1024, seq 1024.
pub fn tiny_moe() -> ModelSpec {
    ModelSpec {
        name: "tiny-moe".into(),
        family: Family::Mixtral,
        layers: 4,
        hidden: 1024,
        heads: 16,
        attention: Attention::Gqa {
            kv_heads: 4,
            head_dim: 64,
        },
        window: None,
        ffn_hidden: 4096,
        mlp: Mlp::Swiglu,
        norm: Norm::RmsNorm,
        positions: Positions::Rope,
        max_positions: 0,
        vocab: 2048,
        tied_embeddings: false,
        bias: false,
        embedding_norm: false,
        parallel_block: false,
        moe: Some(Moe {
            experts: 16,
            top_k: 2,
            shared_experts: 0,
            expert_ffn_hidden: 512,
            shared_ffn_hidden: 0,
            first_dense_layers: 1,
            routing: Routing::TopK,
            capacity_factor: None,
            load_imbalance: 1.2,
            groups: 1,
            group_top_k: 1,
        }),
        mtp_modules: 0,
        training: Training {
            seq_len: 1024,
            global_batch: 64,
            precision: Precision::Bf16,
            optimizer: Optimizer::Adam,
            tokens: None,
        },
    }
}

/// `a` within `rel` of `b`.
pub fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs().max(1e-30)
}
