//! The elementwise ops a framework runs as kernels of their own (eager PyTorch) where
//! Megatron-Core runs one fused kernel per chain ([`Elementwise`], a framework cost profile's
//! field): the HBM bytes per token their intermediate tensors add to the fused kernels'
//! traffic, forward and backward, from the model's shapes.
//!
//! The elementwise term of [`super::compute`] prices the fused kernels (what a block stores
//! for the backward, written once and read back); a profile with every chain fused adds
//! nothing, so Megatron-Core's predictions are those of that term alone. An unfused chain
//! writes each intermediate tensor to HBM and reads it back in the next kernel; in the
//! counts below, `r`/`w` are bytes read/written per element, 16-bit activations (`ACT`),
//! fp32 intermediates 4 bytes.
//!
//! | op (per element) | eager kernels | fused | extra fwd | extra bwd |
//! |---|---|---|---|---|
//! | RMSNorm, over `h` | upcast r2 w4, `pow` r4 w4, `mean` r4, `x·rsqrt` r4 w4, downcast r4 w2, `·weight` r2 w2: 36 | r2 w2: 4 | 32 | 64 |
//! | RoPE, over Q and K | upcast r2 w4, complex multiply r4 w4, downcast r4 w2: 20 | r2 w2: 4 | 16 | 16 |
//! | gated activation, over `f` | `act(gate)` r2 w2, `· up` r4 w2: 10 | r4 w2: 6 | 4 | 8 |
//! | dropout + residual add, over `h` | dropout r2 w2, add r4 w2: 10 | r4 w2: 6 | 4 | 0 |
//!
//! Backward: RMSNorm's autograd replays the six-kernel chain, each adjoint reading the
//! gradient and its saved input and writing the input's gradient — twice the forward's
//! traffic, the elementwise term's convention ([`super::compute`]: `bwd = 2·mem_f`). RoPE's
//! adjoints are the same three casts and products (multiplying by the conjugate): the forward's
//! bytes. The gated activation's adjoints: `g·up` and `g·act(gate)` (r4 w2 each) and the
//! activation's derivative (r4 w2): 18 bytes, where Megatron-Core's `swiglu_back` reads `g`,
//! gate and up and writes both gradients (r6 w4: 10). Dropout's adjoint (`g·mask`) is one
//! kernel either way, and the residual add's gradient passes through: nothing extra.
//!
//! Sources: eager — torchtitan `models/llama3/model/model.py` @ 0.1.0 (L90-95 RoPE, L236-237
//! the MLP, L276-277 `nn.RMSNorm`), llm-foundry `models/layers` @ 0.22.0 (norm.py L71-100
//! `LPRMSNorm` → `rms_norm`, ffn.py L215-218 `MPTGLU`, blocks.py L216 `x + dropout(b)`);
//! fused — Megatron-Core @ 0.19.2 `fusions/fused_bias_swiglu.py` (L16-70: one kernel each way),
//! `fusions/fused_bias_dropout.py` (L11-75), the fused RoPE (`apply_rope_fusion`), on by
//! default in Megatron-LM (`training/arguments.py` L2755-2767).

use autoplan_graph::{Attention, LayerKind, ModelSpec, Norm, Positions};
use autoplan_plan::framework::Elementwise;

use super::compute::ACT;

/// RMSNorm: eager 36 B per element (upcast 2+4, `pow` 4+4, `mean` 4, `x·rsqrt` 4+4, downcast
/// 4+2, `·weight` 2+2) against the fused kernel's 2+2 (module table).
const RMSNORM_FWD: f64 = 36.0 - 2.0 * ACT;
/// RoPE: eager 20 B per element of Q and K (upcast 2+4, complex multiply 4+4, downcast 4+2)
/// against the fused kernel's 2+2; the adjoints the same.
const ROPE: f64 = 20.0 - 2.0 * ACT;

/// HBM bytes per token one block's layer moves beyond the fused kernels' traffic, at TP 1
/// ([`unfused_elementwise_bytes`]), `[forward, backward]`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UnfusedBytes {
    /// On hidden-sized tensors (norm, dropout + residual add): replicated on every TP rank
    /// without sequence parallelism, split over TP with it.
    pub hidden: [f64; 2],
    /// On TP-sharded tensors (Q and K under RoPE, the MLP's inner width): split over TP.
    pub sharded: [f64; 2],
}

impl UnfusedBytes {
    /// Nothing beyond the fused kernels.
    pub fn is_zero(&self) -> bool {
        *self == UnfusedBytes::default()
    }
}

/// The bytes per token that the ops `e` runs unfused add to the fused traffic of the layer
/// of `kind` in one block of `model` (module docs: the per-op counts and their sources). Only
/// a block's attention, dense-MLP and MoE layers have such ops; the other kinds, and every
/// kind under [`Elementwise::FUSED`], give zero.
pub fn unfused_elementwise_bytes(
    model: &ModelSpec,
    kind: LayerKind,
    e: &Elementwise,
) -> UnfusedBytes {
    let h = model.hidden as f64;
    let mut u = UnfusedBytes::default();
    if !matches!(
        kind,
        LayerKind::Attention | LayerKind::DenseMlp | LayerKind::Moe
    ) {
        return u;
    }
    // The layer's pre-norm; MLA's attention also normalises its query and key/value
    // latents (`q_a`, `kv_a` outputs: DeepSeek-V2 §2.1).
    let mut norm = h;
    if kind == LayerKind::Attention {
        if let Attention::Mla {
            q_lora_rank,
            kv_lora_rank,
            ..
        } = model.attention
        {
            norm += q_lora_rank.unwrap_or(0) as f64 + kv_lora_rank as f64;
        }
    }
    if e.rmsnorm && model.norm == Norm::RmsNorm {
        u.hidden[0] += RMSNORM_FWD * norm;
        u.hidden[1] += 2.0 * RMSNORM_FWD * norm;
    }
    // The residual add that closes the layer, after its dropout.
    if e.dropout && model.dropout() {
        u.hidden[0] += 2.0 * ACT * h;
    }
    match kind {
        LayerKind::Attention if e.rope && model.positions == Positions::Rope => {
            // RoPE rotates every query and key head (GQA), or MLA's decoupled RoPE parts: the
            // queries' `d_rope` per head and the one shared key (DeepSeek-V2 §2.1.3).
            let heads = model.heads as f64;
            let rotated = match model.attention {
                Attention::Gqa { kv_heads, head_dim } => {
                    (heads + kv_heads as f64) * head_dim as f64
                }
                Attention::Mla {
                    qk_rope_head_dim, ..
                } => (heads + 1.0) * qk_rope_head_dim as f64,
            };
            u.sharded[0] += ROPE * rotated;
            u.sharded[1] += ROPE * rotated;
        }
        LayerKind::DenseMlp | LayerKind::Moe if e.gated_act && model.mlp.input_matrices() == 2 => {
            // `act(gate)` is written and read back by the product: 2 elements per inner
            // element forward; backward the three adjoints against the fused one (module docs).
            let width = match (&model.moe, kind) {
                (Some(m), LayerKind::Moe) => {
                    m.expected_experts_per_token() * m.expert_ffn_hidden as f64
                        + m.shared_experts as f64 * m.shared_ffn_hidden as f64
                }
                _ => model.ffn_hidden as f64,
            };
            u.sharded[0] += 2.0 * ACT * width;
            u.sharded[1] += 4.0 * ACT * width;
        }
        _ => {}
    }
    u
}
