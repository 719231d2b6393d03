//! The vocabulary of a parallel training strategy: degrees, schedule, recompute and the
//! communication knobs ([`Plan`]), its text form, its validity for a model, its pipeline stage
//! layout and its Megatron-LM flags.
//!
//! Boundary: no costs and no hardware here (time is `autoplan-evaluate`'s, memory
//! `autoplan-memory`'s). `Plan` is `Copy` (no heap) so the search can build millions.
//!
//! The principal type is [`Plan`]: parse it from `tp=8,pp=4,...` (`str::parse`, keys in
//! [`parse::KEYS`]), print it back with `Display`, validate it with [`Plan::check`] (an
//! [`Invalid`] reason as data), lay out its stages with [`Plan::stage_blocks`], export it with
//! [`Plan::megatron_args`]. Every knob — its key, value names, Megatron-LM flag and the rule
//! for when it matters — is declared once, in [`knob`].
//!
//! Megatron's parallel folding: attention/dense layers use `tp × cp × dp` (× `pp`) GPUs, MoE
//! layers use `moe_tp × ep × edp` (× `pp`) with `edp = tp·cp·dp / (moe_tp·ep)`.
//!
//! ```
//! use autoplan_plan::{Invalid, Plan, Recompute};
//! let model = autoplan_graph::resolve_model("gpt3-175b").unwrap();
//! let plan: Plan = "tp=8,pp=8,dp=16,mbs=1,recompute=selective,sp=on,zero=1".parse().unwrap();
//! assert_eq!(plan.recompute, Recompute::Selective);
//! assert_eq!(plan.to_string().parse::<Plan>().unwrap(), plan);
//! assert_eq!(plan.check(&model, 1024), Ok(()));
//! assert_eq!(plan.check(&model, 512), Err(Invalid::GpuCount { plan: 1024, gpus: 512 }));
//! assert_eq!(plan.stage_blocks(&model).unwrap().max_blocks(), 12); // 96 blocks / 8 stages
//! let args = plan.megatron_args(&model).unwrap();
//! assert!(args.windows(2).any(|w| w == ["--tensor-model-parallel-size", "8"]));
//! ```

mod check;
pub mod framework;
pub mod knob;
mod megatron;
pub mod offload;
pub mod offload_activations;
pub mod offload_params;
pub mod parse;
pub mod zero;

pub use check::{Invalid, StageLayout};
pub use framework::{Framework, Refusal};
pub use knob::Knob;
pub use megatron::Unsupported;
pub use parse::ParseError;
pub use zero::Zero;

pub use autoplan_cost::{AlgoMode, Algorithm};
use serde::{Deserialize, Serialize};

/// Pipeline schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Schedule {
    /// PipeDream-flush 1F1B: bubble (pp−1) micro-batch slots.
    OneF1B,
    /// Interleaved 1F1B with `vpp` virtual stages per GPU: bubble (pp−1)/vpp.
    Interleaved,
    /// Zero-bubble (ZB-H1) schedule.
    ZeroBubble,
    /// DeepSeek-V3 DualPipe.
    DualPipe,
}

impl Schedule {
    /// The pipeline bubble of the schedule, from `base = Σ t_i − t_max` (the stage times of
    /// one micro-batch over the `pp` stages, the busiest excluded): 1F1B pays all of it (its
    /// (pp−1) warm-up and cool-down slots), interleaved 1F1B `1/vpp` of it; ZB-H1 (Qi et al.
    /// 2024) `(p−1)(T_F + T_B − T_W)`, 1/3 of 1F1B's `(p−1)(T_F + T_B)` when
    /// `T_F = T_B(input) = T_W`; DualPipe (DeepSeek-V3 Table 2) `(p/2 − 1)(F&B + B − 3W) ≈
    /// (p − 2)·t/3`, i.e. `(p−2)/(3(p−1))` of it. `bubble(1.0, ..)` is the fraction itself.
    pub fn bubble(self, base: f64, vpp: u32, pp: u32) -> f64 {
        match self {
            Schedule::OneF1B => base,
            Schedule::Interleaved => base / vpp.max(1) as f64,
            Schedule::ZeroBubble => base / 3.0,
            Schedule::DualPipe => {
                let p = pp as f64;
                if p > 2.0 {
                    base * (p - 2.0) / (3.0 * (p - 1.0))
                } else {
                    0.0
                }
            }
        }
    }

    /// The bubble of `micro` micro-batches whose stage times (one micro-batch each) sum to
    /// `sum`, the busiest `tmax`: [`Schedule::bubble`] of `sum − tmax`, and never less than
    /// `sum − micro·tmax`. Each micro-batch passes every stage in turn, so the pipeline takes
    /// at least one micro-batch's pass through all of them, `sum`. The bound binds only where
    /// the micro-batches are too few for the schedule's steady state, which the bubbles
    /// above assume: DualPipe's Table 2 figure needs at least `2·pp` of them (its ranks fill
    /// from both ends), and with one micro-batch no schedule overlaps anything. 1F1B's
    /// `sum − tmax` already covers it.
    pub fn bubble_of(self, sum: f64, tmax: f64, vpp: u32, pp: u32, micro: f64) -> f64 {
        self.bubble(sum - tmax, vpp, pp).max(sum - micro * tmax)
    }
}

/// What Megatron-Core's even pipeline split counts besides the transformer blocks
/// (`--account-for-embedding-in-pipeline-split`, `--account-for-loss-in-pipeline-split`,
/// frameworks.md §1.2): each counted part takes one block's slot, the embedding on the first
/// model chunk of stage 0, the loss on the last model chunk of stage `pp−1`; the
/// `blocks + parts` slots split evenly over the `pp·vpp` model chunks (`tc.py`
/// `(num_layers + extra) % PP == 0` and, with VPP, `% VPP` per stage). Qwen3-235B's 94 blocks on
/// `pp=32, vpp=3`: 96 slots, one per chunk, stage 0's first chunk the embedding alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PipelineSplit {
    /// Only the transformer blocks are split (autoplan's layout rule, `StageLayout`).
    #[default]
    Blocks,
    Embedding,
    Loss,
    /// Both flags: the ModelZoo's Qwen3-235B runs.
    EmbeddingLoss,
}

impl PipelineSplit {
    /// Slots the embedding takes on stage 0's first model chunk (0 or 1).
    pub fn embedding(self) -> u32 {
        u32::from(matches!(
            self,
            PipelineSplit::Embedding | PipelineSplit::EmbeddingLoss
        ))
    }

    /// Slots the loss takes on the last stage's last model chunk (0 or 1).
    pub fn loss(self) -> u32 {
        u32::from(matches!(
            self,
            PipelineSplit::Loss | PipelineSplit::EmbeddingLoss
        ))
    }
}

/// Activation recompute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Recompute {
    None,
    /// Selective: the modules of [`Plan::recompute_modules`] recomputed (by default the
    /// attention core: Korthikanti et al. 2022's scores, softmax, dropout).
    Selective,
    /// Whole block recomputed from its input.
    Full,
}

/// The modules recomputed under selective recompute: Megatron-Core's `--recompute-modules`
/// (`TransformerConfig.recompute_modules`, default `core_attn`). A bit set; see [`Self::NAMES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RecomputeModules(pub u8);

impl RecomputeModules {
    /// The attention core (Korthikanti et al. 2022's selective recompute: scores, softmax).
    pub const CORE_ATTN: u8 = 1;
    /// The two pre-norms (`input_layernorm`, `pre_mlp_layernorm`): their outputs are dropped.
    pub const LAYERNORM: u8 = 2;
    /// MLA's up-projections and RoPE (`q_b`, `kv_b`): Q, K and V are dropped.
    pub const MLA_UP_PROJ: u8 = 4;
    /// The routed experts' activation function (SwiGLU/GeLU): its output, the `fc2` input.
    pub const MOE_ACT: u8 = 8;
    /// The dense MLP (all but its input).
    pub const MLP: u8 = 16;
    /// The whole MoE layer: router, dispatch, experts, combine (all but its input).
    pub const MOE: u8 = 32;
    /// The shared experts (all but their input).
    pub const SHARED_EXPERTS: u8 = 64;
    /// Megatron's names, in `--recompute-modules` order.
    pub const NAMES: [(&'static str, u8); 7] = [
        ("core_attn", Self::CORE_ATTN),
        ("layernorm", Self::LAYERNORM),
        ("mla_up_proj", Self::MLA_UP_PROJ),
        ("moe_act", Self::MOE_ACT),
        ("mlp", Self::MLP),
        ("moe", Self::MOE),
        ("shared_experts", Self::SHARED_EXPERTS),
    ];
    /// Megatron's default: the attention core only.
    pub const DEFAULT: RecomputeModules = RecomputeModules(Self::CORE_ATTN);
    /// Every module: the least memory selective recompute can reach.
    pub const ALL: RecomputeModules = RecomputeModules(127);

    /// Whether module bit `m` is set.
    pub fn has(self, m: u8) -> bool {
        self.0 & m != 0
    }

    /// Megatron's names of the set modules, in [`Self::NAMES`] order.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        Self::NAMES
            .into_iter()
            .filter(move |&(_, b)| self.has(b))
            .map(|(n, _)| n)
    }
}

impl Default for RecomputeModules {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// How context parallelism exchanges K/V: Megatron-Core's `--cp-comm-type` (the values of
/// `transformer_config.py @ core_v0.19.0:L987-1003`, run by Transformer Engine;
/// frameworks.md §1.5 of the reference notes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CpComm {
    /// `p2p`: ring attention, K/V blocks passed around the CP ring, each step's transfer
    /// overlapped with the attention on the block in hand.
    Ring,
    /// `a2a`: DeepSpeed-Ulysses, all-to-all of Q/K/V (sequence → heads) before the attention
    /// core and of its output after it; heads and K/V heads must divide by `tp·cp`.
    AllToAll,
    /// `all_gather`: K/V all-gathered over the CP group before the attention core (not
    /// overlapped), their gradients reduce-scattered in backward.
    AllGather,
    /// `a2a+p2p`: Ulysses inside groups of `a2a` consecutive CP ranks, ring attention across
    /// the `cp / a2a` groups (`--hierarchical-context-parallel-sizes a2a cp/a2a`).
    Hierarchical { a2a: u32 },
}

/// Seed 001: how attention output goes from TP to SP layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TpSpTransition {
    /// Row-parallel out_linear + all-reduce + slice (Megatron default; reduce-scatter with SP).
    AllReduceSlice,
    /// All-to-all (TP→SP switch) then a replicated out_linear: 1/N the volume, more weight memory.
    AllToAll,
}

/// Seed 000: communication scheme of expert-tensor parallelism (`moe_tp` > 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MoeTpScheme {
    /// Scheme 1: scatter tokens to the moe_tp ranks, gather the results.
    ScatterGather,
    /// Scheme 2: group-wise all-to-all, then AllGather / ReduceScatter inside the moe_tp group.
    GroupAllToAll,
}

/// MoE token dispatcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dispatcher {
    AllToAll,
    AllGather,
    /// DeepEP's normal kernels (DeepSeek-V3 report §3.2.2; Megatron-Core `--moe-token-
    /// dispatcher-type flex --moe-enable-deepep`): a token crosses the network once per
    /// destination node, on the GPU's own NIC, and is forwarded to its experts' GPUs over
    /// NVLink, the two stages pipelined.
    #[serde(rename = "deepep")]
    DeepEp,
}

/// Expert placement policy (seed 004).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlacementPolicy {
    /// Experts laid out contiguously over the EP ranks, no replicas.
    Contiguous,
    /// Load-balanced placement with `redundant` replica slots per GPU.
    Balanced { redundant: u32 },
}

/// A parallel dimension, for the rank order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dim {
    Tp,
    Cp,
    Dp,
    Pp,
}

/// Rank order: `dims[0]` is innermost (consecutive ranks), `dims[3]` outermost. Megatron's
/// default is tp-cp-dp-pp. For MoE layers, the folded `moe_tp`, `ep`, `edp` replace `tp`,
/// `cp`, `dp` in the same positions... see `autoplan-evaluate` for the exact rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RankOrder(pub [Dim; 4]);

impl Default for RankOrder {
    fn default() -> Self {
        RankOrder([Dim::Tp, Dim::Cp, Dim::Dp, Dim::Pp])
    }
}

/// One parallel training plan. `Copy`: no heap.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub tp: u32,
    /// Megatron sequence parallelism (needs tp > 1 to matter).
    pub sp: bool,
    pub cp: u32,
    pub cp_comm: CpComm,
    pub dp: u32,
    /// Data-parallel sharding: ZeRO stage, FSDP reshard mode, HSDP group (`zero.rs`).
    pub zero: Zero,
    pub pp: u32,
    pub schedule: Schedule,
    /// Virtual stages per GPU (1 unless interleaved).
    pub vpp: u32,
    /// Uneven stages: blocks on the first / last stage (the rest split evenly); `None` = even.
    pub first_stage_layers: Option<u32>,
    pub last_stage_layers: Option<u32>,
    /// What the even pipeline split counts besides the blocks (Megatron's account-for flags).
    #[serde(default)]
    pub pipeline_split: PipelineSplit,
    pub ep: u32,
    pub moe_tp: u32,
    /// Micro-batch size in sequences.
    pub mbs: u32,
    pub recompute: Recompute,
    /// What selective recompute recomputes (ignored unless `recompute` is selective).
    #[serde(default)]
    pub recompute_modules: RecomputeModules,
    /// Recompute only the first N blocks of each stage (`None` = all).
    pub recompute_layers: Option<u32>,
    pub tp_sp_transition: TpSpTransition,
    pub moe_tp_scheme: MoeTpScheme,
    pub dispatcher: Dispatcher,
    pub algo: AlgoMode,
    pub order: RankOrder,
    pub placement: PlacementPolicy,
    /// Overlap TP communication with GEMMs (tiled / async TP).
    pub tp_overlap: bool,
    /// Overlap EP all-to-all with computation (e.g. DualPipe, DeepEP).
    pub ep_overlap: bool,
    /// Percent of the optimizer state (and its fp32 gradient copy) kept in host memory, the
    /// CPU running its step (Megatron-Core `--optimizer-offload-fraction`; [`offload`]).
    #[serde(default)]
    pub offload_optimizer: u8,
    /// ZeRO-3's parameter shard (and its gradient shard) kept in host memory, brought up for
    /// each gather ([`offload_params`]).
    #[serde(default)]
    pub offload_params: bool,
    /// Transformer layers per pipeline stage whose stored activations live in host memory
    /// between their forward and backward ([`offload_activations`]; `ALL`: every layer).
    #[serde(default)]
    pub offload_activations: u32,
}

impl Plan {
    /// Number of GPUs the plan occupies: tp·cp·dp·pp.
    pub fn gpus(&self) -> u64 {
        self.tp as u64 * self.cp as u64 * self.dp as u64 * self.pp as u64
    }

    /// Expert-data-parallel degree of MoE layers under parallel folding.
    pub fn edp(&self) -> u32 {
        (self.tp * self.cp * self.dp) / (self.moe_tp * self.ep).max(1)
    }

    /// The MoE layers' degree along `d` under Megatron's parallel folding: their grid puts
    /// `moe_tp`, `ep`, `edp` where the dense grid has tp, cp, dp (same rank order, same pp).
    /// At least 1.
    pub fn moe_degree(&self, d: Dim) -> u32 {
        match d {
            Dim::Tp => self.moe_tp,
            Dim::Cp => self.ep,
            Dim::Dp => self.edp(),
            Dim::Pp => self.pp,
        }
        .max(1)
    }
}

impl Default for Plan {
    fn default() -> Self {
        Plan {
            tp: 1,
            sp: false,
            cp: 1,
            cp_comm: CpComm::Ring,
            dp: 1,
            zero: Zero::NONE,
            pp: 1,
            schedule: Schedule::OneF1B,
            vpp: 1,
            first_stage_layers: None,
            last_stage_layers: None,
            pipeline_split: PipelineSplit::Blocks,
            ep: 1,
            moe_tp: 1,
            mbs: 1,
            recompute: Recompute::None,
            recompute_modules: RecomputeModules::DEFAULT,
            recompute_layers: None,
            tp_sp_transition: TpSpTransition::AllReduceSlice,
            moe_tp_scheme: MoeTpScheme::GroupAllToAll,
            dispatcher: Dispatcher::AllToAll,
            algo: AlgoMode::Cheapest,
            order: RankOrder::default(),
            placement: PlacementPolicy::Contiguous,
            tp_overlap: false,
            ep_overlap: false,
            offload_optimizer: 0,
            offload_params: false,
            offload_activations: 0,
        }
    }
}
