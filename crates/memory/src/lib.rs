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
//!   (Korthikanti §4.2.3); where the pipeline split puts the embedding or the loss in a chunk
//!   slot (`pipeline_split`), the forwards in flight are counted per chunk (groups of `pp`
//!   micro-batches per chunk, Megatron's warm-up order) and weighed by each chunk's blocks.
//!   DualPipe (DeepSeek-V3 report, Table 2): rank `i` holds stages `i` and
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
//! - **Offload** (not part of `total`, in [`MemoryBreakdown::host`]): `offload_optimizer`'s
//!   share of the optimizer state, `offload_params`' ZeRO-3 shards, and `offload_activations`'
//!   layers: `min(N, blocks)` of a stage's average block's stored bytes per micro-batch in
//!   flight leave HBM for host memory, one layer's worth staying for the copy in flight
//!   (`activations.rs`, `offloaded_acts`).

mod activations;
mod constants;
mod floor;
mod params;
mod stage;

use autoplan_graph::ModelSpec;
use autoplan_plan::Plan;
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
    /// autoplan-evaluate sets it from its gradient dtype (`EvalOptions::with_profile` decides
    /// it by the training precision).
    pub fp32_main_grads: bool,
    /// The framework keeps the parameters in fp32 and casts them to 16 bits only where they
    /// are used, as PyTorch's own mixed precision does (FSDP2's `MixedPrecisionPolicy`: "FSDP
    /// keeps the high-precision sharded parameters in memory anyway ... The optimizer step
    /// uses the sharded parameters in the original dtype", `torch/distributed/fsdp/
    /// _fully_shard/_fsdp_api.py` @ torch 2.15.0 L15-41; FSDP1's `MixedPrecision`: "the
    /// *sharded* parameters are kept in full precision", gradients upcast to it after the
    /// backward, `fsdp/api.py` L110-140): 4 bytes of parameter, 4 of gradient and the
    /// optimizer's states per parameter, no 16-bit copy beside them (the gathered one is
    /// transient) and no separate fp32 master. Default false: Megatron's and DeepSpeed's
    /// 16-bit parameters with an fp32 master in the optimizer (the bytes-per-parameter table
    /// above).
    pub fp32_params: bool,
}

impl Default for MemoryOptions {
    fn default() -> Self {
        MemoryOptions {
            reserve_bytes: 3.0 * GIB,
            flash_attention: true,
            fp32_main_grads: true,
            fp32_params: false,
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
    /// Host memory this GPU's process uses for offloaded state (`offload_optimizer`,
    /// `offload_params`, `offload_activations`), bytes;
    /// not part of `total` (HBM).
    #[serde(skip_serializing_if = "is_zero")]
    pub host: f64,
    pub total: f64,
    /// The pipeline stage (DualPipe: rank) this breakdown is for.
    pub stage: u32,
    /// Micro-batches of the stage's activations held at its peak.
    pub in_flight: f64,
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
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
    /// Position table and embedding norm (replicated), and final norm.
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
    /// A norm after the word embedding (BLOOM): its 16-bit input is stored on the first stage.
    embedding_norm: bool,
    /// MLA's up-projected `Q`, `K`, `V` per token (`mla_up_proj` recompute drops them; 0 for
    /// GQA).
    mla_qkv: f64,
    /// FP8 training: GEMM inputs stored in 8 bits.
    fp8: bool,
    /// GEMM-input bytes within `moe_routed_inner` (the expert fc2 inputs).
    moe_routed_inner_lin: f64,
}

impl ModelMemory {
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

    /// Bytes per stored weight (2 for 16-bit training, 4 for fp32): what an optimizer
    /// offload uploads per parameter.
    pub fn weight_bytes(&self) -> f64 {
        self.weight_bytes
    }

    /// The most host memory a GPU of `plan` uses for offloaded state (max over the stages
    /// [`ModelMemory::breakdown`] compares), bytes; 0 without offload.
    pub fn host_peak(&self, plan: &Plan, opts: &MemoryOptions) -> f64 {
        if !plan.offloads() {
            return 0.0;
        }
        let pp = plan.pp.max(1);
        [0, 1, pp.saturating_sub(1)]
            .into_iter()
            .filter(|&s| s < pp)
            .map(|s| self.stage(plan, opts, s).host)
            .fold(0.0, f64::max)
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
}

impl ModelMemory {
    /// Memory of one pipeline stage's GPU (`stage < pp`): what [`ModelMemory::breakdown`]
    /// takes the maximum of. The HTML report draws every stage against HBM.
    pub fn stage_breakdown(
        &self,
        plan: &Plan,
        opts: &MemoryOptions,
        stage: u32,
    ) -> MemoryBreakdown {
        self.stage(plan, opts, stage.min(plan.pp.max(1) - 1))
    }
}

/// [`ModelMemory::new`] then [`ModelMemory::breakdown`]: the memory of the most loaded GPU.
pub fn memory(model: &ModelSpec, plan: &Plan, opts: &MemoryOptions) -> MemoryBreakdown {
    ModelMemory::new(model).breakdown(plan, opts)
}
