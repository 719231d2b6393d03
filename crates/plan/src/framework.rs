//! The training framework a plan must run in, and what each framework (and version) can run:
//! the capability table. One home for every "can framework F run this knob value" rule; the
//! search space is restricted by it (`autoplan-search`), `evaluate` refuses a plan with the
//! [`Refusal`] it gives, and the Megatron export (`megatron.rs`) refuses exactly what the
//! Megatron-Core row refuses, with the same reason.
//!
//! Sources: `../shared/reference/frameworks.md` (read from the tagged framework sources; its
//! section and the framework file and tag are named at each rule). `Framework::Any` is the
//! theoretical space (every knob autoplan can price), with no rule.

// `Refusal` carries the refused plan (`Copy`, 136 bytes) so that refusing allocates nothing:
// the search refuses millions of plans; a boxed error would allocate for each.
#![allow(clippy::result_large_err)]

use autoplan_graph::{Attention, ModelSpec, Precision};

use crate::knob::{Context, Knob};
use crate::{
    CpComm, Dim, Dispatcher, MoeTpScheme, PlacementPolicy, Plan, RankOrder, Recompute,
    RecomputeModules, Schedule, TpSpTransition,
};

/// The Megatron-Core minor versions the table covers (0.14 is the oldest release the
/// reference read in full, 0.19 the newest: frameworks.md, header table).
pub const MEGATRON_MINORS: std::ops::RangeInclusive<u8> = 14..=19;

/// The Megatron-Core version `--framework megatron-core` means (the newest in the reference,
/// `core_v0.19.0`, 2026-08-19).
pub const MEGATRON_DEFAULT_MINOR: u8 = 19;

/// A target framework (`--framework`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Framework {
    /// Megatron-LM / Megatron-Core `0.<minor>` (`pretrain_gpt.py`).
    MegatronCore { minor: u8 },
    /// torchtitan v0.2.2 (the last TOML release; frameworks.md §2).
    TorchTitan,
    /// DeepSpeed v0.19.5 (with Megatron-DeepSpeed for tensor parallelism; frameworks.md §3).
    DeepSpeed,
    /// No framework: every plan autoplan can price.
    Any,
}

impl Default for Framework {
    fn default() -> Self {
        Framework::MegatronCore {
            minor: MEGATRON_DEFAULT_MINOR,
        }
    }
}

/// What `--framework` accepts.
pub const FRAMEWORK_EXPECTED: &str =
    "megatron-core[@0.14..0.19] (alias megatron), torchtitan, deepspeed or any";

impl std::str::FromStr for Framework {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let lower = s.trim().to_ascii_lowercase();
        let (name, version) = match lower.split_once('@') {
            Some((n, v)) => (n, Some(v)),
            None => (lower.as_str(), None),
        };
        let fw = match name {
            "megatron-core" | "megatron" | "mcore" | "megatron-lm" => {
                let minor = match version {
                    None => MEGATRON_DEFAULT_MINOR,
                    Some(v) => parse_megatron_version(v)?,
                };
                return Ok(Framework::MegatronCore { minor });
            }
            "torchtitan" => Framework::TorchTitan,
            "deepspeed" | "megatron-deepspeed" => Framework::DeepSpeed,
            "any" | "none" => Framework::Any,
            _ => {
                return Err(format!(
                    "unknown framework `{s}`; expected {FRAMEWORK_EXPECTED}"
                ))
            }
        };
        match version {
            None => Ok(fw),
            Some(v) => Err(format!(
                "framework `{s}`: the table has one version of {} ({}); drop `@{v}`",
                fw.name(),
                fw
            )),
        }
    }
}

/// `0.M` or `0.M.P` with `M` in [`MEGATRON_MINORS`].
fn parse_megatron_version(v: &str) -> Result<u8, String> {
    let bad = || {
        format!(
            "Megatron-Core version `{v}`: expected 0.{}..0.{} (e.g. megatron-core@0.15)",
            MEGATRON_MINORS.start(),
            MEGATRON_MINORS.end()
        )
    };
    let v = v.strip_prefix("core_v").unwrap_or(v);
    let mut parts = v.split('.');
    let (Some("0"), Some(minor)) = (parts.next(), parts.next()) else {
        return Err(bad());
    };
    if parts.next().is_some_and(|p| p.parse::<u32>().is_err()) || parts.next().is_some() {
        return Err(bad());
    }
    let minor: u8 = minor.parse().map_err(|_| bad())?;
    if MEGATRON_MINORS.contains(&minor) {
        Ok(minor)
    } else {
        Err(bad())
    }
}

impl std::fmt::Display for Framework {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Framework::MegatronCore { minor } => write!(f, "Megatron-Core 0.{minor}"),
            Framework::TorchTitan => write!(f, "torchtitan 0.2.2"),
            Framework::DeepSpeed => write!(f, "DeepSpeed 0.19.5"),
            Framework::Any => write!(f, "any framework"),
        }
    }
}

/// Context-parallel exchanges a framework runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpModes {
    pub ring: bool,
    pub all_to_all: bool,
    pub all_gather: bool,
    pub hierarchical: bool,
}

/// Data-parallel sharding modes a framework runs (`zero=` values, `zero.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardModes {
    /// `zero=0` together with another parallel dimension (tp, cp, pp or ep > 1).
    pub ddp_with_model_parallel: bool,
    pub zero1: bool,
    pub zero2: bool,
    /// `zero=3` (resharding after the forward).
    pub zero3: bool,
    /// `zero=3-noreshard`.
    pub zero3_noreshard: bool,
    /// `zero=3-noreshard` with pp > 1 or ep > 1.
    pub noreshard_with_pp_ep: bool,
    /// `zero=2`/`3` with pp > 1.
    pub zero23_with_pp: bool,
    /// HSDP groups (`:G`) at stage 1, and at stage 3.
    pub hsdp1: bool,
    pub hsdp3: bool,
}

/// When the framework overlaps the EP all-to-all with computation (`ep_overlap=on`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpOverlapRules {
    pub supported: bool,
    /// Only under this schedule (torchtitan: DualPipeV).
    pub only_schedule: Option<Schedule>,
    /// pp > 1 needs virtual pipeline stages (the interleaved schedule).
    pub pp_needs_vpp: bool,
    /// Refused with full recompute, or with `recompute_layers`.
    pub no_full_recompute: bool,
    /// Refused with the `moe` module in the selective recompute set.
    pub no_moe_recompute: bool,
    /// Refused with the all-gather dispatcher.
    pub no_all_gather_dispatcher: bool,
    /// Needs ep > 1 (an overlap over `moe_tp` only is refused).
    pub needs_ep: bool,
    /// Refused with activation recompute of any kind.
    pub no_recompute: bool,
}

/// The capability table of one framework version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    pub framework: Framework,
    pub schedules: &'static [Schedule],
    /// Interleaved needs the micro-batch count a multiple of pp (the source of the rule).
    pub interleaved_microbatches_multiple_of_pp: bool,
    pub cp: CpModes,
    pub sharding: ShardModes,
    pub ep_overlap: EpOverlapRules,
    /// TP communication overlap at all, and only with sequence parallelism.
    pub tp_overlap: bool,
    pub tp_overlap_needs_sp: bool,
    /// tp > 1 always runs sequence parallel (no `sp=off`).
    pub sp_always_with_tp: bool,
    pub selective_recompute: bool,
    /// The selective recompute modules it knows (a [`RecomputeModules`] mask).
    pub recompute_modules: u8,
    /// `recompute_layers=N` with full recompute.
    pub full_recompute_layers: bool,
    /// Uneven first/last stages.
    pub uneven_layouts: bool,
    /// Rank orders, innermost first (dims of size 1 dropped when comparing).
    pub rank_orders: &'static [[Dim; 4]],
    /// Training precisions (FP8/FP4 recipes included).
    pub precisions: &'static [Precision],
    /// Expert parallelism at all (ep or moe_tp > 1).
    pub expert_parallel: bool,
    /// `moe_tp` must be 1 or tp.
    pub moe_tp_one_or_tp: bool,
    pub moe_tp_schemes: &'static [MoeTpScheme],
    pub dispatchers: &'static [Dispatcher],
    pub transitions: &'static [TpSpTransition],
    pub balanced_placement: bool,
    /// tp may exceed the key/value heads (the heads replicated).
    pub kv_head_replication: bool,
    /// The collective library the framework's collectives run in (for the collective model:
    /// left `None` here, to be filled by the collective-library work, issue 18 item 2).
    pub library: Option<&'static str>,
}

/// Megatron's default rank order `tp-cp-ep-dp-pp`, and `tp-cp-ep-pp-dp` under
/// `--use-tp-pp-dp-mapping` (`parallel_state.py @ core_v0.19.0:L617`,
/// `training/initialize.py @ core_v0.19.0:L388`; frameworks.md §1.1).
const MEGATRON_ORDERS: &[[Dim; 4]] = &[
    [Dim::Tp, Dim::Cp, Dim::Dp, Dim::Pp],
    [Dim::Tp, Dim::Cp, Dim::Pp, Dim::Dp],
];
const DEFAULT_ORDER: &[[Dim; 4]] = &[[Dim::Tp, Dim::Cp, Dim::Dp, Dim::Pp]];

/// Every schedule autoplan prices.
const ALL_SCHEDULES: &[Schedule] = &[
    Schedule::OneF1B,
    Schedule::Interleaved,
    Schedule::ZeroBubble,
    Schedule::DualPipe,
];

impl Framework {
    /// The name without the version (`megatron-core`, `torchtitan`, `deepspeed`, `any`).
    pub fn name(self) -> &'static str {
        match self {
            Framework::MegatronCore { .. } => "megatron-core",
            Framework::TorchTitan => "torchtitan",
            Framework::DeepSpeed => "deepspeed",
            Framework::Any => "any",
        }
    }

    /// The `--framework` spelling that gives this framework back.
    pub fn spec(self) -> String {
        match self {
            Framework::MegatronCore { minor } => format!("megatron-core@0.{minor}"),
            other => other.name().to_string(),
        }
    }

    /// The capability table of this framework version.
    pub fn capabilities(self) -> Capabilities {
        match self {
            Framework::MegatronCore { minor } => megatron(self, minor),
            Framework::TorchTitan => torchtitan(self),
            Framework::DeepSpeed => deepspeed(self),
            Framework::Any => Capabilities {
                framework: self,
                schedules: ALL_SCHEDULES,
                interleaved_microbatches_multiple_of_pp: false,
                cp: CpModes {
                    ring: true,
                    all_to_all: true,
                    all_gather: true,
                    hierarchical: true,
                },
                sharding: ShardModes {
                    ddp_with_model_parallel: true,
                    zero1: true,
                    zero2: true,
                    zero3: true,
                    zero3_noreshard: true,
                    noreshard_with_pp_ep: true,
                    zero23_with_pp: true,
                    hsdp1: true,
                    hsdp3: true,
                },
                ep_overlap: EpOverlapRules {
                    supported: true,
                    only_schedule: None,
                    pp_needs_vpp: false,
                    no_full_recompute: false,
                    no_moe_recompute: false,
                    no_all_gather_dispatcher: false,
                    needs_ep: false,
                    no_recompute: false,
                },
                tp_overlap: true,
                tp_overlap_needs_sp: false,
                sp_always_with_tp: false,
                selective_recompute: true,
                recompute_modules: RecomputeModules::ALL.0,
                full_recompute_layers: true,
                uneven_layouts: true,
                rank_orders: &[],
                precisions: &[],
                expert_parallel: true,
                moe_tp_one_or_tp: false,
                moe_tp_schemes: &[MoeTpScheme::ScatterGather, MoeTpScheme::GroupAllToAll],
                dispatchers: &[
                    Dispatcher::AllToAll,
                    Dispatcher::AllGather,
                    Dispatcher::DeepEp,
                ],
                transitions: &[TpSpTransition::AllReduceSlice, TpSpTransition::AllToAll],
                balanced_placement: true,
                kv_head_replication: true,
                library: None,
            },
        }
    }

    /// Whether the framework runs `plan` for `model`; the first rule it breaks otherwise.
    /// Knobs that cannot matter for the plan ([`Knob::matters`]) are not judged. Does not
    /// allocate (the search calls it for every plan it scores).
    pub fn check(self, plan: &Plan, model: &ModelSpec) -> Result<(), Refusal> {
        if self == Framework::Any {
            return Ok(());
        }
        let c = self.capabilities();
        let ctx = Context::new(plan, model.moe.is_some());
        let refuse = |knob: Knob, reason: &'static str, source: &'static str| Refusal {
            framework: self,
            knob,
            plan: *plan,
            reason,
            source,
            precision: None,
        };
        // The precision first: it refuses every plan of the model.
        if !c.precisions.is_empty() && !c.precisions.contains(&model.training.precision) {
            return Err(Refusal {
                precision: Some(model.training.precision),
                ..refuse(Knob::Tp, c.precision_reason(), c.precision_source())
            });
        }
        check_schedule(&c, plan, model, &ctx, &refuse)?;
        check_data_parallel(&c, plan, &ctx, &refuse)?;
        check_tensor(&c, plan, model, &ctx, &refuse)?;
        check_recompute(&c, plan, &refuse)?;
        check_experts(&c, plan, &ctx, &refuse)?;
        check_order(&c, plan, &ctx, &refuse)?;
        Ok(())
    }
}

impl Capabilities {
    fn precision_reason(&self) -> &'static str {
        "train in this precision"
    }

    fn precision_source(&self) -> &'static str {
        match self.framework {
            Framework::MegatronCore { .. } => {
                "--fp8-recipe / --fp4-format choices, transformer_config.py; frameworks.md §1.8"
            }
            Framework::TorchTitan => {
                "quantize.linear.float8 recipes tensorwise/rowwise and mx mxfp8, \
                 job_config.py @ v0.2.2:L730-835; frameworks.md §2.5"
            }
            _ => "precision keys bf16/fp16, precision_config.py @ v0.19.5; frameworks.md §3.2",
        }
    }
}

type Refuse<'a> = dyn Fn(Knob, &'static str, &'static str) -> Refusal + 'a;

/// The schedule, the micro-batch rule of the interleaved schedule and uneven stages.
fn check_schedule(
    c: &Capabilities,
    plan: &Plan,
    model: &ModelSpec,
    ctx: &Context,
    refuse: &Refuse,
) -> Result<(), Refusal> {
    if !Knob::Schedule.matters(ctx) {
        return Ok(());
    }
    if !c.schedules.contains(&plan.schedule) {
        return Err(refuse(
            Knob::Schedule,
            "run this pipeline schedule",
            c.schedule_source(),
        ));
    }
    let micro = plan.microbatches(model);
    if plan.schedule == Schedule::Interleaved
        && c.interleaved_microbatches_multiple_of_pp
        && !micro.is_multiple_of(plan.pp)
    {
        return Err(refuse(
            Knob::Vpp,
            "run the interleaved schedule with a micro-batch count that is not a multiple of pp",
            match c.framework {
                // `num_microbatches % microbatch_group_size_per_vp_stage` must be 0 or ≥ pp,
                // the group size defaulting to pp: so 0.
                Framework::MegatronCore { .. } => {
                    "schedules.py @ core_v0.19.0:L1133-1152 (group size = pp); frameworks.md §1.2"
                }
                _ => {
                    "autoplan prices the interleaved bubble as (pp−1)/vpp, which holds only for a \
                     multiple of pp (docs/frameworks.md)"
                }
            },
        ));
    }
    if !c.uneven_layouts && (plan.first_stage_layers.is_some() || plan.last_stage_layers.is_some())
    {
        return Err(refuse(
            Knob::FirstStageLayers,
            "place given block counts on the first/last pipeline stage",
            "pipeline partition methods uniform/parameters only, config.py @ v0.19.5:L417-430; \
             frameworks.md §3.4",
        ));
    }
    Ok(())
}

impl Capabilities {
    fn schedule_source(&self) -> &'static str {
        match self.framework {
            Framework::MegatronCore { .. } => {
                "1F1B and interleaved 1F1B only, schedules.py @ core_v0.19.0:L48-163; no \
                 zero-bubble or DualPipe schedule; frameworks.md §1.2"
            }
            Framework::TorchTitan => {
                "1F1B, Interleaved1F1B and DualPipeV; its zero-bubble schedules (InterleavedZeroBubble, \
                 ZBVZeroBubble) need ≥ 2 stages per rank, autoplan's zero-bubble is ZB-H1 with one; \
                 pipeline_parallel.py @ v0.2.2:L96-110,L446-466; frameworks.md §2.1"
            }
            _ => "TrainSchedule (1F1B) only, pipe/schedule.py @ v0.19.5:L189-200; frameworks.md §3.4",
        }
    }
}

/// ZeRO/FSDP/HSDP and context parallelism.
fn check_data_parallel(
    c: &Capabilities,
    plan: &Plan,
    ctx: &Context,
    refuse: &Refuse,
) -> Result<(), Refusal> {
    let s = &c.sharding;
    let z = plan.zero;
    let fw = c.framework;
    if Knob::Zero.matters(ctx) {
        let model_parallel = plan.tp > 1 || plan.cp > 1 || plan.pp > 1 || plan.ep > 1;
        let ok = match (z.stage, z.group > 0) {
            (0, _) => s.ddp_with_model_parallel || !model_parallel,
            (1, false) => s.zero1,
            (1, true) => s.hsdp1,
            (2, false) => s.zero2 && (s.zero23_with_pp || plan.pp == 1),
            (3, false) if z.keeps_gathered() => {
                s.zero3_noreshard && (s.noreshard_with_pp_ep || (plan.pp == 1 && plan.ep == 1))
            }
            (3, false) => s.zero3 && (s.zero23_with_pp || plan.pp == 1),
            (3, true) => s.hsdp3 && (s.zero23_with_pp || plan.pp == 1),
            _ => false,
        };
        if !ok {
            return Err(refuse(Knob::Zero, "shard the data-parallel ranks this way", match fw {
                Framework::MegatronCore { .. } => {
                    "distributed optimizer (zero=1, :G by --num-distributed-optimizer-instances), \
                     Megatron-FSDP optim_grads/optim_grads_params (zero=2/3), Torch-FSDP2 \
                     no-reshard (zero=3-noreshard) only with pp = 1 and ep = 1, \
                     args.py @ core_v0.19.0:L997-1030,L1100-1165; frameworks.md §1.1, §1.4"
                }
                Framework::TorchTitan => {
                    "FSDP2 fully_shard only (zero=3, 3-noreshard, HSDP 3:G); DDP is 1-D only, \
                     llama3/infra/parallelize.py @ v0.2.2:L148-151; frameworks.md §2.1"
                }
                _ => {
                    "ZeRO 2/3 are incompatible with pipeline parallelism (pipe/engine.py @ \
                     v0.19.5:L76-77), HSDP only as MiCS at stage 3, no keep-gathered stage 3; \
                     frameworks.md §3.3"
                }
            }));
        }
    }
    if Knob::CpComm.matters(ctx) {
        let m = &c.cp;
        let ok = match plan.cp_comm {
            CpComm::Ring => m.ring,
            CpComm::AllToAll => m.all_to_all,
            CpComm::AllGather => m.all_gather,
            CpComm::Hierarchical { .. } => m.hierarchical,
        };
        if !ok {
            return Err(refuse(Knob::CpComm, "exchange K/V across context-parallel ranks this way", match fw {
                Framework::MegatronCore { .. } => "--cp-comm-type p2p/a2a/all_gather/a2a+p2p, transformer_config.py @ core_v0.19.0:L987-1003; frameworks.md §1.5",
                Framework::TorchTitan => "context_parallel_rotate_method allgather/alltoall (ring attention), no Ulysses, utils.py @ v0.2.2:L205-216; frameworks.md §2.1",
                _ => "Ulysses sequence parallelism (all-to-all) only; frameworks.md §3.1",
            }));
        }
    }
    Ok(())
}

/// Sequence parallelism, TP overlap, the TP→SP transition and the key/value heads.
fn check_tensor(
    c: &Capabilities,
    plan: &Plan,
    model: &ModelSpec,
    ctx: &Context,
    refuse: &Refuse,
) -> Result<(), Refusal> {
    if Knob::TpOverlap.matters(ctx) && plan.tp_overlap {
        if !c.tp_overlap {
            return Err(refuse(
                Knob::TpOverlap,
                "overlap tensor-parallel communication with GEMMs",
                "no TP comm overlap; frameworks.md §3",
            ));
        }
        if c.tp_overlap_needs_sp && !plan.sp {
            return Err(refuse(
                Knob::TpOverlap,
                "overlap TP communication without sequence parallelism",
                "--tp-comm-overlap asserts --sequence-parallel, args.py @ core_v0.19.0:L1401-1402 \
                 (core_v0.14.0:L844-845); frameworks.md §1.3",
            ));
        }
    }
    if Knob::Sp.matters(ctx) && c.sp_always_with_tp && !plan.sp {
        return Err(refuse(
            Knob::Sp,
            "run tensor parallelism without sequence parallelism",
            "the sequence-parallel style is applied with TP, job_config.py @ v0.2.2:L311-484; \
             frameworks.md §2.1",
        ));
    }
    if Knob::Transition.matters(ctx) && !c.transitions.contains(&plan.tp_sp_transition) {
        return Err(refuse(
            Knob::Transition,
            "replace the row-parallel attention output projection by an all-to-all",
            "the attention output projection is row-parallel (seed 001's all-to-all transition \
             is autoplan's own)",
        ));
    }
    if let Attention::Gqa { kv_heads, .. } = model.attention {
        if !c.kv_head_replication && plan.tp > kv_heads {
            return Err(refuse(
                Knob::Tp,
                "replicate key/value heads (tp above the key/value heads)",
                "num_query_groups a multiple or divisor of tp from transformer_config.py @ \
                 core_v0.19.0:L1338-1345; not verified before 0.19 (frameworks.md §1.1)",
            ));
        }
    }
    Ok(())
}

/// Selective recompute, its modules, and full recompute of the first N blocks.
fn check_recompute(c: &Capabilities, plan: &Plan, refuse: &Refuse) -> Result<(), Refusal> {
    match plan.recompute {
        Recompute::None => Ok(()),
        Recompute::Selective => {
            if !c.selective_recompute || plan.recompute_modules.0 & !c.recompute_modules != 0 {
                return Err(refuse(
                    Knob::Recompute,
                    "recompute these modules selectively",
                    match c.framework {
                        Framework::MegatronCore { .. } => {
                            "--recompute-modules core_attn, moe_act, layernorm, mla_up_proj, mlp, \
                             moe, shared_experts; transformer_config.py @ core_v0.19.0:L518-563; \
                             frameworks.md §1.7"
                        }
                        Framework::TorchTitan => {
                            "activation_checkpoint mode selective is per-op SAC or every N-th \
                             layer, not module sets; activation_checkpoint.py @ v0.2.2:L164-186; \
                             frameworks.md §2.3"
                        }
                        _ => "activation checkpointing of whole layers only; frameworks.md §3.4",
                    },
                ));
            }
            if plan.recompute_layers.is_some() {
                return Err(refuse(
                    Knob::RecomputeLayers,
                    "restrict selective recompute to the first blocks of a stage",
                    "selective requires recompute_method and recompute_num_layers unset, \
                     transformer_config.py @ core_v0.19.0:L1724-1835; frameworks.md §1.7",
                ));
            }
            Ok(())
        }
        Recompute::Full => {
            if plan.recompute_layers.is_some() && !c.full_recompute_layers {
                return Err(refuse(
                    Knob::RecomputeLayers,
                    "recompute only the first N blocks of each stage",
                    "no per-stage block count for activation checkpointing; frameworks.md §2.3, §3.4",
                ));
            }
            Ok(())
        }
    }
}

/// Expert parallelism: the degrees, the scheme, the dispatcher, the placement and the overlap.
fn check_experts(
    c: &Capabilities,
    plan: &Plan,
    ctx: &Context,
    refuse: &Refuse,
) -> Result<(), Refusal> {
    if !ctx.moe {
        return Ok(());
    }
    if !c.expert_parallel && (plan.ep > 1 || plan.moe_tp > 1) {
        return Err(refuse(
            Knob::Ep,
            "split experts over GPUs (the reference covers no DeepSpeed-MoE rule)",
            "frameworks.md §3",
        ));
    }
    if c.moe_tp_one_or_tp && plan.moe_tp != 1 && plan.moe_tp != plan.tp {
        return Err(refuse(
            Knob::MoeTp,
            "run an expert-tensor-parallel degree other than 1 or tp",
            "ParallelDims._validate: etp ∈ {tp, 1}, parallel_dims.py @ v0.2.2:L33-57; \
             frameworks.md §2.1",
        ));
    }
    if Knob::MoeTpScheme.matters(ctx) && !c.moe_tp_schemes.contains(&plan.moe_tp_scheme) {
        return Err(refuse(
            Knob::MoeTpScheme,
            "scatter tokens to the expert-tensor-parallel ranks (scheme 1)",
            "expert TP runs after the all-to-all dispatch, all-gather/reduce-scatter inside the \
             group (scheme 2); frameworks.md §1.6",
        ));
    }
    if Knob::Dispatcher.matters(ctx) && !c.dispatchers.contains(&plan.dispatcher) {
        return Err(refuse(
            Knob::Dispatcher,
            "dispatch tokens this way",
            match c.framework {
                Framework::TorchTitan => {
                    "expert_parallel_comm_backend standard (all-to-all) or deepep, \
                     deepseek_v3/infra/parallelize.py @ v0.2.2:L96-110; frameworks.md §2.1"
                }
                _ => "frameworks.md §1.6",
            },
        ));
    }
    if let (PlacementPolicy::Balanced { .. }, true, false) = (
        plan.placement,
        Knob::Placement.matters(ctx),
        c.balanced_placement,
    ) {
        return Err(refuse(
            Knob::Placement,
            "place experts by load with redundant replicas",
            "experts are laid out contiguously over the EP ranks (no redundant experts); \
             frameworks.md §1.6, §2.1",
        ));
    }
    if Knob::EpOverlap.matters(ctx) && plan.ep_overlap {
        check_ep_overlap(c, plan, refuse)?;
    }
    Ok(())
}

/// Megatron-Core's `overlap_moe_expert_parallel_comm` requirements (`transformer_config.py @
/// core_v0.19.0:L2669-2744`, `@ core_v0.14.0:L1298-1337`; the flag first in 0.14,
/// `args.py @ core_v0.14.0:L2889-2892`; frameworks.md §1.6) and torchtitan's DualPipeV-only
/// overlap (`pipeline_parallel_expert_parallel_overlap`, job_config.py @ v0.2.2; no activation
/// checkpointing, dual_pipe_v.py @ v0.2.2:L32-51; frameworks.md §2.1).
fn check_ep_overlap(c: &Capabilities, plan: &Plan, refuse: &Refuse) -> Result<(), Refusal> {
    let r = &c.ep_overlap;
    const MCORE: &str = "overlap_moe_expert_parallel_comm checks, transformer_config.py @ \
                         core_v0.19.0:L2669-2744 (core_v0.14.0:L1298-1337); frameworks.md §1.6";
    const TITAN: &str = "pipeline_parallel_expert_parallel_overlap is active only with DualPipeV, \
                         pp > 1, ep > 1 and no activation checkpointing, dual_pipe_v.py @ \
                         v0.2.2:L32-51; frameworks.md §2.1";
    let source = match c.framework {
        Framework::TorchTitan => TITAN,
        _ => MCORE,
    };
    let why = if !r.supported {
        Some("overlap the EP all-to-all with computation")
    } else if r
        .only_schedule
        .is_some_and(|s| plan.pp <= 1 || plan.schedule != s)
    {
        Some("overlap EP outside the DualPipeV schedule")
    } else if r.needs_ep && plan.ep <= 1 {
        Some("overlap EP communication with ep = 1")
    } else if r.pp_needs_vpp && plan.pp > 1 && plan.schedule != Schedule::Interleaved {
        Some("overlap EP with pp > 1 without virtual pipeline stages")
    } else if r.no_recompute && plan.recompute != Recompute::None {
        Some("overlap EP with activation recompute")
    } else if r.no_full_recompute && plan.recompute == Recompute::Full {
        Some("overlap EP with full recompute")
    } else if r.no_full_recompute && plan.recompute_layers.is_some() {
        Some("overlap EP with a recompute block count")
    } else if r.no_moe_recompute
        && plan.recompute == Recompute::Selective
        && plan.recompute_modules.has(RecomputeModules::MOE)
    {
        Some("overlap EP with the moe module recomputed")
    } else if r.no_all_gather_dispatcher && plan.dispatcher == Dispatcher::AllGather {
        Some("overlap EP with the all-gather dispatcher")
    } else {
        None
    };
    match why {
        Some(reason) => Err(refuse(Knob::EpOverlap, reason, source)),
        None => Ok(()),
    }
}

/// The rank order, compared with the dimensions of size 1 (dense and folded) dropped.
fn check_order(
    c: &Capabilities,
    plan: &Plan,
    ctx: &Context,
    refuse: &Refuse,
) -> Result<(), Refusal> {
    if c.rank_orders.is_empty() {
        return Ok(());
    }
    let ours = ctx.order_class(&plan.order);
    let pos = c
        .rank_orders
        .iter()
        .position(|o| ctx.order_class(&RankOrder(*o)) == ours);
    match pos {
        None => Err(refuse(
            Knob::Order,
            "order ranks this way",
            match c.framework {
                Framework::MegatronCore { .. } => {
                    "tp-cp-ep-dp-pp, or tp-cp-ep-pp-dp with --use-tp-pp-dp-mapping, \
                     parallel_state.py @ core_v0.19.0:L617, initialize.py @ core_v0.19.0:L388; \
                     frameworks.md §1.1"
                }
                Framework::TorchTitan => {
                    "meshes pp, dp_replicate, fsdp (dp_shard·cp), tp, parallel_dims.py @ \
                     v0.2.2:L133-160; frameworks.md §2.1"
                }
                _ => "the reference documents DeepSpeed's default order only; frameworks.md §3",
            },
        )),
        // `--use-tp-pp-dp-mapping` with pp > 1 asserts the expert data-parallel size equals
        // the dense one (`parallel_state.py @ core_v0.19.0:L898-902`; frameworks.md §1.1).
        Some(1) if ctx.moe && plan.pp > 1 && plan.ep * plan.moe_tp > 1 && plan.edp() != plan.dp => {
            Err(refuse(
                Knob::Order,
                "order ranks tp-cp-pp-dp with pp > 1 when the expert data-parallel size differs \
                 from the dense one",
                "--use-tp-pp-dp-mapping asserts expert DP = DP when pp > 1, parallel_state.py @ \
                 core_v0.19.0:L898-902; frameworks.md §1.1",
            ))
        }
        Some(_) => Ok(()),
    }
}

/// Megatron-Core `0.<minor>`.
fn megatron(fw: Framework, minor: u8) -> Capabilities {
    // FP8 recipes by version (`--fp8-recipe` choices: 0.13–0.15 tensorwise, delayed, mxfp8,
    // blockwise; `--fp4-format` from 0.15; transformer_config.py @ core_v0.19.0:L566-579;
    // frameworks.md §1.8, flag table §1.0).
    const P14: &[Precision] = &[
        Precision::Fp32,
        Precision::Fp16,
        Precision::Bf16,
        Precision::Fp8,
        Precision::Fp8Current,
        Precision::Fp8Block,
        Precision::Mxfp8,
    ];
    const P15: &[Precision] = &[
        Precision::Fp32,
        Precision::Fp16,
        Precision::Bf16,
        Precision::Fp8,
        Precision::Fp8Current,
        Precision::Fp8Block,
        Precision::Mxfp8,
        Precision::Nvfp4,
    ];
    Capabilities {
        framework: fw,
        // schedules.py @ core_v0.19.0:L48-163: no pipelining, 1F1B, interleaved 1F1B (combined
        // 1F1B is the EP overlap, not a schedule choice); no ZB/ZB-V/DualPipe (frameworks.md §1.2).
        schedules: &[Schedule::OneF1B, Schedule::Interleaved],
        interleaved_microbatches_multiple_of_pp: true,
        cp: CpModes {
            ring: true,
            all_to_all: true,
            all_gather: true,
            hierarchical: true,
        },
        sharding: ShardModes {
            ddp_with_model_parallel: true,
            zero1: true,
            // `--use-megatron-fsdp` (0.14+) `optim_grads` / `optim_grads_params`.
            zero2: true,
            zero3: true,
            // `--use-torch-fsdp2 --torch-fsdp2-no-reshard-after-forward` (0.13+), PP = EP = 1.
            zero3_noreshard: true,
            noreshard_with_pp_ep: false,
            zero23_with_pp: true,
            // `--num-distributed-optimizer-instances` (0.10+).
            hsdp1: true,
            // Hybrid FSDP (`--outer-dp-sharding-strategy`, 0.16+) shards the outer group too:
            // not autoplan's replicated HSDP groups.
            hsdp3: false,
        },
        ep_overlap: EpOverlapRules {
            supported: true,
            only_schedule: None,
            pp_needs_vpp: true,
            no_full_recompute: true,
            // `"moe"` not in recompute_modules: since 0.15.
            no_moe_recompute: minor >= 15,
            no_all_gather_dispatcher: true,
            needs_ep: true,
            no_recompute: false,
        },
        tp_overlap: true,
        tp_overlap_needs_sp: true,
        sp_always_with_tp: false,
        selective_recompute: true,
        // 0.14 added shared_experts (frameworks.md §1.7): every module autoplan knows.
        recompute_modules: RecomputeModules::ALL.0,
        full_recompute_layers: true,
        // `--decoder-first/last-pipeline-num-layers` and `--pipeline-model-parallel-layout`
        // (0.13+; frameworks.md §1.2).
        uneven_layouts: true,
        rank_orders: MEGATRON_ORDERS,
        precisions: if minor >= 15 { P15 } else { P14 },
        expert_parallel: true,
        moe_tp_one_or_tp: false,
        moe_tp_schemes: &[MoeTpScheme::GroupAllToAll],
        // `--moe-token-dispatcher-type {allgather,alltoall,flex}` (+ DeepEP backend).
        dispatchers: &[
            Dispatcher::AllToAll,
            Dispatcher::AllGather,
            Dispatcher::DeepEp,
        ],
        transitions: &[TpSpTransition::AllReduceSlice],
        balanced_placement: false,
        kv_head_replication: minor >= 19,
        library: None,
    }
}

/// torchtitan v0.2.2 (frameworks.md §2).
fn torchtitan(fw: Framework) -> Capabilities {
    Capabilities {
        framework: fw,
        // 1F1B, Interleaved1F1B and DualPipeV (V-shaped DualPipe) from
        // `pipeline_parallel_schedule` (§2.1).
        schedules: &[Schedule::OneF1B, Schedule::Interleaved, Schedule::DualPipe],
        interleaved_microbatches_multiple_of_pp: true,
        cp: CpModes {
            ring: true,
            all_to_all: false,
            all_gather: true,
            hierarchical: false,
        },
        sharding: ShardModes {
            ddp_with_model_parallel: false,
            zero1: false,
            zero2: false,
            zero3: true,
            zero3_noreshard: true,
            noreshard_with_pp_ep: true,
            zero23_with_pp: true,
            hsdp1: false,
            hsdp3: true,
        },
        ep_overlap: EpOverlapRules {
            supported: true,
            only_schedule: Some(Schedule::DualPipe),
            pp_needs_vpp: false,
            no_full_recompute: false,
            no_moe_recompute: false,
            no_all_gather_dispatcher: false,
            needs_ep: true,
            no_recompute: true,
        },
        // Async TP (`enable_async_tensor_parallel`, with compile), SP always on with TP.
        tp_overlap: true,
        tp_overlap_needs_sp: true,
        sp_always_with_tp: true,
        selective_recompute: false,
        recompute_modules: 0,
        full_recompute_layers: false,
        // `module_fqns_per_model_part` gives explicit stage contents (§2.1).
        uneven_layouts: true,
        rank_orders: DEFAULT_ORDER,
        // bf16/fp32, Float8 tensorwise (current scaling), MXFP8 (§2.5).
        precisions: &[
            Precision::Fp32,
            Precision::Bf16,
            Precision::Fp8Current,
            Precision::Mxfp8,
        ],
        expert_parallel: true,
        moe_tp_one_or_tp: true,
        moe_tp_schemes: &[MoeTpScheme::GroupAllToAll],
        dispatchers: &[Dispatcher::AllToAll, Dispatcher::DeepEp],
        transitions: &[TpSpTransition::AllReduceSlice],
        balanced_placement: false,
        kv_head_replication: true,
        library: None,
    }
}

/// DeepSpeed v0.19.5 (frameworks.md §3; tensor parallelism through Megatron-DeepSpeed).
fn deepspeed(fw: Framework) -> Capabilities {
    Capabilities {
        framework: fw,
        schedules: &[Schedule::OneF1B],
        interleaved_microbatches_multiple_of_pp: true,
        cp: CpModes {
            ring: false,
            all_to_all: true,
            all_gather: false,
            hierarchical: false,
        },
        sharding: ShardModes {
            ddp_with_model_parallel: true,
            zero1: true,
            zero2: true,
            zero3: true,
            zero3_noreshard: false,
            noreshard_with_pp_ep: false,
            zero23_with_pp: false,
            hsdp1: false,
            // MiCS (`mics_shard_size`, stage 3; zero3.rst @ v0.19.5:L157-190).
            hsdp3: true,
        },
        ep_overlap: EpOverlapRules {
            supported: false,
            only_schedule: None,
            pp_needs_vpp: false,
            no_full_recompute: false,
            no_moe_recompute: false,
            no_all_gather_dispatcher: false,
            needs_ep: false,
            no_recompute: false,
        },
        tp_overlap: false,
        tp_overlap_needs_sp: true,
        sp_always_with_tp: false,
        selective_recompute: false,
        recompute_modules: 0,
        full_recompute_layers: false,
        uneven_layouts: false,
        rank_orders: DEFAULT_ORDER,
        precisions: &[Precision::Fp32, Precision::Fp16, Precision::Bf16],
        expert_parallel: false,
        moe_tp_one_or_tp: false,
        moe_tp_schemes: &[MoeTpScheme::GroupAllToAll],
        dispatchers: &[Dispatcher::AllToAll],
        transitions: &[TpSpTransition::AllReduceSlice],
        balanced_placement: false,
        kv_head_replication: true,
        library: None,
    }
}

/// Why a framework cannot run a plan: the knob, the rule (as "cannot …") and its source.
/// `Copy`, no heap: the search meets millions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Refusal {
    pub framework: Framework,
    /// The knob the rule is about.
    pub knob: Knob,
    /// The plan refused (to print the knob's value).
    pub plan: Plan,
    /// What the framework cannot do, as it follows "cannot".
    pub reason: &'static str,
    /// The framework source (file, version, lines) or the reference section.
    pub source: &'static str,
    /// The model precision, for a precision refusal.
    pub precision: Option<Precision>,
}

impl Refusal {
    /// "`Megatron-Core 0.15 cannot overlap EP with pp > 1 without virtual pipeline stages`".
    pub fn message(&self) -> String {
        format!("{} cannot {}", self.framework, self.reason)
    }

    /// The `key=value` the rule is about.
    pub fn setting(&self) -> String {
        match self.precision {
            Some(p) => format!("precision={}", p.name()),
            None => format!("{}={}", self.knob.key(), self.knob.value(&self.plan)),
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} cannot {} ({}; {})",
            self.framework,
            self.reason,
            self.setting(),
            self.source
        )
    }
}

impl std::error::Error for Refusal {}
