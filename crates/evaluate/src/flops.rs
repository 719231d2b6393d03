//! FLOP conventions for MFU/HFU.
//!
//! **Model FLOPs** per token = `3 · (G + c·A)`, where `G` is the forward matmul FLOPs per token
//! of every layer (attention projections, MLP or the `top_k` routed + shared experts and the
//! router, the LM head; the embedding lookup is not a matmul) and `A` the causal attention-core
//! FLOPs per token from the graph (`QKᵀ` + `AV` over `s/2` keys on average, a sliding window's
//! keys where the block has one). The factor 3 is forward + backward (2×).
//!
//! `c` is the [`AttentionFlops`] convention. **Causal (`c = 1`, the default)**: only the
//! unmasked half of the `s×s` score and context GEMMs, which is what a causal kernel runs and
//! what the evaluator prices, so MFU and HFU never exceed 1. It is Megatron-LM's
//! `num_floating_point_operations` since 2025 ("only half of the attention matrix is non-zero
//! and needs to be multiplied with V", `megatron/training/training.py`; the released
//! Megatron-Bridge 25.11 and MoE ModelZoo figures reproduce with it:
//! `crates/graph/tests/bundled.rs::moe_flops_match_megatron_model_flops_of_published_runs`).
//! **Full (`c = 2`)**: the whole `s×s` matrix, as Narayanan et al. 2021 eq. 3 (Megatron's
//! `72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h))`), Megatron-LM before 2025, NeMo 24.07
//! (`crates/evaluate/tests/published.rs::nemo_model_flops_per_token_match_the_rows`) and
//! PaLM's `6N + 12·L·H·Q·T` (Chowdhery et al. 2022, App. B) count it; a published row that
//! declares it is scored in it ([`AttentionFlops::of_row`]). For a GPT (MHA, 4h GELU MLP, tied
//! head) the full count is exactly Megatron's formula (the test `gpt_model_flops_match_megatron`).
//!
//! **Hardware FLOPs** add what is recomputed, in the same convention: full recompute re-runs
//! every block's forward (`G_blocks + c·A`; with `c = 2` Megatron's
//! `96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))`), selective recompute re-runs the attention core
//! (`c·A`, Korthikanti et al. 2022 §5) and the matmuls of the other modules it names
//! (`mla_up_proj`: `q_b`, `kv_b`; `mlp`: the dense MLPs; `moe`: the MoE layers;
//! `shared_experts`: the shared experts; norms and activation functions are not matmuls).

use autoplan_graph::{LayerKind, ModelSpec, TpSplit};
use autoplan_plan::RecomputeModules;
use serde::Serialize;

/// How a FLOP count counts the attention core's score (`QKᵀ`) and context (`AV`) GEMMs of a
/// causal model (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AttentionFlops {
    /// The unmasked half: what the kernels run (autoplan's own figures).
    #[default]
    Causal,
    /// The whole `s×s` matrix (Megatron's `s/(6h)` term, PaLM's `12·L·H·Q·T`).
    Full,
    /// Not counted: `6·N` FLOPs per token and parameter (Kaplan et al. 2020 §2.1, whose
    /// `C ≈ 6N` leaves out the context-dependent attention term; the `6ND` of Hoffmann et al.
    /// 2022's budgets), a row that declares it is scored in it ([`AttentionFlops::of_row`]).
    Excluded,
}

impl AttentionFlops {
    /// Multiple of the causal attention-core FLOPs the convention counts.
    pub fn factor(self) -> f64 {
        match self {
            AttentionFlops::Causal => 1.0,
            AttentionFlops::Full => 2.0,
            AttentionFlops::Excluded => 0.0,
        }
    }

    /// The convention a published row declares: its `tflops_convention` cell when it names
    /// one (`full` / `causal`, e.g. `model (full attention)`; `6N`, or attention excluded),
    /// else its notes when they give the formula the source used (Megatron's `72·B·s·l·h²` /
    /// `96·B·s·l·h²` formulas or their `s/6h` term count the full matrix; `s/12h` or "causal"
    /// the half; `6ND` / `6N` per token, or the attention term excluded, none), else `None`.
    /// A note that counts the attention term in ("incl. attention term") declares nothing.
    pub fn of_row(convention: &str, notes: &str) -> Option<AttentionFlops> {
        let squash = |t: &str| {
            t.to_ascii_lowercase()
                .chars()
                .filter(|c| !matches!(c, ' ' | '*' | '·' | '^' | '×' | '(' | ')'))
                .collect::<String>()
        };
        // "6N" / "6ND" alone (also written `6·N·D`, `6*N*D`; not `6N + 12·L·H·Q·T`, PaLM's
        // count with the attention term) and the attention term said to be left out.
        let excludes = |text: &str| {
            let t: Vec<char> = text
                .to_ascii_lowercase()
                .chars()
                .filter(|c| !matches!(c, '·' | '*' | '×'))
                .collect();
            let skip = |mut j: usize| {
                while t.get(j) == Some(&' ') {
                    j += 1;
                }
                j
            };
            let six_n = (0..t.len()).any(|i| {
                if t[i] != '6' || i > 0 && t[i - 1].is_ascii_alphanumeric() {
                    return false;
                }
                let j = skip(i + 1);
                if t.get(j) != Some(&'n') {
                    return false;
                }
                let mut k = j + 1;
                if t.get(skip(k)) == Some(&'d') {
                    k = skip(k) + 1;
                }
                // Alone: not `6n + 12·l·h·q·t`, not `6 nodes`.
                let next = t.get(k);
                let after = t.get(skip(k));
                !next.is_some_and(char::is_ascii_alphanumeric) && after != Some(&'+')
            });
            let words = squash(text).replace(['.', '-', '_'], "");
            six_n
                || [
                    "exclattention",
                    "excludingattention",
                    "excludesattention",
                    "withoutattention",
                    "noattentionterm",
                    "attentionnotcounted",
                    "attentionexcluded",
                ]
                .iter()
                .any(|w| words.contains(w))
        };
        let cell = convention.to_ascii_lowercase();
        if cell.contains("full") {
            return Some(AttentionFlops::Full);
        }
        if cell.contains("causal") {
            return Some(AttentionFlops::Causal);
        }
        if excludes(&cell) {
            return Some(AttentionFlops::Excluded);
        }
        let n = squash(notes);
        if ["72bslh2", "96bslh2", "s/6h", "12lhqt"]
            .iter()
            .any(|f| n.contains(f))
        {
            Some(AttentionFlops::Full)
        } else if n.contains("s/12h") || n.contains("causalattentionflops") {
            Some(AttentionFlops::Causal)
        } else if excludes(notes) {
            Some(AttentionFlops::Excluded)
        } else {
            None
        }
    }
}

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

    /// Model FLOPs per token (forward + backward): `3 · (G + c·A)` in convention `conv`.
    pub fn model_per_token(&self, conv: AttentionFlops) -> f64 {
        3.0 * (self.gemm_fwd + conv.factor() * self.attn_fwd_causal)
    }

    /// Extra FLOPs per token recomputed when `fraction` of the blocks are fully recomputed.
    pub fn full_recompute_per_token(&self, fraction: f64, conv: AttentionFlops) -> f64 {
        fraction * (self.gemm_fwd_blocks + conv.factor() * self.attn_fwd_causal)
    }

    /// Extra FLOPs per token recomputed by selective recompute of `modules` (module docs).
    pub fn selective_recompute_per_token(
        &self,
        modules: RecomputeModules,
        fraction: f64,
        conv: AttentionFlops,
    ) -> f64 {
        let on = |b: u8, v: f64| if modules.has(b) { v } else { 0.0 };
        let moe = if modules.has(RecomputeModules::MOE) {
            self.moe_fwd
        } else {
            on(RecomputeModules::SHARED_EXPERTS, self.shared_experts_fwd)
        };
        fraction
            * (on(
                RecomputeModules::CORE_ATTN,
                conv.factor() * self.attn_fwd_causal,
            ) + on(RecomputeModules::MLA_UP_PROJ, self.mla_up_fwd)
                + on(RecomputeModules::MLP, self.dense_mlp_fwd)
                + moe)
    }
}

#[cfg(test)]
mod tests {
    use super::AttentionFlops::{self, Causal, Excluded, Full};

    #[test]
    fn a_row_declares_its_attention_convention() {
        let of = AttentionFlops::of_row;
        // The cell.
        assert_eq!(of("model (full attention)", ""), Some(Full));
        assert_eq!(of("model, causal", ""), Some(Causal));
        assert_eq!(of("6N", ""), Some(Excluded));
        assert_eq!(of("model (6ND)", ""), Some(Excluded));
        assert_eq!(of("model, attention excluded", ""), Some(Excluded));
        // The notes.
        assert_eq!(
            of("model", "MFU = 72·B·s·l·h²(1 + s/6h + V/12lh)"),
            Some(Full)
        );
        assert_eq!(of("model", "PaLM's 6N + 12·L·H·Q·T per token"), Some(Full));
        assert_eq!(
            of("model", "MFU computed as 6·N·D / (time · peak)"),
            Some(Excluded)
        );
        assert_eq!(
            of("model", "TFLOP/s per 6N FLOPs per token"),
            Some(Excluded)
        );
        assert_eq!(
            of("model", "model FLOPs excluding attention"),
            Some(Excluded)
        );
        // Nothing declared: an attention term counted in, a node count, a larger number.
        assert_eq!(
            of(
                "model",
                "'Model TFLOP' column = model FLOPs incl. attention term."
            ),
            None
        );
        assert_eq!(of("model", "trained on 6 nodes of 8 GPUs"), None);
        assert_eq!(of("model", "16N tokens; 96 nodes"), None);
        assert_eq!(of("model", ""), None);
        assert_eq!(Excluded.factor(), 0.0);
    }
}
