//! Search spaces: which values of every decision the search may try, and the constraints.
//!
//! A space file (`search_spaces/*.toml`) is parsed into [`RawSpaceFile`] (unknown fields are
//! errors), then validated into [`Space`]: every list non-empty, sorted and de-duplicated, every
//! name known. Errors name the file, line and field ([`autoplan_input::InputError`]).

use std::fmt;

use autoplan_input::{InputError, Source};
use autoplan_plan::{
    AlgoMode, Algorithm, CpComm, Dim, Dispatcher, MoeTpScheme, PlacementPolicy, Plan, RankOrder,
    Recompute, RecomputeModules, Schedule, TpSpTransition, Zero,
};
use serde::Deserialize;

/// The file as written (`#[serde(deny_unknown_fields)]` everywhere).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSpaceFile {
    /// One line saying what the space is for (shown by `--stats`).
    pub description: Option<String>,
    pub degrees: RawDegrees,
    pub batch: RawBatch,
    pub memory: RawMemory,
    pub pipeline: RawPipeline,
    pub knobs: RawKnobs,
    #[serde(default)]
    pub constraints: RawConstraints,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDegrees {
    pub tp: Vec<u32>,
    pub pp: Vec<u32>,
    pub cp: Vec<u32>,
    pub ep: Vec<u32>,
    pub moe_tp: Vec<u32>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBatch {
    pub mbs: Vec<u32>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMemory {
    pub recompute: Vec<String>,
    pub zero: Vec<u8>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPipeline {
    pub schedules: Vec<String>,
    /// Virtual stages per GPU tried with the interleaved schedule.
    pub vpp: Vec<u32>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawKnobs {
    pub sp: Vec<bool>,
    pub cp_comm: Vec<String>,
    pub tp_sp_transition: Vec<String>,
    pub moe_tp_scheme: Vec<String>,
    pub dispatcher: Vec<String>,
    pub algo: Vec<String>,
    pub rank_order: Vec<String>,
    pub tp_overlap: Vec<bool>,
    pub ep_overlap: Vec<bool>,
    /// Expert placement policies (seed 004): `contiguous`, `balanced` or `balanced:R` (R
    /// redundant experts per GPU). Absent: contiguous only.
    #[serde(default)]
    pub placement: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConstraints {
    /// Every TP group inside one node (Megatron's practice: TP traffic needs NVLink).
    #[serde(default)]
    pub tp_within_node: bool,
    /// Every `moe_tp` group inside one node.
    #[serde(default)]
    pub moe_tp_within_node: bool,
    /// `ep · moe_tp` ≤ GPUs per node (expert all-to-all on NVLink only).
    #[serde(default)]
    pub ep_within_node: bool,
    pub max_pp: Option<u32>,
    /// At least this many micro-batches per pipeline stage (`micro-batches ≥ k · pp`).
    pub min_microbatches_per_stage: Option<u32>,
}

/// A validated search space. Every list is non-empty, sorted and free of duplicates, so the
/// first element is the canonical value used where a knob does not matter for a plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Space {
    pub description: String,
    pub tp: Vec<u32>,
    pub pp: Vec<u32>,
    pub cp: Vec<u32>,
    pub ep: Vec<u32>,
    pub moe_tp: Vec<u32>,
    /// Restrict dp (only through `--fix dp=N`; otherwise dp is what the GPUs leave).
    pub dp: Option<u32>,
    pub mbs: Vec<u32>,
    /// Recompute mode, with the module set under selective recompute (Megatron-Core's
    /// `--recompute-modules`; the default set otherwise).
    pub recompute: Vec<(Recompute, RecomputeModules)>,
    pub zero: Vec<Zero>,
    pub schedule: Vec<Schedule>,
    pub vpp: Vec<u32>,
    pub sp: Vec<bool>,
    pub cp_comm: Vec<CpComm>,
    pub tp_sp_transition: Vec<TpSpTransition>,
    pub moe_tp_scheme: Vec<MoeTpScheme>,
    pub dispatcher: Vec<Dispatcher>,
    pub algo: Vec<AlgoMode>,
    pub order: Vec<RankOrder>,
    pub tp_overlap: Vec<bool>,
    pub ep_overlap: Vec<bool>,
    /// Expert placement policies, contiguous first (the least memory: no replicas), then
    /// balanced by increasing redundant experts per GPU.
    pub placement: Vec<PlacementPolicy>,
    pub constraints: Constraints,
}

/// Validated constraints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Constraints {
    pub tp_within_node: bool,
    pub moe_tp_within_node: bool,
    pub ep_within_node: bool,
    pub max_pp: Option<u32>,
    pub min_microbatches_per_stage: Option<u32>,
}

/// The bundled spaces (`search_spaces/*.toml`, embedded in the binary), by name.
static BUNDLED: &[(&str, &str)] = &[
    (
        "default",
        include_str!("../../../search_spaces/default.toml"),
    ),
    ("dense", include_str!("../../../search_spaces/dense.toml")),
    ("moe", include_str!("../../../search_spaces/moe.toml")),
    ("quick", include_str!("../../../search_spaces/quick.toml")),
];

/// Names of the bundled spaces.
pub fn bundled_spaces() -> impl Iterator<Item = &'static str> {
    BUNDLED.iter().map(|(n, _)| *n)
}

/// Why a `--space` argument could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum SpaceError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error("no search space file or bundled space named `{name}` (bundled: {})", bundled.join(", "))]
    Unknown {
        name: String,
        bundled: Vec<&'static str>,
    },
}

/// A bundled space name (`default`, `dense`, `moe`, `quick`) or a path to a space TOML.
pub fn resolve_space(name_or_path: &str) -> Result<Space, SpaceError> {
    let path = std::path::Path::new(name_or_path);
    if path.is_file() {
        return Ok(Space::from_source(&Source::read(path)?)?);
    }
    match BUNDLED.iter().find(|(n, _)| *n == name_or_path) {
        Some((n, text)) => Ok(Space::from_source(&Source::new(
            format!("search_spaces/{n}.toml"),
            *text,
        ))?),
        None => Err(SpaceError::Unknown {
            name: name_or_path.to_string(),
            bundled: bundled_spaces().collect(),
        }),
    }
}

/// A recompute value of a space file or `--fix`: `none`, `selective`, `full`, or
/// `selective:layernorm+moe_act` (the plan string's syntax, `autoplan_plan::parse`).
fn parse_recompute(s: &str) -> Result<(Recompute, RecomputeModules), String> {
    autoplan_plan::parse::parse_recompute(s).map_err(|e| match e {
        // The plan string's list of what `recompute=` accepts.
        autoplan_plan::ParseError::BadValue { expected, .. } => {
            format!("unknown value; expected {expected}")
        }
        other => other.to_string(),
    })
}

/// Names accepted for each enumerated knob (also used by `--fix`).
const SCHEDULE: &[(&str, Schedule)] = &[
    ("1f1b", Schedule::OneF1B),
    ("interleaved", Schedule::Interleaved),
    ("zero-bubble", Schedule::ZeroBubble),
    ("dualpipe", Schedule::DualPipe),
];
const CP_COMM: &[(&str, CpComm)] = &[("ring", CpComm::Ring), ("all-to-all", CpComm::AllToAll)];
const TP_SP: &[(&str, TpSpTransition)] = &[
    ("all-reduce-slice", TpSpTransition::AllReduceSlice),
    ("all-to-all", TpSpTransition::AllToAll),
];
const MOE_TP_SCHEME: &[(&str, MoeTpScheme)] = &[
    ("scatter-gather", MoeTpScheme::ScatterGather),
    ("group-all-to-all", MoeTpScheme::GroupAllToAll),
];
const DISPATCHER: &[(&str, Dispatcher)] = &[
    ("all-to-all", Dispatcher::AllToAll),
    ("all-gather", Dispatcher::AllGather),
    ("deepep", Dispatcher::DeepEp),
];

fn names<T>(table: &[(&str, T)]) -> String {
    table.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

fn lookup<T: Copy>(table: &[(&str, T)], s: &str) -> Result<T, String> {
    table
        .iter()
        .find(|(n, _)| *n == s)
        .map(|(_, v)| *v)
        .ok_or_else(|| format!("unknown value; expected one of: {}", names(table)))
}

fn parse_algo(s: &str) -> Result<AlgoMode, String> {
    match s {
        "cheapest" => Ok(AlgoMode::Cheapest),
        "nccl-like" => Ok(AlgoMode::NcclLike),
        "nccl-tuner" => Ok(AlgoMode::NcclTuner),
        _ => s.parse::<Algorithm>().map(AlgoMode::Fixed).map_err(|_| {
            "unknown value; expected cheapest, nccl-like, nccl-tuner or an algorithm name \
             (ring, tree, ...) to fix it where valid"
                .to_string()
        }),
    }
}

fn parse_placement(s: &str) -> Result<PlacementPolicy, String> {
    let err = || "expected contiguous, balanced or balanced:R (R ≥ 0 redundant experts per GPU)";
    match s.split_once(':') {
        None if s == "contiguous" => Ok(PlacementPolicy::Contiguous),
        None if s == "balanced" => Ok(PlacementPolicy::Balanced { redundant: 0 }),
        Some(("balanced", r)) => r
            .parse()
            .map(|redundant| PlacementPolicy::Balanced { redundant })
            .map_err(|_| err().to_string()),
        _ => Err(err().to_string()),
    }
}

/// Sort key of a placement policy: contiguous, then balanced by replicas.
fn placement_key(p: &PlacementPolicy) -> (u8, u32) {
    match p {
        PlacementPolicy::Contiguous => (0, 0),
        PlacementPolicy::Balanced { redundant } => (1, *redundant),
    }
}

/// The name of a placement policy as written in space files and plans.
pub fn placement_name(p: PlacementPolicy) -> String {
    match p {
        PlacementPolicy::Contiguous => "contiguous".into(),
        PlacementPolicy::Balanced { redundant } => format!("balanced:{redundant}"),
    }
}

fn parse_order(s: &str) -> Result<RankOrder, String> {
    let parts: Vec<&str> = s.split('-').collect();
    let err = || {
        "expected the four dims tp, cp, dp, pp once each, innermost first, e.g. tp-cp-dp-pp"
            .to_string()
    };
    if parts.len() != 4 {
        return Err(err());
    }
    let mut dims = [Dim::Tp; 4];
    for (d, p) in dims.iter_mut().zip(&parts) {
        *d = match *p {
            "tp" => Dim::Tp,
            "cp" => Dim::Cp,
            "dp" => Dim::Dp,
            "pp" => Dim::Pp,
            _ => return Err(err()),
        };
    }
    let mut sorted = dims;
    sorted.sort();
    if sorted != [Dim::Tp, Dim::Cp, Dim::Dp, Dim::Pp] {
        return Err(err());
    }
    Ok(RankOrder(dims))
}

/// The name of a rank order as written in space files: `tp-cp-dp-pp`.
pub fn order_name(o: RankOrder) -> String {
    o.0.iter()
        .map(|d| match d {
            Dim::Tp => "tp",
            Dim::Cp => "cp",
            Dim::Dp => "dp",
            Dim::Pp => "pp",
        })
        .collect::<Vec<_>>()
        .join("-")
}

/// A rank-order's sort key (Dim's order), so lists of orders sort deterministically.
fn order_key(o: &RankOrder) -> [Dim; 4] {
    o.0
}

fn algo_key(a: &AlgoMode) -> (u8, String) {
    match a {
        AlgoMode::Cheapest => (0, String::new()),
        AlgoMode::NcclLike => (1, String::new()),
        AlgoMode::NcclTuner => (2, String::new()),
        AlgoMode::Fixed(x) => (3, x.to_string()),
    }
}

/// Sort by `key` and drop duplicates, keeping the list canonical.
fn canon<T: Clone, K: Ord>(mut v: Vec<T>, key: impl Fn(&T) -> K) -> Vec<T> {
    v.sort_by_key(|a| key(a));
    v.dedup_by(|a, b| key(a) == key(b));
    v
}

impl Space {
    /// Parse and validate a space file.
    pub fn from_source(src: &Source) -> Result<Space, InputError> {
        let raw: RawSpaceFile = src.parse()?;
        Space::from_raw(src, raw)
    }

    fn from_raw(src: &Source, raw: RawSpaceFile) -> Result<Space, InputError> {
        let degrees = |sect: &str, name: &str, v: &[u32]| -> Result<Vec<u32>, InputError> {
            if v.is_empty() {
                return Err(src.invalid(&[sect, name], "[]", "the list is empty"));
            }
            if let Some(z) = v.iter().find(|&&x| x == 0) {
                return Err(src.invalid(&[sect, name], z, "a degree or size must be ≥ 1"));
            }
            Ok(canon(v.to_vec(), |x| *x))
        };
        let named = |sect: &str, name: &str, v: &[String]| -> Result<(), InputError> {
            if v.is_empty() {
                Err(src.invalid(&[sect, name], "[]", "the list is empty"))
            } else {
                Ok(())
            }
        };
        let enums = |sect: &str,
                     name: &str,
                     v: &[String],
                     parse: &dyn Fn(&str) -> Result<(), String>|
         -> Result<(), InputError> {
            named(sect, name, v)?;
            for s in v {
                parse(s).map_err(|r| src.invalid(&[sect, name], format!("\"{s}\""), r))?;
            }
            Ok(())
        };
        let bools = |sect: &str, name: &str, v: &[bool]| -> Result<Vec<bool>, InputError> {
            if v.is_empty() {
                return Err(src.invalid(&[sect, name], "[]", "the list is empty"));
            }
            Ok(canon(v.to_vec(), |x| *x))
        };
        macro_rules! table {
            ($sect:expr, $name:expr, $v:expr, $table:expr) => {{
                enums($sect, $name, $v, &|s| lookup($table, s).map(|_| ()))?;
                $v.iter()
                    .map(|s| lookup($table, s).unwrap_or($table[0].1))
                    .collect::<Vec<_>>()
            }};
        }
        let d = &raw.degrees;
        enums("memory", "recompute", &raw.memory.recompute, &|s| {
            parse_recompute(s).map(|_| ())
        })?;
        let recompute: Vec<_> = raw
            .memory
            .recompute
            .iter()
            .filter_map(|s| parse_recompute(s).ok())
            .collect();
        let schedule = table!("pipeline", "schedules", &raw.pipeline.schedules, SCHEDULE);
        let k = &raw.knobs;
        let cp_comm = table!("knobs", "cp_comm", &k.cp_comm, CP_COMM);
        let tp_sp = table!("knobs", "tp_sp_transition", &k.tp_sp_transition, TP_SP);
        let mts = table!("knobs", "moe_tp_scheme", &k.moe_tp_scheme, MOE_TP_SCHEME);
        let disp = table!("knobs", "dispatcher", &k.dispatcher, DISPATCHER);
        enums("knobs", "algo", &k.algo, &|s| parse_algo(s).map(|_| ()))?;
        let algo: Vec<AlgoMode> = k.algo.iter().filter_map(|s| parse_algo(s).ok()).collect();
        enums("knobs", "rank_order", &k.rank_order, &|s| {
            parse_order(s).map(|_| ())
        })?;
        let order: Vec<RankOrder> = k
            .rank_order
            .iter()
            .filter_map(|s| parse_order(s).ok())
            .collect();
        let placement = match &k.placement {
            None => vec![PlacementPolicy::Contiguous],
            Some(v) => {
                enums("knobs", "placement", v, &|s| parse_placement(s).map(|_| ()))?;
                v.iter().filter_map(|s| parse_placement(s).ok()).collect()
            }
        };
        if raw.memory.zero.is_empty() {
            return Err(src.invalid(&["memory", "zero"], "[]", "the list is empty"));
        }
        if let Some(z) = raw.memory.zero.iter().find(|&&z| z > 3) {
            return Err(src.invalid(&["memory", "zero"], z, "ZeRO stages are 0, 1, 2 and 3"));
        }
        let c = &raw.constraints;
        if c.max_pp == Some(0) {
            return Err(src.invalid(&["constraints", "max_pp"], 0, "must be ≥ 1"));
        }
        if c.min_microbatches_per_stage == Some(0) {
            return Err(src.invalid(
                &["constraints", "min_microbatches_per_stage"],
                0,
                "must be ≥ 1",
            ));
        }
        Ok(Space {
            description: raw.description.clone().unwrap_or_default(),
            tp: degrees("degrees", "tp", &d.tp)?,
            pp: degrees("degrees", "pp", &d.pp)?,
            cp: degrees("degrees", "cp", &d.cp)?,
            ep: degrees("degrees", "ep", &d.ep)?,
            moe_tp: degrees("degrees", "moe_tp", &d.moe_tp)?,
            dp: None,
            mbs: degrees("batch", "mbs", &raw.batch.mbs)?,
            recompute: canon(recompute, |r| *r),
            zero: canon(raw.memory.zero.iter().map(|&z| Zero(z)).collect(), |z| *z),
            schedule: canon(schedule, |s| SCHEDULE.iter().position(|(_, x)| x == s)),
            vpp: degrees("pipeline", "vpp", &raw.pipeline.vpp)?,
            sp: bools("knobs", "sp", &k.sp)?,
            cp_comm: canon(cp_comm, |x| CP_COMM.iter().position(|(_, y)| y == x)),
            tp_sp_transition: canon(tp_sp, |x| TP_SP.iter().position(|(_, y)| y == x)),
            moe_tp_scheme: canon(mts, |x| MOE_TP_SCHEME.iter().position(|(_, y)| y == x)),
            dispatcher: canon(disp, |x| DISPATCHER.iter().position(|(_, y)| y == x)),
            algo: canon(algo, algo_key),
            order: canon(order, order_key),
            tp_overlap: bools("knobs", "tp_overlap", &k.tp_overlap)?,
            ep_overlap: bools("knobs", "ep_overlap", &k.ep_overlap)?,
            placement: canon(placement, placement_key),
            constraints: Constraints {
                tp_within_node: c.tp_within_node,
                moe_tp_within_node: c.moe_tp_within_node,
                ep_within_node: c.ep_within_node,
                max_pp: c.max_pp,
                min_microbatches_per_stage: c.min_microbatches_per_stage,
            },
        })
    }

    /// Restrict the space to single values: `"tp=8,pp=16,recompute=full"` (the `--fix` flag).
    /// Keys: tp, pp, cp, dp, ep, moe_tp, mbs, recompute, zero, schedule, vpp, sp, cp_comm,
    /// tp_sp_transition, moe_tp_scheme, dispatcher, algo, rank_order, tp_overlap, ep_overlap,
    /// placement.
    pub fn fix(&mut self, assignments: &str) -> Result<(), FixError> {
        for part in assignments
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            let (key, value) = part.split_once('=').ok_or_else(|| FixError {
                item: part.to_string(),
                reason: "expected key=value".into(),
            })?;
            let (key, value) = (key.trim(), value.trim());
            let err = |reason: String| FixError {
                item: part.to_string(),
                reason,
            };
            let num = || -> Result<u32, FixError> {
                match value.parse::<u32>() {
                    Ok(0) | Err(_) => Err(err("expected a positive integer".into())),
                    Ok(n) => Ok(n),
                }
            };
            let boolean = || -> Result<bool, FixError> {
                value
                    .parse::<bool>()
                    .map_err(|_| err("expected true or false".into()))
            };
            match key {
                "tp" => self.tp = vec![num()?],
                "pp" => self.pp = vec![num()?],
                "cp" => self.cp = vec![num()?],
                "dp" => self.dp = Some(num()?),
                "ep" => self.ep = vec![num()?],
                "moe_tp" => self.moe_tp = vec![num()?],
                "mbs" => self.mbs = vec![num()?],
                "vpp" => self.vpp = vec![num()?],
                "zero" => match value.parse::<u8>() {
                    Ok(z) if z <= 3 => self.zero = vec![Zero(z)],
                    _ => return Err(err("ZeRO stages are 0, 1, 2 and 3".into())),
                },
                "recompute" => self.recompute = vec![parse_recompute(value).map_err(err)?],
                "schedule" => self.schedule = vec![lookup(SCHEDULE, value).map_err(err)?],
                "cp_comm" => self.cp_comm = vec![lookup(CP_COMM, value).map_err(err)?],
                "tp_sp_transition" => {
                    self.tp_sp_transition = vec![lookup(TP_SP, value).map_err(err)?]
                }
                "moe_tp_scheme" => {
                    self.moe_tp_scheme = vec![lookup(MOE_TP_SCHEME, value).map_err(err)?]
                }
                "dispatcher" => self.dispatcher = vec![lookup(DISPATCHER, value).map_err(err)?],
                "algo" => self.algo = vec![parse_algo(value).map_err(err)?],
                "rank_order" | "order" => self.order = vec![parse_order(value).map_err(err)?],
                "sp" => self.sp = vec![boolean()?],
                "tp_overlap" => self.tp_overlap = vec![boolean()?],
                "ep_overlap" => self.ep_overlap = vec![boolean()?],
                "placement" => self.placement = vec![parse_placement(value).map_err(err)?],
                _ => {
                    return Err(err(
                        "unknown key; expected one of tp, pp, cp, dp, ep, moe_tp, mbs, \
                         recompute, zero, schedule, vpp, sp, cp_comm, tp_sp_transition, \
                         moe_tp_scheme, dispatcher, algo, rank_order, tp_overlap, ep_overlap, \
                         placement"
                            .into(),
                    ))
                }
            }
        }
        Ok(())
    }
}

/// A bad `--fix` item.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--fix `{item}`: {reason}")]
pub struct FixError {
    pub item: String,
    pub reason: String,
}

/// Short names of the knob values, as written in space files (for tables).
pub fn schedule_name(s: Schedule) -> &'static str {
    SCHEDULE
        .iter()
        .find(|(_, x)| *x == s)
        .map_or("?", |(n, _)| n)
}

/// The plan's recompute as written in space files (`selective:layernorm+moe_act` for a module
/// set other than the default).
pub fn recompute_name(p: &Plan) -> String {
    autoplan_plan::parse::recompute_label(p.recompute, p.recompute_modules)
}

pub fn cp_comm_name(c: CpComm) -> &'static str {
    CP_COMM
        .iter()
        .find(|(_, x)| *x == c)
        .map_or("?", |(n, _)| n)
}

pub fn tp_sp_name(t: TpSpTransition) -> &'static str {
    TP_SP.iter().find(|(_, x)| *x == t).map_or("?", |(n, _)| n)
}

pub fn moe_tp_scheme_name(m: MoeTpScheme) -> &'static str {
    MOE_TP_SCHEME
        .iter()
        .find(|(_, x)| *x == m)
        .map_or("?", |(n, _)| n)
}

pub fn dispatcher_name(d: Dispatcher) -> &'static str {
    DISPATCHER
        .iter()
        .find(|(_, x)| *x == d)
        .map_or("?", |(n, _)| n)
}

/// `cheapest`, `nccl-like`, `nccl-tuner` or the fixed algorithm's name.
pub struct AlgoName(pub AlgoMode);

impl fmt::Display for AlgoName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            AlgoMode::Cheapest => f.write_str("cheapest"),
            AlgoMode::NcclLike => f.write_str("nccl-like"),
            AlgoMode::NcclTuner => f.write_str("nccl-tuner"),
            AlgoMode::Fixed(a) => write!(f, "{a}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_spaces_parse() {
        for name in bundled_spaces() {
            let s = resolve_space(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(!s.tp.is_empty(), "{name}");
        }
    }

    fn with(replace: &str, by: &str) -> String {
        let text = BUNDLED[0].1;
        assert!(text.contains(replace), "{replace}");
        text.replacen(replace, by, 1)
    }

    fn line_of(text: &str, needle: &str) -> usize {
        text.lines().position(|l| l.contains(needle)).unwrap() + 1
    }

    #[test]
    fn unknown_recompute_is_located_with_the_allowed_names() {
        let text = with("\"selective\"", "\"sometimes\"");
        let err = Space::from_source(&Source::new("s.toml", text.as_str())).unwrap_err();
        let msg = err.to_string();
        let line = line_of(&text, "sometimes");
        assert!(msg.starts_with(&format!("s.toml:{line}:")), "{msg}");
        assert!(
            msg.contains("memory.recompute") && msg.contains("selective"),
            "{msg}"
        );
    }

    #[test]
    fn zero_degree_and_empty_list_and_bad_order_are_errors() {
        let err = Space::from_source(&Source::new("s.toml", with("tp = [", "tp = [0, ")))
            .unwrap_err()
            .to_string();
        assert!(err.contains("degrees.tp = 0"), "{err}");
        let err = Space::from_source(&Source::new("s.toml", with("mbs = [", "mbs = [] #")))
            .unwrap_err()
            .to_string();
        assert!(err.contains("batch.mbs") && err.contains("empty"), "{err}");
        let err = Space::from_source(&Source::new(
            "s.toml",
            with("\"tp-cp-dp-pp\"", "\"tp-tp-dp-pp\""),
        ))
        .unwrap_err()
        .to_string();
        assert!(err.contains("knobs.rank_order"), "{err}");
        let err = Space::from_source(&Source::new("s.toml", with("[batch]", "[batch]\nmbz = 1")))
            .unwrap_err()
            .to_string();
        assert!(err.contains("mbz"), "{err}");
    }

    #[test]
    fn fix_restricts_and_rejects_bad_items() {
        let mut s = resolve_space("default").unwrap();
        s.fix("tp=8, pp=16,recompute=full,rank_order=tp-dp-cp-pp,sp=true")
            .unwrap();
        assert_eq!(s.tp, vec![8]);
        assert_eq!(s.pp, vec![16]);
        assert_eq!(
            s.recompute,
            vec![(Recompute::Full, RecomputeModules::DEFAULT)]
        );
        assert_eq!(s.sp, vec![true]);
        assert!(s.fix("tp=0").is_err());
        assert!(s.fix("tq=2").unwrap_err().reason.contains("unknown key"));
        assert!(s.fix("recompute=most").unwrap_err().reason.contains("full"));
        assert!(s.fix("tp").is_err());
        // Module sets, in the plan string's syntax.
        s.fix("recompute=selective:moe_act+layernorm").unwrap();
        assert_eq!(
            s.recompute,
            vec![(
                Recompute::Selective,
                RecomputeModules(RecomputeModules::LAYERNORM | RecomputeModules::MOE_ACT)
            )]
        );
        let err = s.fix("recompute=selective:attention").unwrap_err().reason;
        assert!(err.contains("mla_up_proj"), "{err}");
    }

    #[test]
    fn space_files_take_module_sets_and_locate_bad_ones() {
        let src = |recompute: &str| {
            let quick = concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../search_spaces/quick.toml"
            );
            let text = std::fs::read_to_string(quick).unwrap().replace(
                "recompute = [\"selective\", \"full\"]",
                &format!("recompute = {recompute}"),
            );
            Space::from_source(&Source::new("quick.toml", text))
        };
        let s = src("[\"selective:moe\", \"selective\", \"full\", \"selective:moe\"]").unwrap();
        // Sorted, de-duplicated: the default set before `moe`.
        assert_eq!(
            s.recompute,
            vec![
                (Recompute::Selective, RecomputeModules::DEFAULT),
                (
                    Recompute::Selective,
                    RecomputeModules(RecomputeModules::MOE)
                ),
                (Recompute::Full, RecomputeModules::DEFAULT),
            ]
        );
        let err = src("[\"selective:norm\"]").unwrap_err().to_string();
        assert!(
            err.contains("memory.recompute") && err.contains("layernorm"),
            "{err}"
        );
    }

    #[test]
    fn lists_are_sorted_and_deduplicated() {
        let s =
            Space::from_source(&Source::new("s.toml", with("tp = [", "tp = [8, 1, 8, "))).unwrap();
        assert!(s.tp.windows(2).all(|w| w[0] < w[1]), "{:?}", s.tp);
    }
}
