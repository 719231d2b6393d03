//! The plan string: `tp=8,pp=8,dp=16,mbs=1,recompute=selective,zero=1,...` ↔ [`Plan`].
//!
//! Keys absent from the string keep [`Plan::default`]'s value (degrees 1, 1F1B, no recompute,
//! ZeRO 0, ...). [`Plan::parse_for_gpus`] additionally infers `dp` from the GPU count when the
//! string does not give it. `Display` writes the degrees and main knobs always and the other
//! knobs only when they differ from the default, so `s.parse::<Plan>()?.to_string()` parses
//! back to the same plan.

use std::fmt;
use std::str::FromStr;

use crate::{
    AlgoMode, Algorithm, CpComm, Dim, Dispatcher, MoeTpScheme, PlacementPolicy, Plan, RankOrder,
    Recompute, RecomputeModules, Schedule, TpSpTransition, Zero,
};

/// Every key the plan string accepts, in `Display` order.
pub const KEYS: &str = "tp, cp, dp, pp, ep, moe_tp (etp), mbs, sp, recompute, recompute_layers, \
zero, schedule, vpp, first_stage_layers, last_stage_layers, cp_comm, transition, moe_tp_scheme, \
dispatcher, algo, order, placement, tp_overlap, ep_overlap";

/// Why a plan string does not parse. Every variant names the offending key or item.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// An item between commas is not `key=value`.
    #[error("plan item {item:?} is not of the form key=value")]
    NotKeyValue { item: String },
    /// The key is not a plan key.
    #[error("unknown plan key {key:?}; known keys: {known}")]
    UnknownKey { key: String, known: &'static str },
    /// The same key appears twice.
    #[error("plan key {key} is given twice")]
    DuplicateKey { key: &'static str },
    /// The value is not one the key accepts.
    #[error("plan key {key}: invalid value {value:?}; expected {expected}")]
    BadValue {
        key: &'static str,
        value: String,
        expected: &'static str,
    },
}

/// Canonical key of an accepted spelling (aliases: `etp` for `moe_tp`, `-` for `_`).
fn canonical_key(k: &str) -> Option<&'static str> {
    Some(
        match k.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "tp" => "tp",
            "cp" => "cp",
            "dp" => "dp",
            "pp" => "pp",
            "ep" => "ep",
            "moe_tp" | "etp" => "moe_tp",
            "mbs" | "micro_batch" => "mbs",
            "sp" => "sp",
            "recompute" => "recompute",
            "recompute_layers" => "recompute_layers",
            "zero" => "zero",
            "schedule" => "schedule",
            "vpp" => "vpp",
            "first_stage_layers" => "first_stage_layers",
            "last_stage_layers" => "last_stage_layers",
            "cp_comm" => "cp_comm",
            "transition" | "tp_sp_transition" => "transition",
            "moe_tp_scheme" => "moe_tp_scheme",
            "dispatcher" => "dispatcher",
            "algo" => "algo",
            "order" => "order",
            "placement" => "placement",
            "tp_overlap" => "tp_overlap",
            "ep_overlap" => "ep_overlap",
            _ => return None,
        },
    )
}

/// Lower-case, '_' → '-', spaces trimmed.
fn norm(v: &str) -> String {
    v.trim().to_ascii_lowercase().replace('_', "-")
}

fn bad(key: &'static str, value: &str, expected: &'static str) -> ParseError {
    ParseError::BadValue {
        key,
        value: value.to_string(),
        expected,
    }
}

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

impl Recompute {
    /// Name in the plan string.
    pub fn name(self) -> &'static str {
        match self {
            Recompute::None => "none",
            Recompute::Selective => "selective",
            Recompute::Full => "full",
        }
    }
}

impl Schedule {
    /// Name in the plan string.
    pub fn name(self) -> &'static str {
        match self {
            Schedule::OneF1B => "1f1b",
            Schedule::Interleaved => "interleaved",
            Schedule::ZeroBubble => "zero-bubble",
            Schedule::DualPipe => "dualpipe",
        }
    }
}

impl CpComm {
    /// Name in the plan string.
    pub fn name(self) -> &'static str {
        match self {
            CpComm::Ring => "ring",
            CpComm::AllToAll => "all-to-all",
        }
    }
}

impl TpSpTransition {
    /// Name in the plan string.
    pub fn name(self) -> &'static str {
        match self {
            TpSpTransition::AllReduceSlice => "all-reduce",
            TpSpTransition::AllToAll => "all-to-all",
        }
    }
}

impl MoeTpScheme {
    /// Name in the plan string.
    pub fn name(self) -> &'static str {
        match self {
            MoeTpScheme::ScatterGather => "scatter-gather",
            MoeTpScheme::GroupAllToAll => "group-all-to-all",
        }
    }
}

impl Dispatcher {
    /// Name in the plan string.
    pub fn name(self) -> &'static str {
        match self {
            Dispatcher::AllToAll => "all-to-all",
            Dispatcher::AllGather => "all-gather",
            Dispatcher::DeepEp => "deepep",
        }
    }
}

impl Dim {
    /// Name in the plan string's `order`.
    pub fn name(self) -> &'static str {
        match self {
            Dim::Tp => "tp",
            Dim::Cp => "cp",
            Dim::Dp => "dp",
            Dim::Pp => "pp",
        }
    }
}

impl fmt::Display for RankOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d] = self.0;
        write!(f, "{}-{}-{}-{}", a.name(), b.name(), c.name(), d.name())
    }
}

impl FromStr for RankOrder {
    type Err = ParseError;
    /// `tp-cp-dp-pp` (innermost first): a permutation of the four dimensions.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const EXPECTED: &str = "a permutation of tp, cp, dp, pp joined by '-' (innermost first)";
        let mut dims = [Dim::Tp; 4];
        let mut n = 0;
        for part in s.split('-') {
            let d = match part.trim().to_ascii_lowercase().as_str() {
                "tp" => Dim::Tp,
                "cp" => Dim::Cp,
                "dp" => Dim::Dp,
                "pp" => Dim::Pp,
                _ => return Err(bad("order", s, EXPECTED)),
            };
            if n == 4 || dims[..n].contains(&d) {
                return Err(bad("order", s, EXPECTED));
            }
            dims[n] = d;
            n += 1;
        }
        if n != 4 {
            return Err(bad("order", s, EXPECTED));
        }
        Ok(RankOrder(dims))
    }
}

fn algo_name(a: AlgoMode) -> &'static str {
    match a {
        AlgoMode::Cheapest => "cheapest",
        AlgoMode::NcclLike => "nccl-like",
        AlgoMode::NcclTuner => "nccl-tuner",
        AlgoMode::Fixed(alg) => alg.name(),
    }
}

impl Plan {
    /// Parse a plan string; when it has no `dp`, take `dp = gpus / (tp·cp·pp)` (error if that
    /// does not divide). This is what `autoplan evaluate --plan` uses.
    pub fn parse_for_gpus(s: &str, gpus: u64) -> Result<Plan, ParseError> {
        let (mut plan, has_dp) = parse(s)?;
        if !has_dp {
            let rest = plan.tp as u64 * plan.cp as u64 * plan.pp as u64;
            if rest == 0
                || !gpus.is_multiple_of(rest)
                || gpus / rest == 0
                || gpus / rest > u32::MAX as u64
            {
                return Err(bad(
                    "dp",
                    "(absent)",
                    "to be given: tp·cp·pp does not divide the GPU count",
                ));
            }
            plan.dp = (gpus / rest) as u32;
        }
        Ok(plan)
    }
}

/// The plan and whether `dp` was given.
fn parse(s: &str) -> Result<(Plan, bool), ParseError> {
    let mut p = Plan::default();
    let mut seen: Vec<&'static str> = Vec::new();
    for item in s.split(',') {
        if item.trim().is_empty() {
            continue;
        }
        let Some((k, v)) = item.split_once('=') else {
            return Err(ParseError::NotKeyValue {
                item: item.trim().to_string(),
            });
        };
        let key = canonical_key(k).ok_or_else(|| ParseError::UnknownKey {
            key: k.trim().to_string(),
            known: KEYS,
        })?;
        if seen.contains(&key) {
            return Err(ParseError::DuplicateKey { key });
        }
        seen.push(key);
        let nv = norm(v);
        match key {
            "tp" => p.tp = positive(key, v)?,
            "cp" => p.cp = positive(key, v)?,
            "dp" => p.dp = positive(key, v)?,
            "pp" => p.pp = positive(key, v)?,
            "ep" => p.ep = positive(key, v)?,
            "moe_tp" => p.moe_tp = positive(key, v)?,
            "mbs" => p.mbs = positive(key, v)?,
            "vpp" => p.vpp = positive(key, v)?,
            "sp" => p.sp = flag(key, v)?,
            "tp_overlap" => p.tp_overlap = flag(key, v)?,
            "ep_overlap" => p.ep_overlap = flag(key, v)?,
            "recompute_layers" => p.recompute_layers = Some(positive(key, v)?),
            "first_stage_layers" => p.first_stage_layers = Some(count(key, v)?),
            "last_stage_layers" => p.last_stage_layers = Some(count(key, v)?),
            "recompute" => (p.recompute, p.recompute_modules) = parse_recompute(v)?,
            "zero" => {
                p.zero = match nv.as_str() {
                    "0" => Zero(0),
                    "1" => Zero(1),
                    "2" => Zero(2),
                    "3" => Zero(3),
                    _ => return Err(bad(key, v, "0, 1, 2 or 3")),
                }
            }
            "schedule" => {
                p.schedule = match nv.as_str() {
                    "1f1b" => Schedule::OneF1B,
                    "interleaved" | "interleaved-1f1b" => Schedule::Interleaved,
                    "zero-bubble" | "zb" | "zbh1" | "zb-h1" => Schedule::ZeroBubble,
                    "dualpipe" | "dual-pipe" => Schedule::DualPipe,
                    _ => return Err(bad(key, v, "1f1b, interleaved, zero-bubble or dualpipe")),
                }
            }
            "cp_comm" => {
                p.cp_comm = match nv.as_str() {
                    "ring" | "p2p" => CpComm::Ring,
                    "all-to-all" | "alltoall" | "a2a" | "ulysses" => CpComm::AllToAll,
                    _ => return Err(bad(key, v, "ring (p2p) or all-to-all (a2a)")),
                }
            }
            "transition" => {
                p.tp_sp_transition = match nv.as_str() {
                    "all-reduce" | "allreduce" | "all-reduce-slice" => {
                        TpSpTransition::AllReduceSlice
                    }
                    "all-to-all" | "alltoall" | "a2a" => TpSpTransition::AllToAll,
                    _ => return Err(bad(key, v, "all-reduce or all-to-all")),
                }
            }
            "moe_tp_scheme" => {
                p.moe_tp_scheme = match nv.as_str() {
                    "scatter-gather" | "1" => MoeTpScheme::ScatterGather,
                    "group-all-to-all" | "all-gather" | "2" => MoeTpScheme::GroupAllToAll,
                    _ => return Err(bad(key, v, "scatter-gather or group-all-to-all")),
                }
            }
            "dispatcher" => {
                p.dispatcher = match nv.as_str() {
                    "all-to-all" | "alltoall" | "a2a" => Dispatcher::AllToAll,
                    "all-gather" | "allgather" => Dispatcher::AllGather,
                    "deepep" | "deep-ep" => Dispatcher::DeepEp,
                    _ => return Err(bad(key, v, "all-to-all, all-gather or deepep")),
                }
            }
            "algo" => {
                p.algo = match nv.as_str() {
                    "cheapest" => AlgoMode::Cheapest,
                    "nccl-like" => AlgoMode::NcclLike,
                    "nccl-tuner" | "nccl" => AlgoMode::NcclTuner,
                    other => AlgoMode::Fixed(other.parse::<Algorithm>().map_err(|_| {
                        bad(
                            key,
                            v,
                            "cheapest, nccl-like, nccl-tuner or an algorithm (ring, direct, tree, \
                             double-binary-tree, halving-doubling, bruck, hierarchical, \
                             in-switch, point-to-point)",
                        )
                    })?),
                }
            }
            "order" => p.order = v.parse()?,
            "placement" => {
                p.placement = match nv.split_once(':') {
                    None if nv == "contiguous" => PlacementPolicy::Contiguous,
                    None if nv == "balanced" => PlacementPolicy::Balanced { redundant: 0 },
                    Some(("balanced", n)) => PlacementPolicy::Balanced {
                        redundant: n.parse().map_err(|_| {
                            bad(
                                key,
                                v,
                                "contiguous, balanced or balanced:N (N ≥ 0 replicas)",
                            )
                        })?,
                    },
                    _ => {
                        return Err(bad(
                            key,
                            v,
                            "contiguous, balanced or balanced:N (N ≥ 0 replicas)",
                        ))
                    }
                }
            }
            _ => unreachable!("canonical_key returned {key}"),
        }
    }
    Ok((p, seen.contains(&"dp")))
}

/// What `recompute=` accepts.
const RECOMPUTE_EXPECTED: &str = "none, selective, full, or selective:M+M+... with Megatron's \
--recompute-modules (core_attn, layernorm, mla_up_proj, moe_act, mlp, moe, shared_experts)";

/// `none`, `selective` (the attention core), `full`, or `selective:layernorm+moe_act` (the
/// listed Megatron-Core `--recompute-modules`, each at most once).
pub fn parse_recompute(v: &str) -> Result<(Recompute, RecomputeModules), ParseError> {
    let nv = norm(v);
    let (mode, modules) = match nv.split_once(':') {
        Some((m, list)) => (m, Some(list)),
        None => (nv.as_str(), None),
    };
    let mode = match mode {
        "none" | "off" => Recompute::None,
        "selective" | "attn-only" => Recompute::Selective,
        "full" => Recompute::Full,
        _ => return Err(bad("recompute", v, RECOMPUTE_EXPECTED)),
    };
    let Some(list) = modules else {
        return Ok((mode, RecomputeModules::DEFAULT));
    };
    if mode != Recompute::Selective {
        return Err(bad("recompute", v, RECOMPUTE_EXPECTED));
    }
    let mut set = 0u8;
    for name in list.split('+') {
        let name = name.trim().replace('-', "_");
        match RecomputeModules::NAMES.iter().find(|(n, _)| *n == name) {
            Some(&(_, bit)) if set & bit == 0 => set |= bit,
            _ => return Err(bad("recompute", v, RECOMPUTE_EXPECTED)),
        }
    }
    Ok((mode, RecomputeModules(set)))
}

/// `recompute=`'s value: the mode, and under selective recompute a module set other than
/// Megatron's default as `selective:layernorm+moe_act` (parses back with [`parse_recompute`]).
pub fn recompute_label(r: Recompute, m: RecomputeModules) -> String {
    if r == Recompute::Selective && m != RecomputeModules::DEFAULT {
        format!("selective:{}", m.names().collect::<Vec<_>>().join("+"))
    } else {
        r.name().to_string()
    }
}

impl FromStr for Plan {
    type Err = ParseError;
    /// Parse `key=value` items separated by commas; absent keys keep [`Plan::default`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse(s).map(|(p, _)| p)
    }
}

impl fmt::Display for Plan {
    /// Degrees and main knobs always, the rest only when not the default; parses back equal.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = Plan::default();
        let on = |b: bool| if b { "on" } else { "off" };
        write!(
            f,
            "tp={},cp={},dp={},pp={},ep={},moe_tp={},mbs={},sp={},recompute={}",
            self.tp,
            self.cp,
            self.dp,
            self.pp,
            self.ep,
            self.moe_tp,
            self.mbs,
            on(self.sp),
            recompute_label(self.recompute, self.recompute_modules)
        )?;
        if let Some(n) = self.recompute_layers {
            write!(f, ",recompute_layers={n}")?;
        }
        write!(
            f,
            ",zero={},schedule={},vpp={}",
            self.zero.0,
            self.schedule.name(),
            self.vpp
        )?;
        if let Some(n) = self.first_stage_layers {
            write!(f, ",first_stage_layers={n}")?;
        }
        if let Some(n) = self.last_stage_layers {
            write!(f, ",last_stage_layers={n}")?;
        }
        if self.cp_comm != d.cp_comm {
            write!(f, ",cp_comm={}", self.cp_comm.name())?;
        }
        if self.tp_sp_transition != d.tp_sp_transition {
            write!(f, ",transition={}", self.tp_sp_transition.name())?;
        }
        if self.moe_tp_scheme != d.moe_tp_scheme {
            write!(f, ",moe_tp_scheme={}", self.moe_tp_scheme.name())?;
        }
        if self.dispatcher != d.dispatcher {
            write!(f, ",dispatcher={}", self.dispatcher.name())?;
        }
        if self.algo != d.algo {
            write!(f, ",algo={}", algo_name(self.algo))?;
        }
        if self.order != d.order {
            write!(f, ",order={}", self.order)?;
        }
        match self.placement {
            PlacementPolicy::Contiguous => {}
            PlacementPolicy::Balanced { redundant } => {
                write!(f, ",placement=balanced:{redundant}")?
            }
        }
        if self.tp_overlap {
            f.write_str(",tp_overlap=on")?;
        }
        if self.ep_overlap {
            f.write_str(",ep_overlap=on")?;
        }
        Ok(())
    }
}
