//! The nodes outside the blocks: embedding, final norm, LM head, cross-entropy, and the
//! DeepSeek-V3 MTP modules.

use super::{Gemm, Layer, LayerKind, TpSplit, B16};
use crate::{ModelSpec, Positions};

impl ModelSpec {
    /// Token embedding (`vocab × h`) plus the learned position table (`max_positions × h`)
    /// and BLOOM's embedding norm.
    pub fn embedding_params(&self) -> f64 {
        let pos = match self.positions {
            Positions::Learned => self.max_positions as f64,
            Positions::Rope | Positions::Alibi => 0.0,
        };
        (self.vocab as f64 + pos) * self.hidden as f64 + self.embedding_norm_params()
    }

    /// Parameters of the norm after the word embedding (0 without one).
    pub fn embedding_norm_params(&self) -> f64 {
        if self.embedding_norm {
            self.norm_params(self.hidden)
        } else {
            0.0
        }
    }

    /// Output projection `h × vocab`; 0 when tied to the embedding.
    pub fn lm_head_params(&self) -> f64 {
        if self.tied_embeddings {
            0.0
        } else {
            self.vocab as f64 * self.hidden as f64
        }
    }

    pub(super) fn embedding_layer(&self) -> Layer {
        let hf = self.hidden as f64;
        let mut l = Layer::empty(LayerKind::Embedding, None, self.hidden);
        l.params = self.embedding_params();
        // Counted whole, as Mistral, Meta and Qwen count "active" parameters (dense models:
        // active = total); `ModelSpec::active_params_excluding_embedding` gives DeepSeek's.
        l.active_params = l.params;
        // Dropout mask (1 byte), the embedding norm's input (16-bit).
        l.act_bytes_per_token = if self.dropout() { hf } else { 0.0 }
            + if self.embedding_norm { B16 * hf } else { 0.0 };
        // Vocab-parallel embedding: partial lookups all-reduced (Megatron VocabParallelEmbedding).
        l.tp_fwd_allreduce_elems_per_token = hf;
        l
    }

    pub(super) fn final_norm_layer(&self) -> Layer {
        let mut l = Layer::empty(LayerKind::FinalNorm, None, self.hidden);
        l.params = self.norm_params(self.hidden);
        l.active_params = l.params;
        l.act_bytes_per_token = B16 * self.hidden as f64;
        l
    }

    pub(super) fn lm_head_layer(&self) -> Layer {
        let h = self.hidden as u64;
        let mut l = Layer::empty(LayerKind::LmHead, None, self.hidden);
        l.gemms.push(Gemm {
            name: "lm_head",
            in_features: h,
            out_features: self.vocab as u64,
            count: 1,
            rows_per_token: 1.0,
            split: TpSplit::Column,
            owns_weights: !self.tied_embeddings,
        });
        l.params = self.lm_head_params();
        l.active_params = l.params;
        l.finish_gemm_flops();
        l.act_bytes_per_token = B16 * h as f64;
        l.tp_bwd_allreduce_elems_per_token = h as f64;
        l
    }

    pub(super) fn cross_entropy_layer(&self) -> Layer {
        let mut l = Layer::empty(LayerKind::CrossEntropy, None, self.hidden);
        // Korthikanti 2022 §4.3: fp32 logits kept for the loss, 4·s·b·v bytes.
        l.act_bytes_per_token = 4.0 * self.vocab as f64;
        // Megatron vocab_parallel_cross_entropy all-reduces max, predicted logit and sum-exp.
        l.tp_fwd_allreduce_elems_per_token = 3.0;
        l
    }

    /// One DeepSeek-V3 MTP module (DeepSeek-V3 report §2.2, eq. 21–22): RMSNorm of the previous
    /// depth's hidden state and of the next token's embedding, projection `M_k: 2h → h`, one
    /// transformer block (MoE when the model's last block is MoE), and the final norm before
    /// the shared output head. Embedding and head are shared: their GEMM (the head, `2·h·V`)
    /// is counted here, their parameters are not.
    pub fn mtp_layer(&self, module: u32) -> Layer {
        let h = self.hidden as u64;
        let hf = h as f64;
        let attn = self.attention_layer(self.layers);
        let mlp = if self.is_moe_block(self.layers) {
            self.moe_layer(self.layers)
        } else {
            self.dense_mlp_layer(self.layers)
        };
        let mut l = Layer::empty(LayerKind::Mtp, Some(module), self.hidden);
        l.push_gemm("mtp_proj", 2 * h, h, TpSplit::Replicated);
        let proj_params = l.gemms[0].weights();
        l.gemms.extend(attn.gemms.iter().cloned());
        l.gemms.extend(mlp.gemms.iter().cloned());
        l.gemms.push(Gemm {
            owns_weights: false,
            ..self.lm_head_layer().gemms[0].clone()
        });
        let norms = 3.0 * self.norm_params(self.hidden);
        l.params = norms + proj_params + attn.params + mlp.params;
        l.active_params = norms + proj_params + attn.active_params + mlp.active_params;
        l.expert_params = mlp.expert_params;
        l.experts = mlp.experts;
        l.finish_gemm_flops();
        l.attn_core_flops_per_token = attn.attn_core_flops_per_token;
        // Two norm inputs, the projection input (2h), the block, final norm and head inputs,
        // fp32 logits.
        l.act_bytes_per_token = B16 * (2.0 * hf + 2.0 * hf + 2.0 * hf)
            + attn.act_bytes_per_token
            + mlp.act_bytes_per_token
            + 4.0 * self.vocab as f64;
        l.attn_score_bytes_per_token = attn.attn_score_bytes_per_token;
        // The block's own (its attention's and MLP's; MLA's input side is its latents), the
        // cross-entropy's 3 values forward, the head's input gradient backward.
        l.tp_fwd_allreduce_elems_per_token =
            attn.tp_fwd_allreduce_elems_per_token + mlp.tp_fwd_allreduce_elems_per_token + 3.0;
        l.tp_bwd_allreduce_elems_per_token =
            attn.tp_bwd_allreduce_elems_per_token + mlp.tp_bwd_allreduce_elems_per_token + hf;
        l.cp_kv_elems_per_token = attn.cp_kv_elems_per_token;
        l.ep_dispatch_elems_per_token = mlp.ep_dispatch_elems_per_token;
        l
    }
}
