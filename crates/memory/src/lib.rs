//! Per-GPU memory of a parallel training plan: weights, gradients, optimizer state, stored
//! activations times the micro-batches in flight, fp32 logits, the seed-001 replicated
//! out_linear, transient communication buffers and a framework reserve, for the most loaded
//! pipeline stage.
//!
//! Boundary: pure arithmetic on a [`ModelSpec`] and a [`Plan`]: no IO, no time, no hardware
//! (the caller compares [`MemoryBreakdown::total`] with the GPU's HBM, see
//! [`MemoryBreakdown::fits`]). It does not check the plan ([`Plan::check`] does).
//!
//! The principal type is [`ModelMemory`]: the per-model constants, computed once from the
//! model's fields ([`ModelMemory::new`]), after which [`ModelMemory::breakdown`] costs a few
//! hundred floating-point operations and no allocation — the search calls it for every plan.
//! [`memory`] does both in one call. [`ModelMemory::floor`] is an admissible lower bound over
//! the knobs that only lower memory (ZeRO stage, recompute, micro-batch size, ...).
//!
//! ```
//! use autoplan_memory::{memory, MemoryOptions, GIB};
//! use autoplan_plan::Plan;
//! let model = autoplan_graph::resolve_model("gpt3-175b").unwrap();
//! let plan: Plan = "tp=8,pp=8,dp=16,sp=on,recompute=selective,zero=1".parse().unwrap();
//! let m = memory(&model, &plan, &MemoryOptions::default());
//! assert!(m.fits(80.0 * GIB));
//! assert_eq!(m.total, m.weights + m.grads + m.optimizer + m.activations + m.logits
//!     + m.extra + m.transient + m.reserve);
//! ```
//!
//! # The model, term by term (bytes per GPU)
//! - **Parameters on a stage**: its blocks (attention + dense MLP or MoE), plus the embedding on
//!   stage 0 and the final norm, LM head and MTP modules on the last stage. Column/row-parallel
//!   matrices are split by `tp` (Megatron), norms, routers and MLA down-projections are
//!   replicated; GQA kv heads are split when `tp | kv_heads` and replicated `tp/kv_heads` times
//!   otherwise; routed experts are split by `ep·moe_tp`; the vocabulary is padded to a multiple
//!   of `128·tp` (Megatron `--make-vocab-size-divisible-by 128`). With `pp > 1` and tied
//!   embeddings the last stage keeps its own copy of the word embedding (Megatron). A balanced
//!   expert placement with `R` redundant slots (`placement=balanced:R`, seed 004 §4, DeepSeek
//!   EPLB) adds `R` expert copies per GPU per MoE block, with their gradients and optimizer
//!   state ([`ModelMemory::experts_per_gpu`]). Routed activations and dispatch buffers keep the
//!   model's load factor whatever the placement (an upper bound for a balanced one), so memory
//!   never falls with `R` and contiguous placement is the memory floor.
//! - **Bytes per parameter** (Megatron-LM `docs/source/api-guide/dist_optimizer.md` table):
//!   16-bit weights 2; gradients 4 with fp32 main gradients (Megatron's default for bf16,
//!   `--accumulate-allreduce-grads-in-fp32`), otherwise 2 and the optimizer keeps an fp32
//!   master-gradient copy (4) instead; Adam 12 (fp32 master weights + two fp32 moments), Adam
//!   with BF16 moments 8 (DeepSeek-V3 report §3.3.3), SGD 8.
//!   So bf16 = 2 + 4 + 12 = 18, fp16 = 2 + 2 + 16 = 20, fp32 = 4 + 4 + 8 = 16 (no master copy).
//! - **ZeRO** over the data-parallel group of the parameter (dense: `dp·cp`, Megatron's
//!   data-parallel-with-context group; experts: `edp = tp·cp·dp/(moe_tp·ep)`): stage 1 shards the
//!   optimizer state (= distributed optimizer), 2 also the gradients, 3 also the weights, and
//!   ZeRO-3 gathers one block's weights at a time (`transient`).
//! - **Activations per block per micro-batch** (Korthikanti et al. 2022 §4, `T = s·b/cp` tokens
//!   on the GPU, `t = tp`): the tensors TP does not split (norm inputs, projection inputs,
//!   dropout masks) are divided by `t` only with sequence parallelism; the rest by `t`. For GPT
//!   this is exactly `s·b·h·(34 + 5·a·s/h)` at `t = 1`, `s·b·h·(10 + 24/t + 5·a·s/(h·t))` with
//!   TP and `s·b·h/t·(34 + 5·a·s/h)` with TP+SP. Selective recompute (or a fused flash-attention
//!   kernel, [`MemoryOptions::flash_attention`]) drops the `5·a·s/h` scores; full recompute keeps
//!   the block input, `2·s·b·h` (`/t` with SP), plus, once per stage, the working set of the
//!   block being recomputed (the stage's average block at the selective level, minus its
//!   checkpoint). GQA stores `K, V` of `g` heads, SwiGLU its gate, up and product (`3·f`), MLA its
//!   compressed latents (replicated) and up-projected `Q, K, V` (split). MoE stores, per token
//!   routed to `k` experts, the expert input (× `moe_tp`: the group all-gathers tokens) and the
//!   expert's inner activations (× the load imbalance, or the capacity factor when padded). The
//!   combine stores nothing of size `k·h`: Megatron-Core (≥ 0.12) multiplies the router
//!   probabilities inside the expert activation (`weighted_bias_swiglu`), so only the `k`
//!   probabilities are kept, not the expert outputs.
//!   Under FP8 training the GEMM inputs among these (QKV, output-projection, fc1 and fc2
//!   inputs, expert inputs) take 1 byte: Transformer Engine saves the quantized input.
//!   Selective recompute of Megatron-Core's `--recompute-modules` drops what each module
//!   produces (`ModelMemory::block_activation_bytes`): `core_attn` the scores, `layernorm` the
//!   pre-norm outputs, `mla_up_proj` MLA's Q, K, V, `moe_act` the experts' `fc2` inputs,
//!   `shared_experts` their inner activations, `mlp`/`moe` all of the layer but its input.
//!   `recompute_layers = N` recomputes the first `N` blocks of each virtual stage; the stored
//!   bytes of the other blocks are taken proportionally (exact when a stage's blocks are alike).
//! - **In flight** (micro-batches whose activations a stage holds at its peak): 1F1B and
//!   zero-bubble (ZB-H1 keeps 1F1B's peak): stage `i` holds `min(n, pp−i)`. Interleaved with
//!   `v` chunks (Megatron's warm-up): stage `i` holds `min(n·v, 2·(pp−i−1) + (v−1)·pp + 1)`
//!   chunks of `1/v` of its blocks, i.e. `pp·(1 + (pp−1)/(pp·v))` stages' worth on stage 0
//!   (Korthikanti §4.2.3). DualPipe (DeepSeek-V3 report, Table 2): rank `i` holds stages `i` and
//!   `pp−1−i` (two parameter copies) and `pp+1` micro-batches of a stage's activations, counted
//!   as half of them of each of its two stages.
//! - **Logits**: the fp32 logits of one micro-batch on the last stage, `4·T·V/t` (Korthikanti
//!   §4.3), once more per MTP module. The last stage runs each micro-batch's backward right after
//!   its forward, so one micro-batch's logits are alive at a time.
//! - **Extra**: seed 001's TP→SP all-to-all keeps `out_linear` replicated: `(1 − 1/t)` of the
//!   output projection's weights, gradients and optimizer state per attention block.
//! - **Transient**: the largest one-layer buffer: MoE dispatch (all-to-all send and receive, or
//!   the all-gathered tokens of the EP group) and the ZeRO-3 gather of one block.
//! - **Reserve**: CUDA context, NCCL buffers, allocator fragmentation ([`MemoryOptions`]).

use autoplan_graph::{Attention, ModelSpec, Norm, Optimizer, Positions, Precision};
use autoplan_plan::{
    Dispatcher, PlacementPolicy, Plan, Recompute, RecomputeModules, Schedule, TpSpTransition, Zero,
};
use serde::Serialize;

/// Bytes in a GiB.
pub const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Storage of 16-bit activations (Korthikanti counts 2 bytes per element).
const B16: f64 = 2.0;

/// Knobs of the memory model that are not part of the plan.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MemoryOptions {
    /// Bytes held outside the model: CUDA context (~0.5–1 GiB on H100), NCCL communicator
    /// buffers, PyTorch caching-allocator fragmentation. Default 3 GiB.
    pub reserve_bytes: f64,
    /// The attention core runs as one fused kernel (FlashAttention / cuDNN) that does not store
    /// the `s×s` scores, whatever the recompute mode. Default true (Megatron-Core's default
    /// since 2023); false reproduces Korthikanti et al. 2022.
    pub flash_attention: bool,
    /// Gradients accumulated in fp32 (Megatron's default with bf16). Default true; false means
    /// 16-bit gradients with an fp32 master-gradient copy in the optimizer (Megatron with fp16).
    pub fp32_main_grads: bool,
}

impl Default for MemoryOptions {
    fn default() -> Self {
        MemoryOptions {
            reserve_bytes: 3.0 * GIB,
            flash_attention: true,
            fp32_main_grads: true,
        }
    }
}

impl MemoryOptions {
    /// Megatron-LM's defaults for a training precision: fp32 main gradients except with fp16.
    pub fn megatron(precision: Precision) -> Self {
        MemoryOptions {
            fp32_main_grads: precision != Precision::Fp16,
            ..MemoryOptions::default()
        }
    }
}

/// Memory of the most loaded GPU, in bytes. `total` is the sum of the other byte fields.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct MemoryBreakdown {
    pub weights: f64,
    pub grads: f64,
    pub optimizer: f64,
    /// Stored activations of all micro-batches in flight (logits excluded).
    pub activations: f64,
    /// fp32 logits of one micro-batch (last stage; 0 elsewhere).
    pub logits: f64,
    /// Seed 001's replicated out_linear (weights + gradients + optimizer state beyond the split).
    pub extra: f64,
    /// Largest one-layer buffer: MoE dispatch, ZeRO-3 parameter gather.
    pub transient: f64,
    pub reserve: f64,
    pub total: f64,
    /// The pipeline stage (DualPipe: rank) this breakdown is for.
    pub stage: u32,
    /// Micro-batches of the stage's activations held at its peak.
    pub in_flight: f64,
}

impl MemoryBreakdown {
    /// Whether the total fits in `hbm_bytes`.
    pub fn fits(&self, hbm_bytes: f64) -> bool {
        self.total <= hbm_bytes
    }

    /// GiB over `hbm_bytes` (negative: headroom).
    pub fn excess_gib(&self, hbm_bytes: f64) -> f64 {
        (self.total - hbm_bytes) / GIB
    }

    fn finish(mut self) -> Self {
        self.total = self.weights
            + self.grads
            + self.optimizer
            + self.activations
            + self.logits
            + self.extra
            + self.transient
            + self.reserve;
        self
    }
}

/// Parameters of one node, by how tensor parallelism shards them.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Params {
    /// Split by `tp` (column/row-parallel matrices and column biases).
    split: f64,
    /// Replicated on every TP rank (norms, routers, MLA down-projections, row biases).
    replicated: f64,
    /// GQA key/value projections (+ biases): split by `tp` when `tp | kv_heads`, else each
    /// GPU keeps one kv head.
    kv: f64,
}

impl Params {
    fn per_gpu(&self, tp: f64, kv_heads: f64) -> f64 {
        self.split / tp + self.replicated + self.kv * kv_heads.max(tp) / kv_heads / tp
    }
}

/// Stored activation bytes per token of one node, by how TP/SP divides them.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Acts {
    /// Divided by `tp` only with sequence parallelism (inputs of norms and of column-parallel
    /// layers, dropout masks, MLA latents).
    seq: f64,
    /// Divided by `tp` (heads, FFN columns).
    split: f64,
    /// GQA `K` and `V` (kv-head replication as in [`Params::kv`]).
    kv: f64,
    /// The `s×s` attention scores (softmax output, dropout mask and output), divided by `tp`.
    scores: f64,
    /// The parts of `seq` and `split` that are GEMM inputs: stored in 8 bits under FP8
    /// training (Transformer Engine saves the quantized input for the weight gradient).
    lin_seq: f64,
    lin_split: f64,
}

/// Per-model constants of the memory model (see the crate docs). `Copy`; build once per model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelMemory {
    hidden: f64,
    seq_len: f64,
    vocab: f64,
    global_batch: f64,
    blocks: u32,
    dense_blocks: u32,
    mtp_modules: f64,
    kv_heads: f64,
    tied: bool,
    weight_bytes: f64,
    /// Optimizer bytes per parameter beyond the fp32 master-gradient copy.
    optimizer_bytes: f64,
    attn: Params,
    /// The output projection's weights (seed 001 replicates it).
    attn_out: f64,
    mlp: Params,
    /// MoE block without routed experts: norm, router (replicated), shared experts (split).
    moe_fixed: Params,
    /// All routed experts of one MoE block (split by `ep·moe_tp`).
    experts: f64,
    /// Routed experts per MoE block, `E` (0 for dense models).
    expert_count: f64,
    /// Position table (replicated) and final norm.
    positions: f64,
    final_norm: f64,
    /// MTP module besides its block: projection `2h×h` and three norms (replicated).
    mtp_fixed: f64,
    mtp_block_is_moe: bool,
    attn_act: Acts,
    mlp_act: Acts,
    /// MoE per token entering the node: norm input/output, router logits, dropout (seq);
    /// shared experts' inner activations (split).
    moe_act: Acts,
    /// Routed experts per token entering the node, before `moe_tp` and imbalance:
    /// `k · 2h` (expert input, × moe_tp), `k · inner` (expert inner activations).
    moe_routed_in: f64,
    moe_routed_inner: f64,
    /// Experts per token and the max/mean load factor (capacity factor when padded).
    top_k: f64,
    load_factor: f64,
    /// GPT-family dropout masks (1 byte per element).
    dropout: bool,
    /// One dropout mask per token (`h` bytes with dropout, else 0).
    dropout_bytes: f64,
    /// MLA's up-projected `Q`, `K`, `V` per token (`mla_up_proj` recompute drops them; 0 for
    /// GQA).
    mla_qkv: f64,
    /// FP8 training: GEMM inputs stored in 8 bits.
    fp8: bool,
    /// GEMM-input bytes within `moe_routed_inner` (the expert fc2 inputs).
    moe_routed_inner_lin: f64,
}

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

impl ModelMemory {
    /// The per-model constants, from the model's fields alone (no allocation).
    pub fn new(m: &ModelSpec) -> ModelMemory {
        let h = m.hidden as f64;
        let a = m.heads as f64;
        let dropout = m.family == autoplan_graph::Family::Gpt;
        let drop = if dropout { h } else { 0.0 };
        // Attention: parameters and activations (graph crate `attention_layer`, split by TP).
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

        let (mats, col_bias, row_bias) = mlp_params(m, m.ffn_hidden as f64);
        let mlp = Params {
            split: mats + col_bias,
            replicated: row_bias + norm(m, h),
            kv: 0.0,
        };
        let mlp_act = Acts {
            seq: 2.0 * B16 * h + drop,
            split: mlp_inner(m, m.ffn_hidden as f64),
            lin_seq: B16 * h,                     // fc1 input
            lin_split: B16 * m.ffn_hidden as f64, // fc2 input
            ..Acts::default()
        };

        let mut moe_fixed = Params::default();
        let mut moe_act = Acts::default();
        let (mut experts, mut top_k, mut load_factor) = (0.0, 0.0, 1.0);
        let (mut routed_in, mut routed_inner) = (0.0, 0.0);
        let mut routed_inner_lin = 0.0;
        if let Some(moe) = &m.moe {
            let e = moe.experts as f64;
            let (sm, sc, sr) = mlp_params(m, moe.shared_ffn_hidden as f64);
            let shared = moe.shared_experts as f64;
            moe_fixed = Params {
                split: shared * (sm + sc),
                replicated: norm(m, h) + h * e + shared * sr,
                kv: 0.0,
            };
            let (em, ec, er) = mlp_params(m, moe.expert_ffn_hidden as f64);
            experts = e * (em + ec + er);
            top_k = moe.expected_experts_per_token();
            load_factor = moe.capacity_factor.unwrap_or(moe.load_imbalance).max(1.0);
            // Norm input and output (router and shared-expert input), fp32 router logits.
            moe_act = Acts {
                seq: 2.0 * B16 * h + 4.0 * e + drop,
                split: shared * mlp_inner(m, moe.shared_ffn_hidden as f64),
                lin_seq: B16 * h, // shared experts' fc1 input
                lin_split: shared * B16 * moe.shared_ffn_hidden as f64,
                ..Acts::default()
            };
            routed_in = top_k * B16 * h;
            routed_inner = top_k * mlp_inner(m, moe.expert_ffn_hidden as f64);
            routed_inner_lin = top_k * B16 * moe.expert_ffn_hidden as f64;
        }

        let (weight_bytes, master) = match m.training.precision {
            Precision::Fp32 | Precision::Tf32 => (4.0, 0.0),
            Precision::Fp16 | Precision::Bf16 | Precision::Fp8 => (2.0, 4.0),
        };
        let states = match m.training.optimizer {
            Optimizer::Adam => 8.0,
            // Two BF16 moments (DeepSeek-V3 §3.3.3).
            Optimizer::AdamBf16Moments => 4.0,
            Optimizer::Sgd => 4.0,
        };
        let positions = match m.positions {
            Positions::Learned => m.max_positions as f64 * h,
            Positions::Rope => 0.0,
        };
        let dense_blocks = m.dense_blocks();
        ModelMemory {
            hidden: h,
            seq_len: m.training.seq_len as f64,
            vocab: m.vocab as f64,
            global_batch: m.training.global_batch as f64,
            blocks: m.layers,
            dense_blocks,
            mtp_modules: m.mtp_modules as f64,
            kv_heads,
            tied: m.tied_embeddings,
            weight_bytes,
            optimizer_bytes: master + states,
            attn,
            attn_out,
            mlp,
            moe_fixed,
            experts,
            expert_count: m.moe.as_ref().map_or(0.0, |x| x.experts as f64),
            positions,
            final_norm: norm(m, h),
            mtp_fixed: 2.0 * h * h + 3.0 * norm(m, h),
            // The MTP block is MoE in MoE models (graph crate `mtp_layer`).
            mtp_block_is_moe: m.moe.is_some(),
            attn_act,
            mlp_act,
            moe_act,
            moe_routed_in: routed_in,
            moe_routed_inner: routed_inner,
            top_k,
            load_factor,
            dropout,
            dropout_bytes: drop,
            mla_qkv,
            fp8: m.training.precision == Precision::Fp8,
            moe_routed_inner_lin: routed_inner_lin,
        }
    }

    /// Parameters of the whole model at `tp = 1` without vocab padding (must equal the graph
    /// crate's `total_params`; a test checks it).
    pub fn total_params(&self) -> f64 {
        let b = self.blocks as f64;
        let d = self.dense_blocks as f64;
        let whole = |p: Params| p.split + p.replicated + p.kv;
        let head = if self.tied {
            0.0
        } else {
            self.vocab * self.hidden
        };
        b * whole(self.attn)
            + d * whole(self.mlp)
            + (b - d) * (whole(self.moe_fixed) + self.experts)
            + self.vocab * self.hidden
            + self.positions
            + self.final_norm
            + head
    }

    /// Stored activation bytes of one transformer block for one micro-batch on one GPU, with
    /// `recompute` applied (selective: the plan's [`Plan::recompute_modules`]) and no
    /// full-recompute working set: the Korthikanti et al. 2022 per-layer figure (see the crate
    /// docs). `moe` picks the MoE block kind.
    pub fn block_activation_bytes(
        &self,
        plan: &Plan,
        opts: &MemoryOptions,
        moe: bool,
        recompute: Recompute,
    ) -> f64 {
        let modules = match recompute {
            Recompute::None => RecomputeModules(0),
            Recompute::Selective => plan.recompute_modules,
            Recompute::Full => return self.block_input_bytes(plan),
        };
        self.block_bytes(plan, opts, moe, modules)
    }

    /// A block's input, all that full recompute keeps of it: `2·T·h` (`/t` with SP).
    fn block_input_bytes(&self, plan: &Plan) -> f64 {
        let seq_div = if plan.sp { plan.tp.max(1) as f64 } else { 1.0 };
        let tokens = self.seq_len * plan.mbs as f64 / plan.cp.max(1) as f64;
        tokens * B16 * self.hidden / seq_div
    }

    /// Stored bytes of one block when the Megatron-Core `modules` are recomputed. Each module
    /// drops what it produces and keeps its input (Megatron-Core `transformer_layer.py`,
    /// `CheckpointWithoutOutput` / `tensor_parallel.checkpoint` per module):
    /// - `core_attn`: the `s×s` scores (only stored by an unfused attention kernel);
    /// - `layernorm`: each pre-norm's output, the next GEMM's input (`2·h` per norm, 1 byte
    ///   per element under FP8);
    /// - `mla_up_proj`: MLA's `Q`, `K`, `V` (the `q_b`/`kv_b` outputs after RoPE);
    /// - `moe_act`: the routed experts' activation output, their `fc2` input;
    /// - `shared_experts`: the shared experts' inner activations;
    /// - `mlp` / `moe`: everything of the dense MLP / MoE layer but its input (the norm input)
    ///   and the dropout mask after it.
    fn block_bytes(
        &self,
        plan: &Plan,
        opts: &MemoryOptions,
        moe: bool,
        m: RecomputeModules,
    ) -> f64 {
        let tp = plan.tp.max(1) as f64;
        let seq_div = if plan.sp { tp } else { 1.0 };
        let tokens = self.seq_len * plan.mbs as f64 / plan.cp.max(1) as f64;
        let keep_scores = !m.has(RecomputeModules::CORE_ATTN) && !opts.flash_attention;
        let kv_rep = self.kv_heads.max(tp) / self.kv_heads;
        // FP8: GEMM inputs take 1 byte instead of 2.
        let lin = if self.fp8 { 0.5 } else { 0.0 };
        let acts = |x: Acts| {
            (x.seq - lin * x.lin_seq) / seq_div
                + (x.split - lin * x.lin_split) / tp
                + x.kv * kv_rep / tp
                + if keep_scores { x.scores / tp } else { 0.0 }
        };
        // The pre-norm output is the first GEMM's input (a `lin_seq` term of every part).
        let drop_norm_out = |mut x: Acts| {
            if m.has(RecomputeModules::LAYERNORM) {
                x.seq -= B16 * self.hidden;
                x.lin_seq -= B16 * self.hidden;
            }
            x
        };
        // Only the input (the norm input) and the dropout mask after the layer stay.
        let input_only = Acts {
            seq: B16 * self.hidden + self.dropout_bytes,
            ..Acts::default()
        };
        let mut attn = drop_norm_out(self.attn_act);
        if m.has(RecomputeModules::MLA_UP_PROJ) {
            attn.split -= self.mla_qkv;
        }
        let mut per_token = acts(attn);
        if moe {
            if m.has(RecomputeModules::MOE) {
                return tokens * (per_token + acts(input_only));
            }
            let mut fixed = drop_norm_out(self.moe_act);
            if m.has(RecomputeModules::SHARED_EXPERTS) {
                fixed.split = 0.0;
                fixed.lin_split = 0.0;
            }
            let (mut inner, mut inner_lin) = (self.moe_routed_inner, self.moe_routed_inner_lin);
            if m.has(RecomputeModules::MOE_ACT) {
                inner -= inner_lin;
                inner_lin = 0.0;
            }
            let moe_tp = plan.moe_tp.max(1) as f64;
            // Tokens entering the MoE layer are the SP shard (tp copies without SP).
            per_token += acts(fixed)
                + (self.load_factor
                    * ((1.0 - lin) * self.moe_routed_in * moe_tp + inner - lin * inner_lin))
                    / seq_div;
        } else if m.has(RecomputeModules::MLP) {
            per_token += acts(input_only);
        } else {
            per_token += acts(drop_norm_out(self.mlp_act));
        }
        tokens * per_token
    }

    /// Memory of the most loaded GPU (max `total` over the first, second and last stages —
    /// the candidates given the stage layout and in-flight counts). No allocation.
    pub fn breakdown(&self, plan: &Plan, opts: &MemoryOptions) -> MemoryBreakdown {
        let pp = plan.pp.max(1);
        let mut best = self.stage(plan, opts, 0);
        for stage in [1, pp.saturating_sub(1)] {
            if stage < pp && stage > 0 {
                let b = self.stage(plan, opts, stage);
                if b.total > best.total {
                    best = b;
                }
            }
        }
        best
    }

    /// An admissible lower bound: `floor(plan) ≤ breakdown(q).total` for every plan `q` that
    /// differs from `plan` only in `zero`, `recompute` (and its modules), `recompute_layers`,
    /// `mbs`, `sp`,
    /// `transition`, `dispatcher`, `placement` (and knobs memory ignores: algorithms, rank
    /// order, overlap, CP exchange). Memory rises with `mbs` and with the replicas of a
    /// balanced placement and falls with every recompute module added (selective of all of them
    /// can undercut full recompute's working set), with SP and with the all-reduce transition,
    /// so the bound takes those at their minimum (contiguous placement: no replicas; the least
    /// of full and all-module recompute) and the least of the ZeRO stages and dispatchers.
    pub fn floor(&self, plan: &Plan, opts: &MemoryOptions) -> f64 {
        let mut lo = f64::INFINITY;
        // Full recompute keeps the least per block but adds one block's working set; selective
        // recompute of every module can undercut it when few blocks are in flight.
        let least = [
            (Recompute::Full, RecomputeModules::DEFAULT),
            (Recompute::Selective, RecomputeModules::ALL),
        ];
        for zero in 0..=3 {
            for (dispatcher, (recompute, recompute_modules)) in
                [Dispatcher::AllToAll, Dispatcher::AllGather]
                    .into_iter()
                    .flat_map(|d| least.into_iter().map(move |r| (d, r)))
            {
                let q = Plan {
                    zero: Zero(zero),
                    recompute,
                    recompute_modules,
                    recompute_layers: None,
                    mbs: 1,
                    sp: true,
                    tp_sp_transition: TpSpTransition::AllReduceSlice,
                    dispatcher,
                    placement: PlacementPolicy::Contiguous,
                    ..*plan
                };
                lo = lo.min(self.breakdown(&q, opts).total);
            }
        }
        lo
    }

    /// Blocks of stage `stage` (of the plan's layout), split into (dense, MoE).
    fn stage_blocks(&self, plan: &Plan, stage: u32) -> (f64, f64) {
        let spec_layers = self.blocks;
        // StageLayout needs a ModelSpec only for the block count; rebuild it from the plan.
        let layout = layout_of(plan, spec_layers);
        let (first, n) = match layout {
            Some(l) => (l.first_block(stage), l.blocks(stage)),
            None => {
                // Invalid layout (check() rejects it): spread evenly, rounding up.
                let n = spec_layers.div_ceil(plan.pp.max(1));
                ((stage * n).min(spec_layers), n)
            }
        };
        let end = first + n;
        let dense = self.dense_blocks.min(end).saturating_sub(first);
        (dense as f64, (n - dense.min(n)) as f64)
    }

    /// Redundant expert copies each GPU of the EP group holds per MoE block under the plan's
    /// placement policy: 0 for contiguous placement, `R` for `placement=balanced:R` (seed 004
    /// §4's virtual experts, DeepSeek EPLB's redundant experts), capped at `E − E/ep`: a GPU
    /// holds each expert at most once, so further slots could hold nothing new.
    pub fn replicas_per_gpu(&self, plan: &Plan) -> f64 {
        match plan.placement {
            PlacementPolicy::Contiguous => 0.0,
            PlacementPolicy::Balanced { redundant } => {
                let e = self.expert_count;
                (redundant as f64)
                    .min(e - e / plan.ep.max(1) as f64)
                    .max(0.0)
            }
        }
    }

    /// Routed-expert parameters of one MoE block on one GPU: the `E/ep` experts of its EP rank
    /// plus its [`replicas_per_gpu`](Self::replicas_per_gpu) copies, each split by `moe_tp`.
    /// Replicas are trained copies: their gradients and optimizer state are counted and
    /// sharded over the expert data-parallel group like the experts' own.
    pub fn experts_per_gpu(&self, plan: &Plan) -> f64 {
        if self.expert_count <= 0.0 {
            return 0.0;
        }
        let per_expert = self.experts / self.expert_count;
        let local = self.expert_count / plan.ep.max(1) as f64 + self.replicas_per_gpu(plan);
        per_expert * local / plan.moe_tp.max(1) as f64
    }

    /// Static bytes (weights, grads, optimizer, seed-001 extra) and the gathered weights of
    /// the largest block under ZeRO-3, for the parameters of stage `stage`.
    fn stage_params(&self, plan: &Plan, stage: u32, dense: f64, moe: f64) -> StageParams {
        let tp = plan.tp.max(1) as f64;
        let pp = plan.pp.max(1);
        let g = self.kv_heads;
        let attn = self.attn.per_gpu(tp, g);
        let mlp = self.mlp.per_gpu(tp, g);
        let moe_fixed = self.moe_fixed.per_gpu(tp, g);
        let experts = self.experts_per_gpu(plan);
        let blocks = dense + moe;
        let mut ne = blocks * attn + dense * mlp + moe * moe_fixed;
        let mut ex = moe * experts;
        // Vocabulary padded to a multiple of 128·tp (Megatron), split by tp.
        let unit = 128.0 * tp;
        let vocab_gpu = (self.vocab / unit).ceil() * unit / tp;
        if stage == 0 {
            ne += vocab_gpu * self.hidden + self.positions;
        }
        if stage + 1 == pp {
            ne += self.final_norm;
            if !self.tied || pp > 1 {
                ne += vocab_gpu * self.hidden;
            }
            if self.mtp_modules > 0.0 {
                let (blk_ne, blk_ex) = if self.mtp_block_is_moe {
                    (attn + moe_fixed, experts)
                } else {
                    (attn + mlp, 0.0)
                };
                ne += self.mtp_modules * (self.mtp_fixed + blk_ne);
                ex += self.mtp_modules * blk_ex;
            }
        }
        let o_extra = if plan.tp_sp_transition == TpSpTransition::AllToAll {
            blocks * self.attn_out * (1.0 - 1.0 / tp)
        } else {
            0.0
        };
        let largest_block = attn
            + if moe > 0.0 {
                moe_fixed.max(mlp * f64::from(dense > 0.0))
            } else {
                mlp
            };
        StageParams {
            dense: ne,
            expert: ex,
            o_extra,
            largest_dense_block: if blocks > 0.0 { largest_block } else { 0.0 },
            largest_expert_block: if moe > 0.0 { experts } else { 0.0 },
        }
    }

    /// Activations of one micro-batch of stage `stage`, with recompute; returns (stored bytes
    /// excluding logits, the extra working set of one full-recompute block, the number of
    /// recomputed blocks, logits bytes).
    fn stage_acts(
        &self,
        plan: &Plan,
        opts: &MemoryOptions,
        stage: u32,
        dense: f64,
        moe: f64,
    ) -> (f64, f64, f64, f64) {
        let pp = plan.pp.max(1);
        let tp = plan.tp.max(1) as f64;
        let seq_div = if plan.sp { tp } else { 1.0 };
        let tokens = self.seq_len * plan.mbs as f64 / plan.cp.max(1) as f64;
        let blocks = dense + moe;
        let none = |is_moe| self.block_activation_bytes(plan, opts, is_moe, Recompute::None);
        let mode = |is_moe| self.block_activation_bytes(plan, opts, is_moe, plan.recompute);
        let all_none = dense * none(false) + moe * none(true);
        let all_mode = dense * mode(false) + moe * mode(true);
        // Blocks recomputed: all, or the first N of each of the vpp chunks.
        let recomputed = match (plan.recompute, plan.recompute_layers) {
            (Recompute::None, _) => 0.0,
            (_, None) => blocks,
            (_, Some(n)) => (n as f64 * plan.vpp.max(1) as f64).min(blocks),
        };
        let frac = if blocks > 0.0 {
            recomputed / blocks
        } else {
            0.0
        };
        let mut stored = frac * all_mode + (1.0 - frac) * all_none;
        // Full recompute: while a block is recomputed its selective-level activations exist
        // in addition to the other checkpoints (its own checkpoint is part of them). The
        // block's size is the stage's average, as for `recompute_layers` above; the caller
        // scales it by min(1, recomputed blocks in flight), which keeps full ≤ selective.
        let working = if plan.recompute == Recompute::Full && recomputed > 0.0 {
            let sel = |is_moe| self.block_bytes(plan, opts, is_moe, RecomputeModules::DEFAULT);
            let avg = (dense * sel(false) + moe * sel(true)) / blocks;
            (avg - mode(false)).max(0.0)
        } else {
            0.0
        };
        let mut logits = 0.0;
        if stage == 0 && self.dropout {
            stored += tokens * self.hidden / seq_div; // embedding dropout mask
        }
        if stage + 1 == pp {
            let unit = 128.0 * tp;
            let vocab_gpu = (self.vocab / unit).ceil() * unit / tp;
            // Final-norm input and LM-head input (Korthikanti §4.3), then fp32 logits.
            stored += tokens * 2.0 * B16 * self.hidden / seq_div;
            logits = (1.0 + self.mtp_modules) * 4.0 * tokens * vocab_gpu;
            if self.mtp_modules > 0.0 {
                // Each MTP module: its block plus two norm inputs and the projection input.
                let blk = if self.mtp_block_is_moe {
                    mode(true)
                } else {
                    mode(false)
                };
                stored += self.mtp_modules * (blk + tokens * 3.0 * B16 * self.hidden / seq_div);
            }
        }
        (stored, working, recomputed, logits)
    }

    /// Micro-batches in flight on `stage` (units of the stage's per-micro-batch activations).
    fn in_flight(&self, plan: &Plan, stage: u32) -> f64 {
        let pp = plan.pp.max(1) as f64;
        let i = stage as f64;
        let n = self.global_batch / (plan.mbs.max(1) as f64 * plan.dp.max(1) as f64);
        match plan.schedule {
            Schedule::OneF1B | Schedule::ZeroBubble => n.min(pp - i),
            Schedule::Interleaved => {
                let v = plan.vpp.max(1) as f64;
                let chunks = (n * v).min(2.0 * (pp - i - 1.0) + (v - 1.0) * pp + 1.0);
                chunks / v
            }
            Schedule::DualPipe => n.min(pp + 1.0),
        }
    }

    fn stage(&self, plan: &Plan, opts: &MemoryOptions, stage: u32) -> MemoryBreakdown {
        let pp = plan.pp.max(1);
        let (dense, moe) = self.stage_blocks(plan, stage);
        let mut p = self.stage_params(plan, stage, dense, moe);
        let (stored, working, recomputed, mut logits) =
            self.stage_acts(plan, opts, stage, dense, moe);
        let in_flight = self.in_flight(plan, stage);
        // One block's working set, or less when under one recomputed block is in flight.
        let mut activations = stored * in_flight + working * (in_flight * recomputed).min(1.0);
        if plan.schedule == Schedule::DualPipe && pp > 1 {
            // DualPipe rank `stage` also holds the mirror stage pp−1−stage.
            let mirror = pp - 1 - stage;
            if mirror != stage {
                let (d2, m2) = self.stage_blocks(plan, mirror);
                let q = self.stage_params(plan, mirror, d2, m2);
                p.dense += q.dense;
                p.expert += q.expert;
                p.o_extra += q.o_extra;
                let (s2, w2, r2, l2) = self.stage_acts(plan, opts, mirror, d2, m2);
                // (pp+1) micro-batches of a stage's activations: half of them of each stage.
                let mirror_acts = s2 * in_flight + w2 * (in_flight * r2).min(1.0);
                activations = (activations + mirror_acts) / 2.0;
                logits += l2;
            }
        }

        let zero = plan.zero.0;
        let d_dense = (plan.dp.max(1) * plan.cp.max(1)) as f64;
        let d_exp = plan.edp().max(1) as f64;
        let shard = |z: u8, d: f64| if zero >= z { d } else { 1.0 };
        let (wb, gb) = (
            self.weight_bytes,
            if opts.fp32_main_grads {
                4.0
            } else {
                self.weight_bytes
            },
        );
        // Without fp32 main grads the optimizer keeps an fp32 master-gradient copy (if the
        // weights are 16-bit).
        let ob = self.optimizer_bytes
            + if !opts.fp32_main_grads && wb < 4.0 {
                4.0
            } else {
                0.0
            };
        let per_param = |d: f64| wb / shard(3, d) + gb / shard(2, d) + ob / shard(1, d);
        let weights = wb * (p.dense / shard(3, d_dense) + p.expert / shard(3, d_exp));
        let grads = gb * (p.dense / shard(2, d_dense) + p.expert / shard(2, d_exp));
        let optimizer = ob * (p.dense / shard(1, d_dense) + p.expert / shard(1, d_exp));
        let extra = p.o_extra * per_param(d_dense);

        // Transient: ZeRO-3 gathers one block (when it is sharded), MoE dispatch buffers.
        let mut transient: f64 = 0.0;
        if zero >= 3 {
            let mut gather = 0.0;
            if d_dense > 1.0 {
                gather += wb * p.largest_dense_block;
            }
            if d_exp > 1.0 {
                gather += wb * p.largest_expert_block;
            }
            transient = gather;
        }
        let has_moe =
            moe > 0.0 || (stage + 1 == pp && self.mtp_block_is_moe && self.mtp_modules > 0.0);
        if has_moe {
            let tp = plan.tp.max(1) as f64;
            let seq_div = if plan.sp { tp } else { 1.0 };
            let tokens = self.seq_len * plan.mbs as f64 / plan.cp.max(1) as f64 / seq_div;
            let moe_tp = plan.moe_tp.max(1) as f64;
            let row = B16 * self.hidden;
            let received = tokens * self.top_k * self.load_factor * moe_tp * row;
            let dispatch = match plan.dispatcher {
                // DeepEP's buffers hold what an all-to-all's do (its RDMA and NVLink staging
                // buffers are allocated once, inside the framework reserve).
                Dispatcher::AllToAll | Dispatcher::DeepEp => tokens * self.top_k * row + received,
                Dispatcher::AllGather => tokens * plan.ep.max(1) as f64 * moe_tp * row + received,
            };
            transient = transient.max(dispatch);
        }
        MemoryBreakdown {
            weights,
            grads,
            optimizer,
            activations,
            logits,
            extra,
            transient,
            reserve: opts.reserve_bytes,
            total: 0.0,
            stage,
            in_flight,
        }
        .finish()
    }
}

struct StageParams {
    /// Non-expert parameters on the GPU (sharded by the dense DP group under ZeRO).
    dense: f64,
    /// Routed-expert parameters on the GPU (sharded by the expert DP group).
    expert: f64,
    /// Seed 001: replicated out_linear parameters beyond the TP split.
    o_extra: f64,
    largest_dense_block: f64,
    largest_expert_block: f64,
}

/// The plan's stage layout for a model of `blocks` blocks.
fn layout_of(plan: &Plan, blocks: u32) -> Option<autoplan_plan::StageLayout> {
    plan.stage_layout_for_blocks(blocks)
}

/// [`ModelMemory::new`] then [`ModelMemory::breakdown`]: the memory of the most loaded GPU.
pub fn memory(model: &ModelSpec, plan: &Plan, opts: &MemoryOptions) -> MemoryBreakdown {
    ModelMemory::new(model).breakdown(plan, opts)
}
