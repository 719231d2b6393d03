//! FLOP conventions for MFU/HFU.
//!
//! **Model FLOPs** per token = `3 · (G + 2·A)`, where `G` is the forward matmul FLOPs per token
//! of every layer (attention projections, MLP or the `top_k` routed + shared experts and the
//! router, the LM head; the embedding lookup is not a matmul) and `A` the causal attention-core
//! FLOPs per token from the graph (`QKᵀ` + `AV` over `s/2` keys on average). The factor 3 is
//! forward + backward (2×); `2·A` counts the full `s×s` score matrix as Megatron, NeMo and
//! PaLM's MFU do. For a GPT (MHA, 4h GELU MLP, tied head) this is exactly Megatron's
//! `72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h))` per step (Narayanan et al. 2021, eq. 3 without
//! recompute; the test `gpt_model_flops_match_megatron` checks it), i.e. `6·N_matmul + 12·l·h·s`.
//!
//! **Hardware FLOPs** add what is recomputed: full recompute re-runs every block's forward
//! (`G_blocks + 2·A`, giving Megatron's `96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))`), selective
//! recompute re-runs the attention core (`2·A`, Korthikanti et al. 2022 §5) and the matmuls of
//! the other modules it names (`mla_up_proj`: `q_b`, `kv_b`; `mlp`: the dense MLPs; `moe`: the
//! MoE layers; `shared_experts`: the shared experts; norms and activation functions are not
//! matmuls).

use autoplan_graph::{LayerKind, ModelSpec, TpSplit};
use autoplan_plan::RecomputeModules;
use serde::Serialize;

/// FLOPs per token of one model (forward, in the conventions above).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ModelFlops {
    /// Forward matmul FLOPs per token, every layer (MTP modules included).
    pub gemm_fwd: f64,
    /// Forward matmul FLOPs per token of the transformer blocks (and MTP modules) only.
    pub gemm_fwd_blocks: f64,
    /// Causal attention-core FLOPs per token (forward).
    pub attn_fwd_causal: f64,
    /// Forward matmul FLOPs per token of MLA's up-projections (`q_b`, `kv_b`), all blocks.
    pub mla_up_fwd: f64,
    /// Of the dense MLP layers, the MoE layers, and the MoE layers' shared experts.
    pub dense_mlp_fwd: f64,
    pub moe_fwd: f64,
    pub shared_experts_fwd: f64,
}

impl ModelFlops {
    pub fn of(model: &ModelSpec) -> ModelFlops {
        let mut f = ModelFlops {
            gemm_fwd: 0.0,
            gemm_fwd_blocks: 0.0,
            attn_fwd_causal: 0.0,
            mla_up_fwd: 0.0,
            dense_mlp_fwd: 0.0,
            moe_fwd: 0.0,
            shared_experts_fwd: 0.0,
        };
        for l in model.layers() {
            f.gemm_fwd += l.gemm_flops_per_token;
            f.attn_fwd_causal += l.attn_core_flops_per_token;
            match l.kind {
                LayerKind::Attention => {
                    f.mla_up_fwd += l
                        .gemms
                        .iter()
                        .filter(|g| matches!(g.name, "q_b" | "kv_b"))
                        .map(|g| g.flops_per_token())
                        .sum::<f64>();
                }
                LayerKind::DenseMlp => f.dense_mlp_fwd += l.gemm_flops_per_token,
                LayerKind::Moe => {
                    f.moe_fwd += l.gemm_flops_per_token;
                    f.shared_experts_fwd += l
                        .gemms
                        .iter()
                        .filter(|g| g.count == 1 && g.split != TpSplit::Replicated)
                        .map(|g| g.flops_per_token())
                        .sum::<f64>();
                }
                _ => {}
            }
            if matches!(
                l.kind,
                LayerKind::Attention | LayerKind::DenseMlp | LayerKind::Moe | LayerKind::Mtp
            ) {
                f.gemm_fwd_blocks += l.gemm_flops_per_token;
            }
        }
        f
    }

    /// Model FLOPs per token (forward + backward): `3 · (G + 2A)`.
    pub fn model_per_token(&self) -> f64 {
        3.0 * (self.gemm_fwd + 2.0 * self.attn_fwd_causal)
    }

    /// Extra FLOPs per token recomputed when `fraction` of the blocks are fully recomputed.
    pub fn full_recompute_per_token(&self, fraction: f64) -> f64 {
        fraction * (self.gemm_fwd_blocks + 2.0 * self.attn_fwd_causal)
    }

    /// Extra FLOPs per token recomputed by selective recompute of `modules` (module docs).
    pub fn selective_recompute_per_token(&self, modules: RecomputeModules, fraction: f64) -> f64 {
        let on = |b: u8, v: f64| if modules.has(b) { v } else { 0.0 };
        let moe = if modules.has(RecomputeModules::MOE) {
            self.moe_fwd
        } else {
            on(RecomputeModules::SHARED_EXPERTS, self.shared_experts_fwd)
        };
        fraction
            * (on(RecomputeModules::CORE_ATTN, 2.0 * self.attn_fwd_causal)
                + on(RecomputeModules::MLA_UP_PROJ, self.mla_up_fwd)
                + on(RecomputeModules::MLP, self.dense_mlp_fwd)
                + moe)
    }
}
