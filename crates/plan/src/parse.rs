//! The plan string: `tp=8,pp=8,dp=16,mbs=1,recompute=selective,zero=1,...` ↔ [`Plan`].
//!
//! Keys absent from the string keep [`Plan::default`]'s value (degrees 1, 1F1B, no recompute,
//! ZeRO 0, ...). [`Plan::parse_for_gpus`] additionally infers `dp` from the GPU count when the
//! string does not give it. `Display` writes the degrees and main knobs always and the other
//! knobs only when they differ from the default, so `s.parse::<Plan>()?.to_string()` parses
//! back to the same plan.

use std::fmt;
use std::str::FromStr;

use crate::knob::{self, Knob};
use crate::{
    CpComm, Dim, Dispatcher, MoeTpScheme, Plan, RankOrder, Recompute, RecomputeModules, Schedule,
    TpSpTransition,
};

/// Every key the plan string accepts, in `Display` order.
pub const KEYS: &str = "tp, cp, dp, pp, ep, moe_tp (etp), mbs, sp, recompute, recompute_layers, \
zero, schedule, vpp, first_stage_layers, last_stage_layers, pipeline_split, cp_comm, transition, \
moe_tp_scheme, dispatcher, algo, order, placement, tp_overlap, ep_overlap, offload_optimizer, offload_params, \
offload_activations";

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

/// Lower-case, '_' → '-', spaces trimmed.
pub(crate) fn norm(v: &str) -> String {
    v.trim().to_ascii_lowercase().replace('_', "-")
}

pub(crate) fn bad(key: &'static str, value: &str, expected: &'static str) -> ParseError {
    ParseError::BadValue {
        key,
        value: value.to_string(),
        expected,
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
        knob::SCHEDULES.name(self)
    }
}

impl CpComm {
    /// Name in the plan string.
    pub fn name(self) -> String {
        knob::cp_comm_name(self)
    }
}

impl TpSpTransition {
    /// Name in the plan string.
    pub fn name(self) -> &'static str {
        knob::TRANSITIONS.name(self)
    }
}

impl MoeTpScheme {
    /// Name in the plan string.
    pub fn name(self) -> &'static str {
        knob::MOE_TP_SCHEMES.name(self)
    }
}

impl Dispatcher {
    /// Name in the plan string.
    pub fn name(self) -> &'static str {
        knob::DISPATCHERS.name(self)
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
    let mut seen: Vec<Knob> = Vec::new();
    for item in s.split(',') {
        if item.trim().is_empty() {
            continue;
        }
        let Some((k, v)) = item.split_once('=') else {
            return Err(ParseError::NotKeyValue {
                item: item.trim().to_string(),
            });
        };
        let knob = Knob::from_key(k).ok_or_else(|| ParseError::UnknownKey {
            key: k.trim().to_string(),
            known: KEYS,
        })?;
        if seen.contains(&knob) {
            return Err(ParseError::DuplicateKey { key: knob.key() });
        }
        seen.push(knob);
        knob.parse_into(&mut p, v)?;
    }
    Ok((p, seen.contains(&Knob::Dp)))
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
    /// Degrees and main knobs always, the rest only when not the default; parses back equal
    /// ([`Knob::shown`], in [`Knob::ALL`]'s order).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sep = "";
        for k in Knob::ALL.into_iter().filter(|k| k.shown(self)) {
            write!(f, "{sep}{}={}", k.key(), k.value(self))?;
            sep = ",";
        }
        Ok(())
    }
}
