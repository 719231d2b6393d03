//! Evaluate one parallel training plan: the per-layer communication inventory, the step time
//! (compute + exposed communication + pipeline bubble + optimizer), throughput, MFU/HFU and the
//! per-GPU memory peak, composed from the graph, cost and memory crates.
//!
//! Boundary: no IO and no search; this crate scores a plan someone else proposes. Collective
//! times come from `autoplan-cost`, memory from `autoplan-memory`, validity from `autoplan-plan`.
//!
//! The principal type is [`Evaluator`]: built once per (model, cluster) — it precomputes the
//! per-layer-kind shapes — then [`Evaluator::evaluate`] scores a plan without allocating (the
//! search calls it millions of times) and [`Evaluator::report`] gives the full breakdown with the
//! per-layer communication table.
//!
//! The model is Calculon's (Isaev et al., SC 2023; the project's reference note on it): a step is
//! `M · t_stage + bubble + exposed DP + optimizer`, where `t_stage` is the forward + backward
//! (+ recompute) time of one micro-batch on the busiest pipeline stage plus the exposed
//! communication of its layers, extended with what Calculon lacks: CP, EP/`moe_tp`, ZeRO-3,
//! GQA/MLA/SwiGLU, the embedding, LM head and cross-entropy, algorithm choice and rank placement.
//!
//! ```
//! use autoplan_evaluate::{EvalOptions, Evaluator};
//! use autoplan_plan::Plan;
//!
//! let model = autoplan_graph::resolve_model("gpt3-175b").unwrap();
//! let cluster = autoplan_cost::calibration::dgx_a100(8);
//! let eval = Evaluator::new(&model, &cluster, EvalOptions::default());
//! let plan = Plan { tp: 8, pp: 8, mbs: 1, recompute: autoplan_plan::Recompute::Full, ..Plan::default() };
//! let m = eval.evaluate(&plan).unwrap();
//! assert!(m.mfu > 0.2 && m.mfu < 0.7, "{m:?}");
//! ```

pub mod balance;
mod comm;
mod core;
mod flops;
mod hardware;
mod profile;
pub mod runs;
pub mod validate;

pub use autoplan_memory::{MemoryBreakdown, MemoryOptions};

pub use autoplan_plan::framework::Elementwise;
pub use balance::{
    balanced_imbalance, balanced_packing, contiguous_imbalance, Packing, ReplicaLayout,
};
pub use comm::{CommKind, CommRow, Group, Pass};
pub use core::{
    unfused_elementwise_bytes, Evaluator, MoeWorkRow, OpenLists, Partial, UnfusedBytes,
    ADAM_BYTES_PER_PARAM, ADAM_STEP_BYTES,
};
pub use flops::{AttentionFlops, ModelFlops};
pub use hardware::check_hardware;

use serde::Serialize;

/// The attention kernel, a framework's choice (`CostProfile::attention`).
pub use autoplan_plan::framework::AttentionKernel;

/// Software settings of the run that are not parallelism knobs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EvalOptions {
    pub attention: AttentionKernel,
    /// Overlap the DP gradient reduce-scatter/all-reduce with the backward pass and the ZeRO
    /// parameter all-gather with the forward pass (Megatron `--overlap-grad-reduce`,
    /// `--overlap-param-gather`; PyTorch DDP buckets).
    pub dp_overlap: bool,
    /// With pp > 1 the once-per-step DP reduction overlaps the last micro-batch's backward
    /// (`dp_overlap` permitting); `false`: it runs after the pipeline's step, exposed
    /// (`CostProfile::dp_overlap_with_pp`: PyTorch's pipelining).
    pub dp_overlap_with_pp: bool,
    /// Bytes per element of the gradient buffer, which the DP reduction moves unless the
    /// framework casts it (`grad_reduce_bytes`): 4 (Megatron keeps fp32 main grads and reduces
    /// them in fp32 under bf16) or 2 (`--grad-reduce-in-bf16`, fp16 runs).
    pub grad_bytes: f64,
    /// Bytes per gradient element on the wire of the DP (and EDP) reduction where the
    /// framework casts the gradients before reducing them (`CostProfile::
    /// reduce_in_training_dtype`: DeepSpeed's `communication_data_type`); `None`: the buffer's
    /// `grad_bytes`. Read through [`EvalOptions::reduce_bytes`].
    pub grad_reduce_bytes: Option<f64>,
    /// Parameters per DDP bucket (Megatron: 40M): the last bucket's reduction is never hidden.
    pub bucket_params: f64,
    /// ZeRO-1/2 reduce their gradients with an all-reduce of each bucket, every rank keeping
    /// its slice (DeepSpeed's default, frameworks.md §3.5), instead of a reduce-scatter
    /// (Megatron's distributed optimizer, FSDP): twice the bytes.
    pub zero_grad_all_reduce: bool,
    /// The MoE layers dispatch and combine by GShard's dense one-hot einsums (DeepSpeed-MoE
    /// before v0.19.4; `CostProfile::moe_dense_dispatch`), priced in the MoE work table
    /// (`core/moe.rs`) in place of the permutation copies.
    pub moe_dense_dispatch: bool,
    /// Which elementwise ops run as kernels of their own (eager PyTorch), each adding the
    /// bytes of its intermediate tensors to the fused kernels' traffic
    /// ([`unfused_elementwise_bytes`]); [`Elementwise::FUSED`] by default.
    pub elementwise: Elementwise,
    /// Offloaded activations move beside the compute, the next layer prefetched (Megatron-Core
    /// through Transformer Engine), not on the compute stream (DeepSpeed); the profile's
    /// `activation_offload_overlap` (`core/offload.rs`).
    pub activation_offload_overlap: bool,
    /// Options passed to the memory model (its `flash_attention` and `fp32_main_grads` follow
    /// `attention` and `grad_bytes`).
    pub memory: MemoryOptions,
    /// Compute-efficiency constants of the GPU; `None`: the calibrated
    /// `autoplan_cost::compute::ARCH_TABLE` entry of its architecture (`autoplan validate
    /// --fit` tries others).
    pub efficiency: Option<autoplan_cost::compute::ArchEfficiency>,
    /// How MFU, HFU and the TFLOP/s figures count attention ([`AttentionFlops`]; causal by
    /// default, `validate` scores a row in the convention it declares).
    pub flops: AttentionFlops,
    /// Compute time beyond the priced kernels, as a fraction of it (the profile's fitted
    /// `CostProfile::unpriced_compute`; 0 by default): every class's compute is scaled by
    /// `1 + unpriced_compute`.
    pub unpriced_compute: f64,
    /// The plan's `tp_overlap` hides the TP collectives behind the GEMMs (Transformer Engine's
    /// tiled overlap); `false`: not credited (the profile's `CostProfile::tp_overlap_hides`).
    pub tp_overlap_hides: bool,
    /// Without the tiled TP overlap, each column-parallel GEMM's input-gradient collective
    /// runs beside its weight-gradient GEMM (the profile's `CostProfile::tp_bwd_async`:
    /// Megatron's asynchronous linear); `false`: exposed.
    pub tp_bwd_async: bool,
    /// Bytes per parameter of the DP parameter all-gathers (ZeRO-1/2's once per step, ZeRO-3's
    /// per unit): 2, the 16-bit parameters; 1 where the parameters are gathered in FP8
    /// (Megatron's `--fp8-param-gather`, "perform the param all-gather in fp8"), plus MXFP8's
    /// E8M0 scale of every 32 elements.
    pub param_gather_bytes: f64,
    /// ZeRO-1/2's parameter all-gather overlaps the next forward (`--overlap-param-gather`)
    /// where `dp_overlap` overlaps the DP communication; `false`: it runs exposed after the
    /// optimizer step (NeMo's performance scripts turn the overlap off for MXFP8,
    /// `validate/harness.rs`).
    pub param_gather_overlap: bool,
    /// Seconds of host time per local expert GEMM of a dropless MoE layer, beyond the GPU's
    /// per-GEMM latency (the profile's `CostProfile::expert_gemm_host`; Megatron-Core's by
    /// default): the GPU waits for each expert's launch after the dispatcher's host sync.
    pub expert_gemm_host: f64,
    /// DeepEP's dispatch sends FP8 (an e4m3 byte and a 1×128 tile's fp32 scale per element)
    /// under block-scaled FP8 training, as DeepSeek's own framework does (DeepSeek-V3 report
    /// §3.3.3, "Low-Precision Storage and Communication"): the forward dispatch and the
    /// combine's backward. `false` by default: Megatron-Core's DeepEP path hands the dispatch
    /// its BF16 hidden states (`FusedDispatch.forward`, `transformer/moe/fused_a2a.py` @
    /// megatron-core 0.14.0 L113-124, and 0.16.1, whose HybridEP path says "Currently, we do
    /// not support fp8 dispatch", L355), and every plan autoplan exports runs there or in
    /// torchtitan; `validate` sets it for the runs of DeepSeek's reports.
    pub fp8_dispatch: bool,
}

impl Default for EvalOptions {
    fn default() -> Self {
        EvalOptions {
            attention: AttentionKernel::Flash,
            dp_overlap: true,
            dp_overlap_with_pp: true,
            grad_bytes: 4.0,
            grad_reduce_bytes: None,
            bucket_params: 40e6,
            zero_grad_all_reduce: false,
            moe_dense_dispatch: false,
            activation_offload_overlap: true,
            elementwise: Elementwise::FUSED,
            memory: MemoryOptions::default(),
            efficiency: None,
            flops: AttentionFlops::Causal,
            unpriced_compute: 0.0,
            tp_overlap_hides: true,
            tp_bwd_async: true,
            param_gather_bytes: 2.0,
            param_gather_overlap: true,
            expert_gemm_host: autoplan_plan::framework::CostProfile::MEGATRON_CORE.expert_gemm_host,
            fp8_dispatch: false,
        }
    }
}

/// Why a plan cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Infeasible {
    /// The plan is not valid for this model and cluster (degrees, divisibility, ...).
    #[error("invalid plan: {0}")]
    Invalid(#[from] autoplan_plan::Invalid),
    /// The busiest GPU needs more than its HBM.
    #[error("out of memory: needs {need_gib:.2} GiB of {hbm_gib:.2} GiB HBM ({excess_gib:.2} GiB over)", need_gib = peak_bytes / GIB, hbm_gib = hbm_bytes / GIB, excess_gib = (peak_bytes - hbm_bytes) / GIB)]
    OutOfMemory { peak_bytes: f64, hbm_bytes: f64 },
    /// The offloaded state of the node's GPUs needs more than its host memory (`[host]` of
    /// the cluster; none there: no host memory to offload to).
    #[error("out of host memory: offload needs {need_gib:.2} GiB per GPU, the node's host memory gives {cap_gib:.2} GiB per GPU", need_gib = host_bytes / GIB, cap_gib = capacity_bytes / GIB)]
    OutOfHostMemory {
        host_bytes: f64,
        capacity_bytes: f64,
    },
}

pub(crate) const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// The figures of merit of a plan (the search's fast path result; `Copy`, no heap).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Metrics {
    /// Seconds per optimizer step (global batch).
    pub step_time_s: f64,
    pub tokens_per_s: f64,
    pub tokens_per_s_per_gpu: f64,
    /// Model FLOPs (see [`ModelFlops`]) per second per GPU / dense peak at the model precision.
    pub mfu: f64,
    /// Hardware FLOPs (model + recompute) per second per GPU / dense peak.
    pub hfu: f64,
    /// Model TFLOP/s per GPU.
    pub tflops_per_gpu: f64,
    /// Hardware TFLOP/s per GPU (counting recomputed FLOPs).
    pub hw_tflops_per_gpu: f64,
    /// Peak bytes on the most loaded GPU.
    pub memory_peak_bytes: f64,
    /// The communication kind with the most exposed time.
    pub dominant_comm: CommKind,
    /// Total exposed communication time per step, seconds.
    pub exposed_comm_s: f64,
    /// Pipeline bubble per step, seconds.
    pub bubble_s: f64,
}

/// Where the step time goes (seconds per step). The fields sum to the step time.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct StepBreakdown {
    /// GEMMs, attention core and memory-bound kernels, forward and backward, of all
    /// micro-batches on the busiest stage (recompute excluded).
    pub compute_s: f64,
    /// Recomputed forward work.
    pub recompute_s: f64,
    pub tp_exposed_s: f64,
    pub cp_exposed_s: f64,
    pub ep_exposed_s: f64,
    pub pp_exposed_s: f64,
    pub dp_exposed_s: f64,
    pub bubble_s: f64,
    pub optimizer_s: f64,
    /// Optimizer offload to host memory (`offload_optimizer`): the pipelined gradient
    /// download, CPU optimizer step and parameter upload of the offloaded share
    /// (`core/offload.rs`); `optimizer_s` is then the GPU's share only.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub offload_s: f64,
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

impl StepBreakdown {
    pub fn total(&self) -> f64 {
        self.compute_s
            + self.recompute_s
            + self.tp_exposed_s
            + self.cp_exposed_s
            + self.ep_exposed_s
            + self.pp_exposed_s
            + self.dp_exposed_s
            + self.bubble_s
            + self.optimizer_s
            + self.offload_s
    }
}

/// Where the layers of the model sit and which pipeline stage bounds the step.
#[derive(Debug, Clone, Serialize)]
pub struct StageSummary {
    pub stage: u32,
    pub blocks: u32,
    pub dense_blocks: u32,
    pub moe_blocks: u32,
    /// Seconds of one micro-batch (forward + backward + recompute + exposed comm).
    pub time_per_microbatch_s: f64,
}

/// The full report of one plan (allocates).
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Report {
    pub metrics: Metrics,
    pub breakdown: StepBreakdown,
    pub microbatches: u32,
    pub tokens_per_step: f64,
    pub flops: ModelFlops,
    /// The attention convention of `metrics`' MFU, HFU and TFLOP/s.
    pub attention_flops: AttentionFlops,
    /// Per-layer communication table (busiest stage for per-layer collectives).
    pub comm: Vec<CommRow>,
    /// A MoE model's per-layer work beside GEMMs and collectives (router, token permutation,
    /// per-expert launches) on the bottleneck stage; empty for a dense model.
    pub moe: Vec<MoeWorkRow>,
    pub stages: Vec<StageSummary>,
    /// Index of the stage that bounds the step.
    pub bottleneck_stage: u32,
    pub memory: MemoryBreakdown,
    pub hbm_bytes: f64,
    /// Named groups of the plan and where they sit.
    pub groups: Vec<(&'static str, Group)>,
}
