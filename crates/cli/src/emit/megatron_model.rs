//! The Megatron-LM flags of the model itself (what `--emit megatron` leaves to the user's
//! launch script) and the training precision, so that an export can be fed whole to
//! Megatron's own argument checks (`tools/megatron_check`): `parse_args` + `validate_args`
//! (`megatron/training/arguments.py`) and `TransformerConfig.__post_init__`.
//!
//! Flag names: Megatron-Core 0.19 `arguments.py` (frameworks.md §1.0 flag table; the MoE and
//! MLA flags §1.6, the FP8/FP4 flags §1.8).

use autoplan_cluster::Precision;
use autoplan_graph::{Attention, Mlp, ModelSpec, Norm, Positions};

/// The model's architecture and precision flags. `None` for an architecture Megatron-LM's
/// GPT model has no flags for (sliding windows, parallel blocks, squared-ReLU or ReLU MLPs).
pub fn model_args(model: &ModelSpec) -> Option<Vec<String>> {
    if model.window.is_some() || model.parallel_block {
        return None;
    }
    let mut a: Vec<String> = Vec::new();
    let mut kv = |k: &str, v: u32| {
        a.push(k.to_string());
        a.push(v.to_string());
    };
    kv("--num-layers", model.layers);
    kv("--hidden-size", model.hidden);
    kv("--ffn-hidden-size", model.ffn_hidden);
    kv("--num-attention-heads", model.heads);
    kv(
        "--max-position-embeddings",
        model.max_positions.max(model.training.seq_len),
    );
    kv("--vocab-size", model.vocab);
    match model.attention {
        Attention::Gqa { kv_heads, head_dim } => {
            kv("--kv-channels", head_dim);
            if kv_heads != model.heads {
                a.push("--group-query-attention".into());
                a.push("--num-query-groups".into());
                a.push(kv_heads.to_string());
            }
        }
        Attention::Mla {
            q_lora_rank,
            kv_lora_rank,
            qk_nope_head_dim,
            qk_rope_head_dim,
            v_head_dim,
        } => {
            a.push("--multi-latent-attention".into());
            if let Some(q) = q_lora_rank {
                a.push("--q-lora-rank".into());
                a.push(q.to_string());
            }
            for (k, v) in [
                ("--kv-lora-rank", kv_lora_rank),
                ("--qk-head-dim", qk_nope_head_dim),
                ("--qk-pos-emb-head-dim", qk_rope_head_dim),
                ("--v-head-dim", v_head_dim),
            ] {
                a.push(k.into());
                a.push(v.to_string());
            }
        }
    }
    match model.mlp {
        Mlp::Swiglu => a.push("--swiglu".into()),
        Mlp::Gelu => {}
        _ => return None,
    }
    if model.norm == Norm::RmsNorm {
        a.push("--normalization".into());
        a.push("RMSNorm".into());
    }
    match model.positions {
        Positions::Rope => {
            a.push("--position-embedding-type".into());
            a.push("rope".into());
        }
        Positions::Learned => {}
        _ => return None,
    }
    if !model.tied_embeddings {
        a.push("--untie-embeddings-and-output-weights".into());
    }
    if !model.bias {
        a.push("--disable-bias-linear".into());
    }
    if let Some(moe) = &model.moe {
        a.push("--num-experts".into());
        a.push(moe.experts.to_string());
        a.push("--moe-router-topk".into());
        a.push(moe.top_k.to_string());
        a.push("--moe-ffn-hidden-size".into());
        a.push(moe.expert_ffn_hidden.to_string());
        if moe.shared_experts > 0 {
            a.push("--moe-shared-expert-intermediate-size".into());
            a.push((moe.shared_ffn_hidden * moe.shared_experts).to_string());
        }
        if moe.first_dense_layers > 0 {
            // `--moe-layer-freq` as a Python list expression: the first blocks dense.
            a.push("--moe-layer-freq".into());
            a.push(format!(
                "[0]*{}+[1]*{}",
                moe.first_dense_layers,
                model.layers - moe.first_dense_layers
            ));
        }
        a.push("--moe-grouped-gemm".into());
    }
    if model.mtp_modules > 0 {
        a.push("--mtp-num-layers".into());
        a.push(model.mtp_modules.to_string());
    }
    // Precision: BF16/FP16 training, the FP8 recipes on BF16 (`--fp8-format hybrid
    // --fp8-recipe …`), NVFP4 by `--fp4-format` (frameworks.md §1.8).
    let p = model.training.precision;
    match p {
        Precision::Fp16 => a.push("--fp16".into()),
        Precision::Fp32 | Precision::Tf32 => {}
        _ => a.push("--bf16".into()),
    }
    let recipe = match p {
        Precision::Fp8 => Some("delayed"),
        Precision::Fp8Current => Some("tensorwise"),
        Precision::Fp8Block => Some("blockwise"),
        Precision::Mxfp8 => Some("mxfp8"),
        _ => None,
    };
    if let Some(r) = recipe {
        a.extend(["--fp8-format", "hybrid", "--fp8-recipe", r].map(String::from));
    }
    if p == Precision::Nvfp4 {
        a.extend(["--fp4-format", "e2m1", "--fp4-recipe", "nvfp4"].map(String::from));
    }
    Some(a)
}
