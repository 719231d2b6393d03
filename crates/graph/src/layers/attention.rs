//! The attention node of a block: GQA/MHA or MLA, causal or sliding-window core.

use super::{Gemm, Layer, LayerKind, TpSplit, B16};
use crate::{Attention, ModelSpec};

impl ModelSpec {
    /// Keys one query of block `b` attends to, on average over the sequence (module docs):
    /// `s/2` under the causal mask, `w − w²/2s` under a window `w < s`.
    pub fn mean_keys(&self, b: u32) -> f64 {
        let s = self.training.seq_len as f64;
        match self.window {
            Some(w) if self.is_windowed_block(b) && (w.tokens as f64) < s => {
                let w = w.tokens as f64;
                w - w * w / (2.0 * s)
            }
            _ => s / 2.0,
        }
    }

    /// The distinct attention nodes as (blocks, a representative block): every block alike
    /// without a window; with one, the windowed blocks (block 0 is one: `full_every` is 0 or
    /// ≥ 2) and the full ones (block `full_every − 1`).
    pub fn attention_classes(&self) -> [(u32, u32); 2] {
        match self.window {
            None => [(self.layers, 0), (0, 0)],
            Some(w) => {
                let nw = self.windowed_blocks();
                [(nw, 0), (self.layers - nw, w.full_every.saturating_sub(1))]
            }
        }
    }

    /// Σ over the blocks' attention nodes of `f`, one node built per distinct kind.
    pub(super) fn sum_attention(&self, f: impl Fn(&Layer) -> f64) -> f64 {
        self.attention_classes()
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|&(n, b)| n as f64 * f(&self.attention_layer(b)))
            .sum()
    }

    /// Forward attention-core FLOPs per token averaged over the blocks (windowed and full):
    /// what one attention node costs on a stage when the windowed ones are spread evenly.
    pub fn mean_attn_core_flops_per_token(&self) -> f64 {
        match self.window {
            // Exactly the one node's value (n·x/n may round).
            None => self.attention_layer(0).attn_core_flops_per_token,
            Some(_) => self.sum_attention(|l| l.attn_core_flops_per_token) / self.layers as f64,
        }
    }

    /// The attention node of one block (pre-norm included). GQA: q `h×a·d`, k and v
    /// `h×g·d`, o `a·d×h`. MLA (DeepSeek-V2 §2.1, eqs. 9–14 and the decoupled RoPE key of
    /// §2.1.3): `q_a h×r_q` + RMSNorm(r_q) + `q_b r_q×a·(d_nope+d_rope)` (or a direct `h×a·d_qk`
    /// query), `kv_a h×(r_kv+d_rope)` + RMSNorm(r_kv), `kv_b r_kv×a·(d_nope+d_v)`, `o a·d_v×h`.
    pub fn attention_layer(&self, block: u32) -> Layer {
        let h = self.hidden as u64;
        let a = self.heads as u64;
        let s = self.training.seq_len as f64;
        let keys = self.mean_keys(block);
        let (dqk, dv) = (self.head_dim() as u64, self.v_head_dim() as u64);
        let mut l = Layer::empty(LayerKind::Attention, Some(block), self.hidden);
        let mut extra_params = self.norm_params(self.hidden); // pre-attention norm
        let hf = h as f64;
        // Stored activations: norm input and the projections' input (Korthikanti: LayerNorm
        // input 2sbh, QKV input 2sbh), Q and K (QKᵀ inputs), V, the output-projection input.
        let mut act = 2.0 * B16 * hf;
        match self.attention {
            Attention::Gqa { kv_heads, head_dim } => {
                let (g, d) = (kv_heads as u64, head_dim as u64);
                l.push_gemm("q", h, a * d, TpSplit::Column);
                l.push_gemm("k", h, g * d, TpSplit::Column);
                l.push_gemm("v", h, g * d, TpSplit::Column);
                l.push_gemm("o", a * d, h, TpSplit::Row);
                if self.bias {
                    extra_params += ((a + 2 * g) * d + h) as f64;
                }
                act += B16 * ((a * d + g * d + g * d + a * d) as f64);
                l.cp_kv_elems_per_token = (2 * g * d) as f64;
            }
            Attention::Mla {
                q_lora_rank,
                kv_lora_rank,
                qk_nope_head_dim,
                qk_rope_head_dim,
                v_head_dim,
            } => {
                let (rkv, dn, dr) = (
                    kv_lora_rank as u64,
                    qk_nope_head_dim as u64,
                    qk_rope_head_dim as u64,
                );
                match q_lora_rank {
                    Some(rq) => {
                        let rq = rq as u64;
                        l.push_gemm("q_a", h, rq, TpSplit::Replicated);
                        l.push_gemm("q_b", rq, a * (dn + dr), TpSplit::Column);
                        extra_params += self.norm_params(rq as u32);
                        // q_a output (norm input) and q_b input.
                        act += B16 * 2.0 * rq as f64;
                    }
                    None => l.push_gemm("q", h, a * (dn + dr), TpSplit::Column),
                }
                l.push_gemm("kv_a", h, rkv + dr, TpSplit::Replicated);
                l.push_gemm("kv_b", rkv, a * (dn + v_head_dim as u64), TpSplit::Column);
                l.push_gemm("o", a * v_head_dim as u64, h, TpSplit::Row);
                extra_params += self.norm_params(rkv as u32);
                if self.bias {
                    extra_params += hf;
                }
                // kv_a output (norm input), kv_b input, then Q, K, V, o input.
                act += B16 * ((rkv + dr + rkv + 2 * a * dqk + 2 * a * dv) as f64);
                l.cp_kv_elems_per_token = (a * (dqk + dv)) as f64;
            }
        }
        if self.dropout() {
            act += hf; // attention-output dropout mask, 1 byte
        }
        let weights: f64 = l.gemms.iter().map(Gemm::weights).sum();
        l.params = weights + extra_params;
        l.active_params = l.params;
        l.finish_gemm_flops();
        // Attention core: 2·a·d_qk (QKᵀ) + 2·a·d_v (AV) per key attended, `keys` on average
        // (s/2 causal: a·(d_qk + d_v)·s), see the module docs.
        l.attn_core_flops_per_token = 2.0 * (a * (dqk + dv)) as f64 * keys;
        l.act_bytes_per_token = act;
        // Softmax output (2 bytes), and with dropout its mask (1) and output (2): 5·a·s.
        l.attn_score_bytes_per_token = a as f64 * s * if self.dropout() { 5.0 } else { 2.0 };
        l.tp_fwd_allreduce_elems_per_token = hf;
        l.tp_bwd_allreduce_elems_per_token = match self.attention {
            // MLA's tensor-parallel GEMMs read the latents, not the hidden state: Megatron-Core
            // runs the down-projections `duplicated` on every TP rank (`linear_q_down_proj`,
            // `linear_kv_down_proj = backend.linear()`, `gpt_layer_specs.py` @ core 0.19.2
            // L123-125; `multi_latent_attention.py` L523-527, L570-574), on the rank's own
            // rows under SP, and the column-parallel up-projections gather (or, without SP,
            // all-reduce the gradient of) `q_compressed` and `kv_compressed`, the rope key
            // beside them (L744-754). A direct query (no `q_lora_rank`) reads `h`.
            Attention::Mla {
                q_lora_rank,
                kv_lora_rank,
                qk_rope_head_dim,
                ..
            } => {
                f64::from(q_lora_rank.unwrap_or(self.hidden))
                    + f64::from(kv_lora_rank)
                    + f64::from(qk_rope_head_dim)
            }
            _ => hf,
        };
        l
    }

    /// Parameters of the attention node of one block (projections, norms, biases).
    pub fn attention_params(&self) -> f64 {
        self.attention_layer(0).params
    }
}
