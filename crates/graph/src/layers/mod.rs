//! Per-layer accounting: the nodes of the layer graph with their parameters, forward FLOPs per
//! token, stored activations and the tensors each parallelism communicates.
//!
//! Conventions (all per token of the forward pass, no hardware):
//! - parameters and element counts are `f64` (they exceed `u32`, and they are multiplied by
//!   fractional expert counts);
//! - a GEMM `x[in] · W[in×out]` costs `2·in·out` FLOPs (one multiply and one add per weight);
//!   backward is twice that, which is the cost model's business, not ours;
//! - attention core (QKᵀ and AV) is counted at `training.seq_len` with causal masking: a query
//!   attends on average to `s/2` keys, so QKᵀ costs `2·a·d_qk·s/2` and AV `2·a·d_v·s/2` FLOPs.
//!   (Megatron's `24·B·s·l·h²(1 + s/6h)` counts the full `s×s` score matrix; we halve it because
//!   causal kernels skip the masked half.) A sliding-window block (window `w < s`) attends on
//!   average to `w − w²/2s` keys (the first `w` queries see `i`, the rest `w`; continuous form,
//!   equal to `s/2` at `w = s`), so QKᵀ costs `2·a·d_qk·(w − w²/2s)`. The kernel's tile
//!   granularity (a 128-query tile touches two 128-key tiles at `w` = 128) is not counted.
//! - stored activations are bytes at 16-bit storage with 1-byte dropout masks, following
//!   Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models",
//!   §4.1: `34·s·b·h + 5·a·s²·b` bytes per GPT layer), split per node and generalised to GQA, MLA,
//!   SwiGLU and MoE below. Dropout masks exist only for the GPT family (Llama-era models train
//!   without dropout).

mod attention;
mod ends;
mod mlp;

use crate::{Attention, ModelSpec, Norm};

/// What a node of the layer graph is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LayerKind {
    /// Token embedding (plus the learned position table for GPT).
    Embedding,
    /// Pre-norm + self-attention (GQA/MHA or MLA) of one block.
    Attention,
    /// Pre-norm + dense MLP of one block.
    DenseMlp,
    /// Pre-norm + router + routed experts + shared experts of one block.
    Moe,
    /// Norm after the last block.
    FinalNorm,
    /// Output projection to the vocabulary (0 parameters when tied to the embedding).
    LmHead,
    /// Softmax cross-entropy over the vocabulary.
    CrossEntropy,
    /// One DeepSeek-V3 multi-token-prediction module (norms, 2h→h projection, one block, its
    /// own final norm; embedding and head shared with the main model).
    Mtp,
}

impl LayerKind {
    pub fn name(self) -> &'static str {
        match self {
            LayerKind::Embedding => "embedding",
            LayerKind::Attention => "attention",
            LayerKind::DenseMlp => "dense-mlp",
            LayerKind::Moe => "moe",
            LayerKind::FinalNorm => "final-norm",
            LayerKind::LmHead => "lm-head",
            LayerKind::CrossEntropy => "cross-entropy",
            LayerKind::Mtp => "mtp",
        }
    }
}

/// How Megatron-style tensor parallelism splits a weight matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TpSplit {
    /// Output features split (QKV, fc1, LM head over the vocabulary, embedding table rows).
    Column,
    /// Input features split (attention output projection, fc2); followed by an all-reduce.
    Row,
    /// Replicated on every TP rank (router, MLA down-projections).
    Replicated,
}

/// One weight matrix of a node and how many token rows it processes per input token.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Gemm {
    pub name: &'static str,
    pub in_features: u64,
    pub out_features: u64,
    /// Identical matrices in the node (the routed experts: `experts`; otherwise 1).
    pub count: u32,
    /// Token rows each matrix multiplies per token entering the node: 1 for dense layers,
    /// `expected_experts_per_token / experts` for one routed expert.
    pub rows_per_token: f64,
    pub split: TpSplit,
    /// The weights are a parameter of this node (false for an LM head tied to the embedding).
    pub owns_weights: bool,
}

impl Gemm {
    /// Forward FLOPs per token entering the node: `2 · in · out · count · rows_per_token`.
    pub fn flops_per_token(&self) -> f64 {
        2.0 * self.in_features as f64
            * self.out_features as f64
            * self.count as f64
            * self.rows_per_token
    }

    /// Weight elements of all `count` matrices.
    pub fn weights(&self) -> f64 {
        self.in_features as f64 * self.out_features as f64 * self.count as f64
    }
}

/// One node of the layer graph. See the module docs for the conventions.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Layer {
    pub kind: LayerKind,
    /// Transformer block index (0-based) for `Attention`/`DenseMlp`/`Moe`; MTP module index for
    /// `Mtp`; `None` otherwise.
    pub block: Option<u32>,
    /// Model hidden size `h` (the width of the activation between nodes and pipeline stages).
    pub hidden: u32,
    /// All parameters of the node (MoE: every routed expert + shared experts + router + norm).
    pub params: f64,
    /// Parameters used per token (MoE: `top_k` routed experts + shared + router + norm; every
    /// other node: all its parameters, the embedding table included).
    pub active_params: f64,
    /// Parameters of ONE routed expert (0 for nodes without experts). `params - experts ·
    /// expert_params` are the node's non-expert parameters (attention-like sharding).
    pub expert_params: f64,
    /// Routed experts in the node (0 for nodes without experts).
    pub experts: u32,
    /// Forward matmul FLOPs per token: `Σ gemms.flops_per_token()` (MoE: expected experts per
    /// token, dynamic routing included; router included).
    pub gemm_flops_per_token: f64,
    /// Forward QKᵀ + AV FLOPs per token at `training.seq_len`, causal (×1/2); 0 elsewhere.
    pub attn_core_flops_per_token: f64,
    /// The node's weight matrices, for shape-dependent GEMM efficiency and TP sharding.
    pub gemms: Vec<Gemm>,
    /// Bytes per token stored for backward that do not grow with the sequence (Korthikanti
    /// 2022 §4.1 `34·h` per GPT layer, split: attention `13·h` incl. its LayerNorm, MLP `21·h`).
    pub act_bytes_per_token: f64,
    /// Bytes per token of the `s×s` attention scores stored for backward (Korthikanti's
    /// `5·a·s`: softmax output, dropout mask and output; `2·a·s` without dropout). Flash
    /// attention and selective recompute do not store them.
    pub attn_score_bytes_per_token: f64,
    /// Elements per token all-reduced across the TP group in the forward pass (Megatron's `g`:
    /// attention and MLP outputs `h`; vocab-parallel embedding `h`; cross-entropy max, sum and
    /// target logit: 3 fp32 values). With sequence parallelism the same volume becomes a
    /// reduce-scatter + all-gather pair.
    pub tp_fwd_allreduce_elems_per_token: f64,
    /// Elements per token all-reduced across TP in the backward pass (Megatron's `f`: the input
    /// gradient `h` of attention, MLP and the LM head; MLA's latents and rope key, which its
    /// column-parallel GEMMs read). With sequence parallelism the same volume becomes the
    /// all-gather before those GEMMs + the reduce-scatter of their input gradient.
    pub tp_bwd_allreduce_elems_per_token: f64,
    /// Key + value elements per token a context-parallel ring passes around (GQA: `2·g·d`;
    /// MLA: the up-projected `a·(d_qk + d_v)`, as Megatron's MLA context parallelism does).
    pub cp_kv_elems_per_token: f64,
    /// Elements per token sent by the EP dispatch all-to-all: `h · expected experts per token`
    /// (the combine all-to-all returns as many). Unpadded: capacity padding
    /// (`Moe::capacity_factor`) and load imbalance are the cost model's to apply.
    pub ep_dispatch_elems_per_token: f64,
}

impl Layer {
    fn empty(kind: LayerKind, block: Option<u32>, hidden: u32) -> Layer {
        Layer {
            kind,
            block,
            hidden,
            params: 0.0,
            active_params: 0.0,
            expert_params: 0.0,
            experts: 0,
            gemm_flops_per_token: 0.0,
            attn_core_flops_per_token: 0.0,
            gemms: Vec::new(),
            act_bytes_per_token: 0.0,
            attn_score_bytes_per_token: 0.0,
            tp_fwd_allreduce_elems_per_token: 0.0,
            tp_bwd_allreduce_elems_per_token: 0.0,
            cp_kv_elems_per_token: 0.0,
            ep_dispatch_elems_per_token: 0.0,
        }
    }

    /// Forward FLOPs per token: GEMMs + attention core.
    pub fn flops_per_token(&self) -> f64 {
        self.gemm_flops_per_token + self.attn_core_flops_per_token
    }

    /// Parameters other than the routed experts.
    pub fn non_expert_params(&self) -> f64 {
        self.params - self.experts as f64 * self.expert_params
    }

    /// True when two nodes have identical accounting (used to collapse repeated blocks).
    pub fn same_shape(&self, other: &Layer) -> bool {
        Layer {
            block: None,
            ..self.clone()
        } == Layer {
            block: None,
            ..other.clone()
        }
    }

    fn push_gemm(
        &mut self,
        name: &'static str,
        in_features: u64,
        out_features: u64,
        split: TpSplit,
    ) {
        self.gemms.push(Gemm {
            name,
            in_features,
            out_features,
            count: 1,
            rows_per_token: 1.0,
            split,
            owns_weights: true,
        });
    }

    /// Recompute `params`-independent totals from `gemms`.
    fn finish_gemm_flops(&mut self) {
        self.gemm_flops_per_token = self.gemms.iter().map(Gemm::flops_per_token).sum();
    }
}

/// Storage bytes of 16-bit activations (Korthikanti 2022 counts 2 bytes per element).
const B16: f64 = 2.0;

impl ModelSpec {
    /// Parameters of one norm of width `w`: LayerNorm has a weight and a bias, RMSNorm a weight.
    pub fn norm_params(&self, w: u32) -> f64 {
        match self.norm {
            Norm::LayerNorm => 2.0 * w as f64,
            Norm::RmsNorm => w as f64,
        }
    }

    /// The model trains with dropout, so its masks are stored ([`crate::Family::dropout`]).
    pub fn dropout(&self) -> bool {
        self.family.dropout()
    }

    /// Key/value heads (`heads` for MLA, whose keys and values are per head).
    pub fn kv_heads(&self) -> u32 {
        match self.attention {
            Attention::Gqa { kv_heads, .. } => kv_heads,
            Attention::Mla { .. } => self.heads,
        }
    }

    /// Per-head query/key width (MLA: `qk_nope_head_dim + qk_rope_head_dim`).
    pub fn head_dim(&self) -> u32 {
        match self.attention {
            Attention::Gqa { head_dim, .. } => head_dim,
            Attention::Mla {
                qk_nope_head_dim,
                qk_rope_head_dim,
                ..
            } => qk_nope_head_dim + qk_rope_head_dim,
        }
    }

    /// Per-head value width.
    pub fn v_head_dim(&self) -> u32 {
        match self.attention {
            Attention::Gqa { head_dim, .. } => head_dim,
            Attention::Mla { v_head_dim, .. } => v_head_dim,
        }
    }

    /// Dense blocks: all of them without MoE, else the first `first_dense_layers`.
    pub fn dense_blocks(&self) -> u32 {
        match &self.moe {
            None => self.layers,
            Some(m) => m.first_dense_layers.min(self.layers),
        }
    }

    /// MoE blocks.
    pub fn moe_blocks(&self) -> u32 {
        self.layers - self.dense_blocks()
    }

    fn is_moe_block(&self, block: u32) -> bool {
        block >= self.dense_blocks()
    }

    /// Whether block `b` uses sliding-window attention ([`crate::SlidingWindow`]).
    pub fn is_windowed_block(&self, b: u32) -> bool {
        self.window
            .is_some_and(|w| w.full_every == 0 || b % w.full_every != w.full_every - 1)
    }

    /// Blocks with sliding-window attention (0 without a window).
    pub fn windowed_blocks(&self) -> u32 {
        match self.window {
            None => 0,
            Some(w) if w.full_every == 0 => self.layers,
            Some(w) => self.layers - self.layers / w.full_every,
        }
    }

    /// The layer graph's nodes in execution order: embedding, for each block its attention
    /// then its dense MLP or MoE, final norm, LM head, cross-entropy, MTP modules.
    pub fn layers(&self) -> Vec<Layer> {
        let mut v = Vec::with_capacity(2 * self.layers as usize + 4 + self.mtp_modules as usize);
        v.push(self.embedding_layer());
        for b in 0..self.layers {
            v.push(self.attention_layer(b));
            v.push(if self.is_moe_block(b) {
                self.moe_layer(b)
            } else {
                self.dense_mlp_layer(b)
            });
        }
        v.push(self.final_norm_layer());
        v.push(self.lm_head_layer());
        v.push(self.cross_entropy_layer());
        for m in 0..self.mtp_modules {
            v.push(self.mtp_layer(m));
        }
        v
    }

    /// Sum `f` over the main model's nodes (MTP excluded) without building every block: all
    /// blocks of a kind have identical accounting.
    fn sum_main(&self, f: impl Fn(&Layer) -> f64) -> f64 {
        let ends = f(&self.embedding_layer())
            + f(&self.final_norm_layer())
            + f(&self.lm_head_layer())
            + f(&self.cross_entropy_layer());
        let attn = self.sum_attention(&f);
        let dense = match self.dense_blocks() {
            0 => 0.0,
            n => n as f64 * f(&self.dense_mlp_layer(0)),
        };
        let moe = match self.moe_blocks() {
            0 => 0.0,
            n => n as f64 * f(&self.moe_layer(self.dense_blocks())),
        };
        ends + attn + dense + moe
    }

    /// Parameters of the main model, MTP modules excluded (the published convention:
    /// DeepSeek-V3's 671B excludes its 14B MTP weights). Sum `layers()` to include them.
    pub fn total_params(&self) -> f64 {
        self.sum_main(|l| l.params)
    }

    /// Parameters used per token by the main model: every non-expert parameter (embedding
    /// table included, the convention of Mixtral's 12.9B and Qwen3's 22B) plus `top_k` routed
    /// experts per MoE block. Equals `total_params` for dense models.
    pub fn active_params(&self) -> f64 {
        self.sum_main(|l| l.active_params)
    }

    /// [`ModelSpec::active_params`] without the embedding table (a lookup, not a matmul): the
    /// convention of DeepSeek's "21B/37B activated" (the only one under which both V2 and V3
    /// round to their published figures, see `tests/bundled.rs`).
    pub fn active_params_excluding_embedding(&self) -> f64 {
        self.active_params() - self.embedding_params()
    }

    /// Forward FLOPs per token of the main model (GEMMs + causal attention core), MTP excluded.
    pub fn flops_per_token(&self) -> f64 {
        self.sum_main(Layer::flops_per_token)
    }

    /// Parameters of all MTP modules (0 without).
    pub fn mtp_params(&self) -> f64 {
        self.mtp_modules as f64 * self.mtp_layer(0).params
    }

    /// Forward FLOPs per token of all MTP modules.
    pub fn mtp_flops_per_token(&self) -> f64 {
        self.mtp_modules as f64 * self.mtp_layer(0).flops_per_token()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{gpt, llama, moe_llama};
    use crate::{Moe, Routing};

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn gpt_layer_matches_narayanan_closed_form() {
        // Narayanan et al. 2021 (SC21) §5.1: P = 12·l·h²·(1 + 13/(12h) + (V + s)/(12·l·h)),
        // tied embedding, learned positions, biases; the formula omits the final LayerNorm (2h).
        let m = gpt(24, 2304, 24, 51200, 2048);
        let (l, h, v, s) = (24.0, 2304.0, 51200.0, 2048.0);
        let p = 12.0 * l * h * h * (1.0 + 13.0 / (12.0 * h) + (v + s) / (12.0 * l * h));
        assert!(
            close(m.total_params(), p + 2.0 * h),
            "{} vs {}",
            m.total_params(),
            p
        );
    }

    #[test]
    fn gpt_flops_match_megatron_formula_with_causal_halving() {
        // Megatron (Narayanan 2021 eq. 3): 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) per step counts
        // four passes of the blocks (forward, recompute, 2× backward) but three of the head, so
        // one forward pass per token is 24·l·h²·(1 + s/(6h)) + 2·h·V; it counts the full s×s
        // scores, causal masking halves s/(6h) to s/(12h).
        let m = gpt(24, 2304, 24, 51200, 2048);
        let (l, h, v, s) = (24.0, 2304.0, 51200.0, 2048.0);
        let megatron = 24.0 * l * h * h * (1.0 + s / (12.0 * h)) + 2.0 * h * v;
        assert!(
            close(m.flops_per_token(), megatron),
            "{}",
            m.flops_per_token()
        );
    }

    #[test]
    fn sliding_window_attention_by_hand() {
        // 6 blocks, every 3rd full (blocks 2 and 5), window 1024 at s = 8192, 32 heads of 128.
        let mut m = llama(6, 4096, 32, 8, 14336, 128256);
        let full = m.flops_per_token();
        let full_core = 32.0 * 256.0 * 8192.0; // a·(d_qk + d_v)·s: s/2 keys per query
        m.window = Some(crate::SlidingWindow {
            tokens: 1024,
            full_every: 3,
        });
        assert_eq!(m.windowed_blocks(), 4);
        let windowed: Vec<u32> = (0..6).filter(|&b| m.is_windowed_block(b)).collect();
        assert_eq!(windowed, [0, 1, 3, 4]);
        // Mean keys under a window w < s: w − w²/2s = 1024 − 64 = 960.
        let win_core = 2.0 * 32.0 * 256.0 * 960.0;
        assert!(close(
            m.attention_layer(0).attn_core_flops_per_token,
            win_core
        ));
        assert!(close(
            m.attention_layer(2).attn_core_flops_per_token,
            full_core
        ));
        let mean = (4.0 * win_core + 2.0 * full_core) / 6.0;
        assert!(close(m.mean_attn_core_flops_per_token(), mean));
        // Only the attention core changes: parameters and GEMMs do not.
        assert!(close(
            full - m.flops_per_token(),
            4.0 * (full_core - win_core)
        ));
        let summed: f64 = m.layers().iter().map(Layer::flops_per_token).sum();
        assert!(close(summed, m.flops_per_token()));
        // A window at least the sequence changes nothing; every block windowed with 0.
        m.window = Some(crate::SlidingWindow {
            tokens: 8192,
            full_every: 0,
        });
        assert_eq!(m.windowed_blocks(), 6);
        assert!(close(m.flops_per_token(), full));
    }

    #[test]
    fn gpt_activations_match_korthikanti() {
        // Korthikanti 2022 eq. (1): 34·s·b·h + 5·a·s²·b bytes per layer → per token 34h + 5as.
        let m = gpt(24, 2304, 24, 51200, 2048);
        let ls = m.layers();
        let per_block: f64 = ls[1..3]
            .iter()
            .map(|l| l.act_bytes_per_token + l.attn_score_bytes_per_token)
            .sum();
        assert!(close(per_block, 34.0 * 2304.0 + 5.0 * 24.0 * 2048.0));
    }

    #[test]
    fn llama3_8b_by_hand() {
        // 32 blocks, h 4096, 32 heads, 8 KV heads of 128, SwiGLU 14336, vocab 128256, untied.
        let m = llama(32, 4096, 32, 8, 14336, 128256);
        let attn = 4096.0 * 4096.0 * 2.0 + 2.0 * 4096.0 * 1024.0 + 4096.0;
        assert!(close(m.attention_params(), attn));
        assert!(close(m.dense_mlp_params(), 3.0 * 4096.0 * 14336.0 + 4096.0));
        let total = 32.0 * (attn + m.dense_mlp_params()) + 2.0 * 128256.0 * 4096.0 + 4096.0;
        assert!(close(m.total_params(), total));
        assert!(close(m.active_params(), total));
        assert!(close(
            m.active_params_excluding_embedding(),
            total - 128256.0 * 4096.0
        ));
        // FLOPs: 2 × matmul weights (incl. the head) + causal core a·(2d)·s per block.
        let matmul = 32.0 * (attn - 4096.0 + 3.0 * 4096.0 * 14336.0) + 128256.0 * 4096.0;
        let core = 32.0 * 32.0 * 256.0 * 8192.0;
        assert!(close(m.flops_per_token(), 2.0 * matmul + core));
        let a = &m.layers()[1];
        assert_eq!(a.cp_kv_elems_per_token, 2.0 * 8.0 * 128.0);
        assert_eq!(a.tp_fwd_allreduce_elems_per_token, 4096.0);
    }

    #[test]
    fn layers_are_ordered_and_sum_to_the_model() {
        let mut m = moe_llama();
        m.mtp_modules = 1;
        let ls = m.layers();
        // Embedding, attention + MLP per block, final norm, LM head, cross-entropy, MTP modules.
        assert_eq!(ls.len(), 1 + 2 * m.layers as usize + 3 + 1);
        // Each block is its attention then its MLP, blocks in index order.
        for b in 0..m.layers {
            let (attn, mlp) = (&ls[1 + 2 * b as usize], &ls[2 + 2 * b as usize]);
            assert_eq!((attn.kind, attn.block), (LayerKind::Attention, Some(b)));
            assert_eq!(mlp.block, Some(b));
            assert_ne!(mlp.kind, LayerKind::Attention);
        }
        let kinds: Vec<LayerKind> = ls.iter().map(|l| l.kind).collect();
        assert_eq!(kinds[0], LayerKind::Embedding);
        assert_eq!(kinds[1], LayerKind::Attention);
        assert_eq!(kinds[2], LayerKind::DenseMlp);
        assert_eq!(kinds[4], LayerKind::Moe);
        assert_eq!(
            &kinds[kinds.len() - 4..],
            &[
                LayerKind::FinalNorm,
                LayerKind::LmHead,
                LayerKind::CrossEntropy,
                LayerKind::Mtp
            ]
        );
        let main = ls.iter().filter(|l| l.kind != LayerKind::Mtp);
        let (p, a, f) = main.fold((0.0, 0.0, 0.0), |(p, a, f), l| {
            (p + l.params, a + l.active_params, f + l.flops_per_token())
        });
        assert!(close(p, m.total_params()));
        assert!(close(a, m.active_params()));
        assert!(close(f, m.flops_per_token()));
        for (i, l) in ls.iter().enumerate() {
            let gemm: f64 = l.gemms.iter().map(Gemm::flops_per_token).sum();
            assert!(close(gemm, l.gemm_flops_per_token), "node {i}");
        }
    }

    #[test]
    fn moe_counts_experts_and_routing() {
        let m = moe_llama();
        let moe = m.moe.as_ref().unwrap();
        let l = m.moe_layer(1);
        let e = 3.0 * 1024.0 * 512.0;
        assert!(close(l.expert_params, e));
        let fixed = 1024.0 + 1024.0 * 16.0 + 2.0 * 3.0 * 1024.0 * 256.0;
        assert!(close(l.params, fixed + 16.0 * e));
        assert!(close(l.active_params, fixed + 4.0 * e));
        assert!(close(l.non_expert_params(), fixed));
        assert!(close(
            l.gemm_flops_per_token,
            2.0 * (1024.0 * 16.0 + 4.0 * e + 2.0 * 3.0 * 1024.0 * 256.0)
        ));
        assert_eq!(l.ep_dispatch_elems_per_token, 1024.0 * 4.0);
        assert_eq!(moe.top_k, 4);

        // Dynamic top-1/top-2 (seed 004 §3.2): 1.3 experts per token on average.
        let mut d = m.clone();
        d.moe.as_mut().unwrap().top_k = 2;
        d.moe.as_mut().unwrap().routing = Routing::DynamicTop1Top2 {
            threshold: 0.1,
            two_expert_fraction: 0.3,
        };
        let l = d.moe_layer(1);
        assert!(close(
            l.gemm_flops_per_token,
            2.0 * (1024.0 * 16.0 + 1.3 * e + 2.0 * 3.0 * 1024.0 * 256.0)
        ));
        assert_eq!(l.ep_dispatch_elems_per_token, 1024.0 * 1.3);
    }

    #[test]
    fn mla_matches_deepseek_v2_section_2_1() {
        let mut m = moe_llama();
        m.hidden = 5120;
        m.heads = 128;
        m.attention = Attention::Mla {
            q_lora_rank: Some(1536),
            kv_lora_rank: 512,
            qk_nope_head_dim: 128,
            qk_rope_head_dim: 64,
            v_head_dim: 128,
        };
        let want = 5120.0 * 1536.0
            + 1536.0
            + 1536.0 * 128.0 * 192.0
            + 5120.0 * 576.0
            + 512.0
            + 512.0 * 128.0 * 256.0
            + 128.0 * 128.0 * 5120.0
            + 5120.0;
        assert!(close(m.attention_params(), want));
        let a = m.attention_layer(0);
        assert!(close(
            a.gemm_flops_per_token,
            2.0 * (want - 1536.0 - 512.0 - 5120.0)
        ));
        assert!(close(
            a.attn_core_flops_per_token,
            128.0 * (192.0 + 128.0) * m.training.seq_len as f64
        ));
        assert_eq!(a.cp_kv_elems_per_token, 128.0 * 320.0);
        // TP moves the latents and the rope key on the input side, h on the output side.
        assert_eq!(a.tp_bwd_allreduce_elems_per_token, 1536.0 + 512.0 + 64.0);
        assert_eq!(a.tp_fwd_allreduce_elems_per_token, 5120.0);
        // Without q compression (V2-Lite) the query is one h × a·d_qk matrix, reading h.
        if let Attention::Mla { q_lora_rank, .. } = &mut m.attention {
            *q_lora_rank = None;
        }
        let direct =
            want - (5120.0 * 1536.0 + 1536.0 + 1536.0 * 128.0 * 192.0) + 5120.0 * 128.0 * 192.0;
        assert!(close(m.attention_params(), direct));
        let a = m.attention_layer(0);
        assert_eq!(a.tp_bwd_allreduce_elems_per_token, 5120.0 + 512.0 + 64.0);
    }

    #[test]
    fn mtp_module_is_block_plus_projection_and_norms() {
        let mut m = moe_llama();
        m.mtp_modules = 2;
        let mtp = m.mtp_layer(0);
        let h = 1024.0;
        let want = 3.0 * h + 2.0 * h * h + m.attention_params() + m.moe_layer(1).params;
        assert!(close(mtp.params, want));
        assert!(close(m.mtp_params(), 2.0 * want));
        let total_all: f64 = m.layers().iter().map(|l| l.params).sum();
        assert!(close(total_all, m.total_params() + m.mtp_params()));
        // Tied or not, the head GEMM is executed but its weights belong to the main head.
        assert!(mtp
            .gemms
            .iter()
            .any(|g| g.name == "lm_head" && !g.owns_weights));
        // TP: the block's attention and MLP, the cross-entropy's 3 values forward, the head's
        // input gradient backward; with MLA the attention's input side is its latents.
        assert_eq!(mtp.tp_fwd_allreduce_elems_per_token, 2.0 * h + 3.0);
        assert_eq!(mtp.tp_bwd_allreduce_elems_per_token, 3.0 * h);
        m.attention = Attention::Mla {
            q_lora_rank: Some(96),
            kv_lora_rank: 32,
            qk_nope_head_dim: 64,
            qk_rope_head_dim: 16,
            v_head_dim: 64,
        };
        let mtp = m.mtp_layer(0);
        assert_eq!(
            mtp.tp_bwd_allreduce_elems_per_token,
            96.0 + 32.0 + 16.0 + 2.0 * h
        );
    }

    #[test]
    fn tied_head_has_flops_but_no_params() {
        let mut m = llama(2, 256, 4, 4, 512, 1000);
        let untied = m.total_params();
        let f = m.flops_per_token();
        m.tied_embeddings = true;
        assert!(close(untied - m.total_params(), 1000.0 * 256.0));
        assert!(close(f, m.flops_per_token()));
    }

    #[test]
    fn zero_first_dense_layers_is_all_moe() {
        let mut m = moe_llama();
        m.moe = Some(Moe {
            first_dense_layers: 0,
            ..m.moe.clone().unwrap()
        });
        assert_eq!(m.dense_blocks(), 0);
        assert_eq!(m.moe_blocks(), m.layers);
    }
}
