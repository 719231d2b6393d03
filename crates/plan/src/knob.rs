//! One home per plan knob: its key in the plan string, its value names both ways (parse and
//! print, with the spellings space files and Megatron-LM use), the Megatron-LM flag it maps to
//! where the mapping is direct, and the rule for when it matters for a plan
//! (`knob/relevance.rs`).
//!
//! The plan string (`parse`), `--fix` and the search-space files (`autoplan-search`'s
//! `space/`), the search's decision order, collapse of irrelevant knobs, bounds and plan key
//! (`engine.rs`, `evaluator.rs`) and `--emit megatron` (`megatron.rs`) all read this module.
//!
//! Adding a knob: a [`Knob`] variant here (key, values, rule, flag, and its place in
//! [`Knob::KEY_ORDER`] / [`Knob::LEAVES`] if the search decides it), the [`Plan`] field in
//! `lib.rs`, and its list in `autoplan-search`'s `space/mod.rs`; what it costs is the cost model's.

mod relevance;

pub use relevance::Context;

use crate::parse::{bad, norm, ParseError};
use crate::{
    AlgoMode, Algorithm, CpComm, Dispatcher, MoeTpScheme, PipelineSplit, PlacementPolicy, Plan,
    Schedule, TpSpTransition, Zero,
};

/// One named value of an enumerated knob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Named<T: 'static> {
    pub value: T,
    /// The name the plan string prints (and parses).
    pub name: &'static str,
    /// The name space files and sweep CSVs use (most often [`Self::name`]).
    pub file_name: &'static str,
    /// Other spellings the parser takes (after lower-casing and `_` → `-`).
    pub aliases: &'static [&'static str],
    /// The value of the knob's Megatron-LM flag, where it has one.
    pub megatron: Option<&'static str>,
}

const fn named<T>(value: T, name: &'static str, aliases: &'static [&'static str]) -> Named<T> {
    Named {
        value,
        name,
        file_name: name,
        aliases,
        megatron: None,
    }
}

/// The values of an enumerated knob, in the order a space lists them (the first is the
/// canonical one, [`Plan::default`]'s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Names<T: 'static>(pub &'static [Named<T>]);

impl<T: Copy + PartialEq> Names<T> {
    fn find(&self, v: T) -> Option<&'static Named<T>> {
        self.0.iter().find(|n| n.value == v)
    }

    /// The plan-string name of `v`.
    pub fn name(&self, v: T) -> &'static str {
        self.find(v).map_or("?", |n| n.name)
    }

    /// The space-file name of `v`.
    pub fn file_name(&self, v: T) -> &'static str {
        self.find(v).map_or("?", |n| n.file_name)
    }

    /// The Megatron-LM value of `v`, if it has one.
    pub fn megatron(&self, v: T) -> Option<&'static str> {
        self.find(v).and_then(|n| n.megatron)
    }

    /// The position of `v` in the table (the order a space sorts its list in).
    pub fn position(&self, v: T) -> usize {
        self.0
            .iter()
            .position(|n| n.value == v)
            .unwrap_or(usize::MAX)
    }

    /// The value of a name, file name or alias (case, `_`/`-` and spaces ignored).
    pub fn parse(&self, s: &str) -> Option<T> {
        let s = norm(s);
        self.0
            .iter()
            .find(|n| n.name == s || n.file_name == s || n.aliases.contains(&s.as_str()))
            .map(|n| n.value)
    }

    /// The space-file names joined by `, ` (for error messages).
    pub fn file_names(&self) -> String {
        let v: Vec<&str> = self.0.iter().map(|n| n.file_name).collect();
        v.join(", ")
    }
}

/// Pipeline schedules.
pub const SCHEDULES: Names<Schedule> = Names(&[
    named(Schedule::OneF1B, "1f1b", &[]),
    named(Schedule::Interleaved, "interleaved", &["interleaved-1f1b"]),
    named(
        Schedule::ZeroBubble,
        "zero-bubble",
        &["zb", "zbh1", "zb-h1"],
    ),
    named(Schedule::DualPipe, "dualpipe", &["dual-pipe"]),
]);

/// What the even pipeline split counts besides the blocks ([`PipelineSplit`]; Megatron's
/// `--account-for-embedding/loss-in-pipeline-split`, written by `--emit megatron`).
pub const PIPELINE_SPLITS: Names<PipelineSplit> = Names(&[
    named(PipelineSplit::Blocks, "blocks", &[]),
    named(PipelineSplit::Embedding, "embedding", &[]),
    named(PipelineSplit::Loss, "loss", &[]),
    named(
        PipelineSplit::EmbeddingLoss,
        "embedding+loss",
        &["embedding-loss", "embedding-and-loss"],
    ),
]);

/// Context-parallel K/V exchanges without a size (Megatron-Core `--cp-comm-type`; TE spells
/// the all-gather `all_gather`, frameworks.md §1.5). The hierarchical `a2a+p2p:N` carries its
/// a2a group size: [`parse_cp_comm`], [`cp_comm_name`].
pub const CP_COMMS: Names<CpComm> = Names(&[
    Named {
        megatron: Some("p2p"),
        ..named(CpComm::Ring, "ring", &["p2p"])
    },
    Named {
        megatron: Some("a2a"),
        ..named(
            CpComm::AllToAll,
            "all-to-all",
            &["alltoall", "a2a", "ulysses"],
        )
    },
    Named {
        megatron: Some("all_gather"),
        ..named(CpComm::AllGather, "all-gather", &["allgather", "ag"])
    },
]);

/// What `cp_comm=` accepts.
const CP_COMM_EXPECTED: &str = "ring (p2p), all-to-all (a2a), all-gather or a2a+p2p:N (Ulysses \
inside groups of N ≥ 2 CP ranks, ring across them)";

/// The plan-string name of a CP exchange (`a2a+p2p:N` for the hierarchical one).
pub fn cp_comm_name(c: CpComm) -> String {
    match c {
        CpComm::Hierarchical { a2a } => format!("a2a+p2p:{a2a}"),
        _ => CP_COMMS.name(c).into(),
    }
}

/// Parse a CP exchange: a [`CP_COMMS`] name, or `a2a+p2p:N` (also `hierarchical:N`).
pub fn parse_cp_comm(key: &'static str, v: &str) -> Result<CpComm, ParseError> {
    if let Some(c) = CP_COMMS.parse(v) {
        return Ok(c);
    }
    let nv = norm(v);
    match nv.split_once(':') {
        Some(("a2a+p2p" | "hierarchical", n)) => match n.trim().parse::<u32>() {
            Ok(a2a) if a2a >= 2 => Ok(CpComm::Hierarchical { a2a }),
            _ => Err(bad(key, v, CP_COMM_EXPECTED)),
        },
        _ => Err(bad(key, v, CP_COMM_EXPECTED)),
    }
}

/// TP → SP transitions of the attention output (space files say `all-reduce-slice`).
pub const TRANSITIONS: Names<TpSpTransition> = Names(&[
    Named {
        file_name: "all-reduce-slice",
        ..named(TpSpTransition::AllReduceSlice, "all-reduce", &["allreduce"])
    },
    named(TpSpTransition::AllToAll, "all-to-all", &["alltoall", "a2a"]),
]);

/// Expert-tensor-parallel communication schemes.
pub const MOE_TP_SCHEMES: Names<MoeTpScheme> = Names(&[
    named(MoeTpScheme::ScatterGather, "scatter-gather", &["1"]),
    named(
        MoeTpScheme::GroupAllToAll,
        "group-all-to-all",
        &["all-gather", "2"],
    ),
]);

/// MoE token dispatchers (Megatron-Core `--moe-token-dispatcher-type`; DeepEP is `flex` with
/// `--moe-enable-deepep`).
pub const DISPATCHERS: Names<Dispatcher> = Names(&[
    Named {
        megatron: Some("alltoall"),
        ..named(Dispatcher::AllToAll, "all-to-all", &["alltoall", "a2a"])
    },
    Named {
        megatron: Some("allgather"),
        ..named(Dispatcher::AllGather, "all-gather", &["allgather"])
    },
    Named {
        megatron: Some("flex"),
        ..named(Dispatcher::DeepEp, "deepep", &["deep-ep"])
    },
]);

/// A plan knob: a key of the plan string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Knob {
    Tp,
    Cp,
    Dp,
    Pp,
    Ep,
    MoeTp,
    Mbs,
    Sp,
    Recompute,
    RecomputeLayers,
    Zero,
    Schedule,
    Vpp,
    FirstStageLayers,
    LastStageLayers,
    PipelineSplit,
    CpComm,
    Transition,
    MoeTpScheme,
    Dispatcher,
    Algo,
    Order,
    Placement,
    TpOverlap,
    EpOverlap,
    /// Optimizer state offloaded to host memory, a fraction (`crate::offload`).
    OffloadOptimizer,
    /// ZeRO-3's parameter shard in host memory (`crate::offload_params`).
    OffloadParams,
    /// Layers per stage whose activations live in host memory (`crate::offload_activations`).
    OffloadActivations,
}

/// What `algo=` accepts.
const ALGO_EXPECTED: &str = "cheapest, any, nccl-like, nccl-tuner or an algorithm (ring, \
direct, tree, double-binary-tree, halving-doubling, bruck, hierarchical, in-switch, \
point-to-point, nvls-tree, collnet-direct, collnet-chain, pat)";

/// What `placement=` accepts.
const PLACEMENT_EXPECTED: &str = "contiguous, balanced or balanced:N (N ≥ 0 replicas)";

fn positive(key: &'static str, v: &str) -> Result<u32, ParseError> {
    match v.trim().parse::<u32>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(bad(key, v, "an integer ≥ 1")),
    }
}

fn count(key: &'static str, v: &str) -> Result<u32, ParseError> {
    v.trim()
        .parse::<u32>()
        .map_err(|_| bad(key, v, "an integer ≥ 0"))
}

fn flag(key: &'static str, v: &str) -> Result<bool, ParseError> {
    match norm(v).as_str() {
        "on" | "true" | "yes" | "1" => Ok(true),
        "off" | "false" | "no" | "0" => Ok(false),
        _ => Err(bad(key, v, "on or off")),
    }
}

fn on(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

/// The plan-string name of an algorithm mode.
pub fn algo_name(a: AlgoMode) -> String {
    match a {
        AlgoMode::Cheapest => "cheapest".into(),
        AlgoMode::NcclLike => "nccl-like".into(),
        AlgoMode::NcclTuner => "nccl-tuner".into(),
        AlgoMode::Any => "any".into(),
        AlgoMode::Fixed(alg) => alg.name().into(),
    }
}

/// `contiguous`, or `balanced:N` (N redundant expert slots per GPU).
pub fn placement_name(p: PlacementPolicy) -> String {
    match p {
        PlacementPolicy::Contiguous => "contiguous".into(),
        PlacementPolicy::Balanced { redundant } => format!("balanced:{redundant}"),
    }
}

fn parse_algo(key: &'static str, v: &str) -> Result<AlgoMode, ParseError> {
    Ok(match norm(v).as_str() {
        "cheapest" => AlgoMode::Cheapest,
        "nccl-like" => AlgoMode::NcclLike,
        "nccl-tuner" | "nccl" => AlgoMode::NcclTuner,
        "any" => AlgoMode::Any,
        other => AlgoMode::Fixed(
            other
                .parse::<Algorithm>()
                .map_err(|_| bad(key, v, ALGO_EXPECTED))?,
        ),
    })
}

fn parse_placement(key: &'static str, v: &str) -> Result<PlacementPolicy, ParseError> {
    let nv = norm(v);
    match nv.split_once(':') {
        None if nv == "contiguous" => Ok(PlacementPolicy::Contiguous),
        None if nv == "balanced" => Ok(PlacementPolicy::Balanced { redundant: 0 }),
        Some(("balanced", n)) => Ok(PlacementPolicy::Balanced {
            redundant: n.parse().map_err(|_| bad(key, v, PLACEMENT_EXPECTED))?,
        }),
        _ => Err(bad(key, v, PLACEMENT_EXPECTED)),
    }
}

impl Knob {
    /// Every knob, in the plan string's order (`Display`, [`crate::parse::KEYS`]).
    pub const ALL: [Knob; 28] = [
        Knob::Tp,
        Knob::Cp,
        Knob::Dp,
        Knob::Pp,
        Knob::Ep,
        Knob::MoeTp,
        Knob::Mbs,
        Knob::Sp,
        Knob::Recompute,
        Knob::RecomputeLayers,
        Knob::Zero,
        Knob::Schedule,
        Knob::Vpp,
        Knob::FirstStageLayers,
        Knob::LastStageLayers,
        Knob::PipelineSplit,
        Knob::CpComm,
        Knob::Transition,
        Knob::MoeTpScheme,
        Knob::Dispatcher,
        Knob::Algo,
        Knob::Order,
        Knob::Placement,
        Knob::TpOverlap,
        Knob::EpOverlap,
        Knob::OffloadOptimizer,
        Knob::OffloadParams,
        Knob::OffloadActivations,
    ];

    /// The knobs a search decides, as the digits of its plan key, most significant first: the
    /// degrees (`dp` is what the GPUs leave), the micro-batch size, recompute, ZeRO, schedule
    /// and virtual stages, then the [`Self::LEAVES`]. Ties of step time rank by this key, so
    /// changing the order changes rankings.
    pub const KEY_ORDER: [Knob; 23] = [
        Knob::Pp,
        Knob::Tp,
        Knob::Ep,
        Knob::MoeTp,
        Knob::Cp,
        Knob::Mbs,
        Knob::Recompute,
        Knob::Zero,
        Knob::Schedule,
        Knob::Vpp,
        Knob::Sp,
        Knob::CpComm,
        Knob::Transition,
        Knob::MoeTpScheme,
        Knob::Dispatcher,
        Knob::Algo,
        Knob::Order,
        Knob::TpOverlap,
        Knob::EpOverlap,
        Knob::Placement,
        Knob::OffloadOptimizer,
        Knob::OffloadParams,
        Knob::OffloadActivations,
    ];

    /// The knobs a search decides last, once the degrees, micro-batch size, recompute,
    /// schedule and ZeRO stage are fixed (they move only communication, or memory a little),
    /// in the order of [`Self::KEY_ORDER`]'s tail.
    pub const LEAVES: [Knob; 13] = [
        Knob::Sp,
        Knob::CpComm,
        Knob::Transition,
        Knob::MoeTpScheme,
        Knob::Dispatcher,
        Knob::Algo,
        Knob::Order,
        Knob::TpOverlap,
        Knob::EpOverlap,
        Knob::Placement,
        Knob::OffloadOptimizer,
        Knob::OffloadParams,
        Knob::OffloadActivations,
    ];

    /// The key in the plan string.
    pub fn key(self) -> &'static str {
        match self {
            Knob::Tp => "tp",
            Knob::Cp => "cp",
            Knob::Dp => "dp",
            Knob::Pp => "pp",
            Knob::Ep => "ep",
            Knob::MoeTp => "moe_tp",
            Knob::Mbs => "mbs",
            Knob::Sp => "sp",
            Knob::Recompute => "recompute",
            Knob::RecomputeLayers => "recompute_layers",
            Knob::Zero => "zero",
            Knob::Schedule => "schedule",
            Knob::Vpp => "vpp",
            Knob::FirstStageLayers => "first_stage_layers",
            Knob::LastStageLayers => "last_stage_layers",
            Knob::PipelineSplit => "pipeline_split",
            Knob::CpComm => "cp_comm",
            Knob::Transition => "transition",
            Knob::MoeTpScheme => "moe_tp_scheme",
            Knob::Dispatcher => "dispatcher",
            Knob::Algo => "algo",
            Knob::Order => "order",
            Knob::Placement => "placement",
            Knob::TpOverlap => "tp_overlap",
            Knob::EpOverlap => "ep_overlap",
            Knob::OffloadOptimizer => "offload_optimizer",
            Knob::OffloadParams => "offload_params",
            Knob::OffloadActivations => "offload_activations",
        }
    }

    /// Other keys accepted for the knob (space files call the transition `tp_sp_transition`
    /// and the order `rank_order`).
    pub fn aliases(self) -> &'static [&'static str] {
        match self {
            Knob::MoeTp => &["etp"],
            Knob::Mbs => &["micro_batch"],
            Knob::Transition => &["tp_sp_transition"],
            Knob::Order => &["rank_order"],
            _ => &[],
        }
    }

    /// The knob of a key or alias (case, spaces and `-`/`_` ignored).
    pub fn from_key(k: &str) -> Option<Knob> {
        let k = k.trim().to_ascii_lowercase().replace('-', "_");
        Knob::ALL
            .into_iter()
            .find(|n| n.key() == k || n.aliases().contains(&k.as_str()))
    }

    /// Parse `v` as this knob's value into `plan`.
    pub fn parse_into(self, plan: &mut Plan, v: &str) -> Result<(), ParseError> {
        let key = self.key();
        let p = plan;
        match self {
            Knob::Tp => p.tp = positive(key, v)?,
            Knob::Cp => p.cp = positive(key, v)?,
            Knob::Dp => p.dp = positive(key, v)?,
            Knob::Pp => p.pp = positive(key, v)?,
            Knob::Ep => p.ep = positive(key, v)?,
            Knob::MoeTp => p.moe_tp = positive(key, v)?,
            Knob::Mbs => p.mbs = positive(key, v)?,
            Knob::Vpp => p.vpp = positive(key, v)?,
            Knob::Sp => p.sp = flag(key, v)?,
            Knob::TpOverlap => p.tp_overlap = flag(key, v)?,
            Knob::EpOverlap => p.ep_overlap = flag(key, v)?,
            Knob::RecomputeLayers => p.recompute_layers = Some(positive(key, v)?),
            Knob::FirstStageLayers => p.first_stage_layers = Some(count(key, v)?),
            Knob::LastStageLayers => p.last_stage_layers = Some(count(key, v)?),
            Knob::PipelineSplit => {
                p.pipeline_split = PIPELINE_SPLITS
                    .parse(v)
                    .ok_or_else(|| bad(key, v, "blocks, embedding, loss or embedding+loss"))?
            }
            Knob::Recompute => {
                (p.recompute, p.recompute_modules) = crate::parse::parse_recompute(v)?
            }
            Knob::Zero => {
                p.zero = Zero::parse(v).ok_or_else(|| bad(key, v, crate::zero::ZERO_EXPECTED))?
            }
            Knob::Schedule => {
                p.schedule = SCHEDULES
                    .parse(v)
                    .ok_or_else(|| bad(key, v, "1f1b, interleaved, zero-bubble or dualpipe"))?
            }
            Knob::CpComm => p.cp_comm = parse_cp_comm(key, v)?,
            Knob::Transition => {
                p.tp_sp_transition = TRANSITIONS
                    .parse(v)
                    .ok_or_else(|| bad(key, v, "all-reduce or all-to-all"))?
            }
            Knob::MoeTpScheme => {
                p.moe_tp_scheme = MOE_TP_SCHEMES
                    .parse(v)
                    .ok_or_else(|| bad(key, v, "scatter-gather or group-all-to-all"))?
            }
            Knob::Dispatcher => {
                p.dispatcher = DISPATCHERS
                    .parse(v)
                    .ok_or_else(|| bad(key, v, "all-to-all, all-gather or deepep"))?
            }
            Knob::Algo => p.algo = parse_algo(key, v)?,
            Knob::Order => p.order = v.parse()?,
            Knob::Placement => p.placement = parse_placement(key, v)?,
            Knob::OffloadOptimizer => p.offload_optimizer = crate::offload::parse(key, v)?,
            Knob::OffloadParams => p.offload_params = flag(key, v)?,
            Knob::OffloadActivations => {
                p.offload_activations = crate::offload_activations::parse(key, v)?
            }
        }
        Ok(())
    }

    /// The knob's value in `plan`, as the plan string writes it (`none` for an unset layer
    /// count, which [`Self::shown`] never writes).
    pub fn value(self, p: &Plan) -> String {
        let opt = |v: Option<u32>| v.map_or_else(|| "none".into(), |n| n.to_string());
        match self {
            Knob::Tp => p.tp.to_string(),
            Knob::Cp => p.cp.to_string(),
            Knob::Dp => p.dp.to_string(),
            Knob::Pp => p.pp.to_string(),
            Knob::Ep => p.ep.to_string(),
            Knob::MoeTp => p.moe_tp.to_string(),
            Knob::Mbs => p.mbs.to_string(),
            Knob::Vpp => p.vpp.to_string(),
            Knob::Sp => on(p.sp).into(),
            Knob::TpOverlap => on(p.tp_overlap).into(),
            Knob::EpOverlap => on(p.ep_overlap).into(),
            Knob::RecomputeLayers => opt(p.recompute_layers),
            Knob::FirstStageLayers => opt(p.first_stage_layers),
            Knob::LastStageLayers => opt(p.last_stage_layers),
            Knob::PipelineSplit => PIPELINE_SPLITS.name(p.pipeline_split).into(),
            Knob::Recompute => crate::parse::recompute_label(p.recompute, p.recompute_modules),
            Knob::Zero => p.zero.name(),
            Knob::Schedule => SCHEDULES.name(p.schedule).into(),
            Knob::CpComm => cp_comm_name(p.cp_comm),
            Knob::Transition => TRANSITIONS.name(p.tp_sp_transition).into(),
            Knob::MoeTpScheme => MOE_TP_SCHEMES.name(p.moe_tp_scheme).into(),
            Knob::Dispatcher => DISPATCHERS.name(p.dispatcher).into(),
            Knob::Algo => algo_name(p.algo),
            Knob::Order => p.order.to_string(),
            Knob::Placement => placement_name(p.placement),
            Knob::OffloadOptimizer => crate::offload::name(p.offload_optimizer),
            Knob::OffloadParams => on(p.offload_params).into(),
            Knob::OffloadActivations => crate::offload_activations::name(p.offload_activations),
        }
    }

    /// Whether the plan string writes the knob: the degrees and main knobs always, the others
    /// only where they differ from [`Plan::default`] (so the string parses back equal).
    pub fn shown(self, p: &Plan) -> bool {
        match self {
            Knob::Tp
            | Knob::Cp
            | Knob::Dp
            | Knob::Pp
            | Knob::Ep
            | Knob::MoeTp
            | Knob::Mbs
            | Knob::Sp
            | Knob::Recompute
            | Knob::Zero
            | Knob::Schedule
            | Knob::Vpp => true,
            _ => !self.same(p, &Plan::default()),
        }
    }

    /// Whether `a` and `b` hold the same value of this knob: the fields [`Knob::copy`] copies
    /// (compared field by field: `check` asks it of every knob on every evaluation of a dense
    /// model, where copying and comparing whole plans cost 4% of `evaluate`).
    #[inline]
    pub fn same(self, a: &Plan, b: &Plan) -> bool {
        match self {
            Knob::Tp => a.tp == b.tp,
            Knob::Cp => a.cp == b.cp,
            Knob::Dp => a.dp == b.dp,
            Knob::Pp => a.pp == b.pp,
            Knob::Ep => a.ep == b.ep,
            Knob::MoeTp => a.moe_tp == b.moe_tp,
            Knob::Mbs => a.mbs == b.mbs,
            Knob::Vpp => a.vpp == b.vpp,
            Knob::Sp => a.sp == b.sp,
            Knob::TpOverlap => a.tp_overlap == b.tp_overlap,
            Knob::EpOverlap => a.ep_overlap == b.ep_overlap,
            Knob::RecomputeLayers => a.recompute_layers == b.recompute_layers,
            Knob::FirstStageLayers => a.first_stage_layers == b.first_stage_layers,
            Knob::LastStageLayers => a.last_stage_layers == b.last_stage_layers,
            Knob::PipelineSplit => a.pipeline_split == b.pipeline_split,
            Knob::Recompute => {
                a.recompute == b.recompute && a.recompute_modules == b.recompute_modules
            }
            Knob::Zero => a.zero == b.zero,
            Knob::Schedule => a.schedule == b.schedule,
            Knob::CpComm => a.cp_comm == b.cp_comm,
            Knob::Transition => a.tp_sp_transition == b.tp_sp_transition,
            Knob::MoeTpScheme => a.moe_tp_scheme == b.moe_tp_scheme,
            Knob::Dispatcher => a.dispatcher == b.dispatcher,
            Knob::Algo => a.algo == b.algo,
            Knob::Order => a.order == b.order,
            Knob::Placement => a.placement == b.placement,
            Knob::OffloadOptimizer => a.offload_optimizer == b.offload_optimizer,
            Knob::OffloadParams => a.offload_params == b.offload_params,
            Knob::OffloadActivations => a.offload_activations == b.offload_activations,
        }
    }

    /// Copy this knob's value from `from` into `to`.
    pub fn copy(self, from: &Plan, to: &mut Plan) {
        match self {
            Knob::Tp => to.tp = from.tp,
            Knob::Cp => to.cp = from.cp,
            Knob::Dp => to.dp = from.dp,
            Knob::Pp => to.pp = from.pp,
            Knob::Ep => to.ep = from.ep,
            Knob::MoeTp => to.moe_tp = from.moe_tp,
            Knob::Mbs => to.mbs = from.mbs,
            Knob::Vpp => to.vpp = from.vpp,
            Knob::Sp => to.sp = from.sp,
            Knob::TpOverlap => to.tp_overlap = from.tp_overlap,
            Knob::EpOverlap => to.ep_overlap = from.ep_overlap,
            Knob::RecomputeLayers => to.recompute_layers = from.recompute_layers,
            Knob::FirstStageLayers => to.first_stage_layers = from.first_stage_layers,
            Knob::LastStageLayers => to.last_stage_layers = from.last_stage_layers,
            Knob::PipelineSplit => to.pipeline_split = from.pipeline_split,
            Knob::Recompute => {
                to.recompute = from.recompute;
                to.recompute_modules = from.recompute_modules;
            }
            Knob::Zero => to.zero = from.zero,
            Knob::Schedule => to.schedule = from.schedule,
            Knob::CpComm => to.cp_comm = from.cp_comm,
            Knob::Transition => to.tp_sp_transition = from.tp_sp_transition,
            Knob::MoeTpScheme => to.moe_tp_scheme = from.moe_tp_scheme,
            Knob::Dispatcher => to.dispatcher = from.dispatcher,
            Knob::Algo => to.algo = from.algo,
            Knob::Order => to.order = from.order,
            Knob::Placement => to.placement = from.placement,
            Knob::OffloadOptimizer => to.offload_optimizer = from.offload_optimizer,
            Knob::OffloadParams => to.offload_params = from.offload_params,
            Knob::OffloadActivations => to.offload_activations = from.offload_activations,
        }
    }

    /// The Megatron-LM (Megatron-Core ≥ 0.12 `pretrain_gpt.py`) flag the knob maps to
    /// directly: the degree or size for the numeric knobs, the value's
    /// [`Named::megatron`] name for the enumerated ones, a bare switch for `sp` and the
    /// overlaps. `None` where the mapping is not one flag (`megatron.rs` composes those).
    pub fn megatron_flag(self) -> Option<&'static str> {
        Some(match self {
            Knob::Tp => "--tensor-model-parallel-size",
            Knob::Pp => "--pipeline-model-parallel-size",
            Knob::Cp => "--context-parallel-size",
            Knob::Ep => "--expert-model-parallel-size",
            Knob::MoeTp => "--expert-tensor-parallel-size",
            Knob::Mbs => "--micro-batch-size",
            Knob::Sp => "--sequence-parallel",
            Knob::CpComm => "--cp-comm-type",
            Knob::Dispatcher => "--moe-token-dispatcher-type",
            Knob::TpOverlap => "--tp-comm-overlap",
            Knob::EpOverlap => "--overlap-moe-expert-parallel-comm",
            Knob::OffloadOptimizer => "--optimizer-offload-fraction",
            Knob::OffloadActivations => "--cpu-offloading-num-layers",
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests;
