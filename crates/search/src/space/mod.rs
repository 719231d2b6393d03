//! Search spaces: which values of every decision the search may try, and the constraints.
//!
//! A space file (`search_spaces/*.toml`) is parsed into [`RawSpaceFile`] (unknown fields are
//! errors), then validated into [`Space`]: every list non-empty, sorted and de-duplicated, every
//! name known. Errors name the file, line and field ([`autoplan_input::InputError`]).

use autoplan_input::{InputError, Source};
use autoplan_plan::knob::{
    self, Knob, Names, CP_COMMS, DISPATCHERS, MOE_TP_SCHEMES, SCHEDULES, TRANSITIONS,
};
use autoplan_plan::{
    AlgoMode, CpComm, Dim, Dispatcher, MoeTpScheme, PlacementPolicy, Plan, RankOrder, Recompute,
    RecomputeModules, Schedule, TpSpTransition, Zero,
};
use serde::Deserialize;

mod file;
mod names;

use file::{bools, check_zero_constraints, degrees, table, values};
pub use names::{
    cp_comm_name, dispatcher_name, moe_tp_scheme_name, recompute_name, schedule_name, tp_sp_name,
    AlgoName,
};

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
    /// ZeRO stages as numbers, or any `zero=` value as a string (`"3-noreshard"`, `"3:8"`).
    pub zero: Vec<RawZero>,
    /// Fractions of the optimizer state offloaded to host memory (`offload_optimizer=`,
    /// numbers in [0, 1] or strings). Absent: `[0]`, no offload.
    #[serde(default)]
    pub offload_optimizer: Option<Vec<RawFraction>>,
    /// Whether ZeRO-3's parameter shard lives in host memory (`offload_params=`, booleans).
    /// Absent: `[false]`.
    #[serde(default)]
    pub offload_params: Option<Vec<bool>>,
    /// Layers per pipeline stage whose activations are offloaded (`offload_activations=`,
    /// numbers or `"all"`). Absent: `[0]`.
    #[serde(default)]
    pub offload_activations: Option<Vec<RawFraction>>,
}

/// One `[memory] offload_optimizer` entry: a number or a plan-string value.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum RawFraction {
    Number(f64),
    Name(String),
}

impl RawFraction {
    fn text(&self) -> String {
        match self {
            RawFraction::Number(n) => n.to_string(),
            RawFraction::Name(s) => s.clone(),
        }
    }
}

/// One `[memory] zero` entry: a stage number or a plan-string `zero=` value.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum RawZero {
    Stage(i64),
    Name(String),
}

impl RawZero {
    /// The mode, or `None` if it is not one (`Zero::parse`).
    pub fn zero(&self) -> Option<Zero> {
        match self {
            RawZero::Stage(n) => Zero::parse(&n.to_string()),
            RawZero::Name(s) => Zero::parse(s),
        }
    }
}

impl std::fmt::Display for RawZero {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RawZero::Stage(n) => write!(f, "{n}"),
            RawZero::Name(s) => write!(f, "{s:?}"),
        }
    }
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
    /// The space's collective library: `nccl` or `any` turns `algo = "cheapest"` into
    /// `nccl-tuner` or `any` (docs/cost-model.md "Collective library"). Absent: the cluster's.
    #[serde(default)]
    pub library: Option<String>,
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
    /// Percent of the optimizer state offloaded to host memory (`offload_optimizer`), the
    /// least first.
    pub offload_optimizer: Vec<u8>,
    /// Parameter offload to host memory (`offload_params`), off first.
    pub offload_params: Vec<bool>,
    /// Layers per stage whose activations are offloaded (`offload_activations`), the fewest
    /// first (`all` last).
    pub offload_activations: Vec<u32>,
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
        include_str!("../../../../search_spaces/default.toml"),
    ),
    (
        "dense",
        include_str!("../../../../search_spaces/dense.toml"),
    ),
    ("moe", include_str!("../../../../search_spaces/moe.toml")),
    (
        "quick",
        include_str!("../../../../search_spaces/quick.toml"),
    ),
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

/// The value `s` of `knob` as the plan string parses it (`autoplan_plan::knob`), set into a
/// default plan; the error says what the knob accepts.
fn parse_knob(knob: Knob, s: &str) -> Result<Plan, String> {
    let mut plan = Plan::default();
    knob.parse_into(&mut plan, s).map_err(|e| match e {
        // The plan string's list of what the key accepts.
        autoplan_plan::ParseError::BadValue { expected, .. } => {
            format!("unknown value; expected {expected}")
        }
        other => other.to_string(),
    })?;
    Ok(plan)
}

/// A value of an enumerated knob in a space file: one of the table's names.
fn lookup<T: Copy + PartialEq>(table: Names<T>, s: &str) -> Result<T, String> {
    table
        .parse(s)
        .ok_or_else(|| format!("unknown value; expected one of: {}", table.file_names()))
}

/// Sort key of a CP exchange: the named ones in their table's order, then `a2a+p2p` by its
/// a2a group size.
fn cp_comm_key(c: &CpComm) -> (usize, u32) {
    match *c {
        CpComm::Hierarchical { a2a } => (CP_COMMS.0.len(), a2a),
        c => (CP_COMMS.position(c), 0),
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
    knob::placement_name(p)
}

/// The name of a rank order as written in space files: `tp-cp-dp-pp`.
pub fn order_name(o: RankOrder) -> String {
    o.to_string()
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
        AlgoMode::Any => (3, String::new()),
        AlgoMode::Fixed(x) => (4, x.to_string()),
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
        let d = &raw.degrees;
        let recompute: Vec<_> = values(
            src,
            "memory",
            "recompute",
            &raw.memory.recompute,
            Knob::Recompute,
        )?
        .into_iter()
        .map(|p| (p.recompute, p.recompute_modules))
        .collect();
        let schedule = table(
            src,
            "pipeline",
            "schedules",
            &raw.pipeline.schedules,
            SCHEDULES,
        )?;
        let k = &raw.knobs;
        let cp_comm: Vec<CpComm> = values(src, "knobs", "cp_comm", &k.cp_comm, Knob::CpComm)?
            .into_iter()
            .map(|p| p.cp_comm)
            .collect();
        let tp_sp = table(
            src,
            "knobs",
            "tp_sp_transition",
            &k.tp_sp_transition,
            TRANSITIONS,
        )?;
        let mts = table(
            src,
            "knobs",
            "moe_tp_scheme",
            &k.moe_tp_scheme,
            MOE_TP_SCHEMES,
        )?;
        let disp = table(src, "knobs", "dispatcher", &k.dispatcher, DISPATCHERS)?;
        let library = match &k.library {
            None => None,
            Some(l) => Some(
                l.parse::<autoplan_cluster::CollectiveLibrary>()
                    .map_err(|e| src.invalid(&["knobs", "library"], l, e))?,
            ),
        };
        let algo: Vec<AlgoMode> = values(src, "knobs", "algo", &k.algo, Knob::Algo)?
            .into_iter()
            .map(|p| match (p.algo, library) {
                (AlgoMode::Cheapest, Some(autoplan_cluster::CollectiveLibrary::Nccl)) => {
                    AlgoMode::NcclTuner
                }
                (AlgoMode::Cheapest, Some(autoplan_cluster::CollectiveLibrary::Any)) => {
                    AlgoMode::Any
                }
                (a, _) => a,
            })
            .collect();
        let order: Vec<RankOrder> = values(src, "knobs", "rank_order", &k.rank_order, Knob::Order)?
            .into_iter()
            .map(|p| p.order)
            .collect();
        let placement = match &k.placement {
            None => vec![PlacementPolicy::Contiguous],
            Some(v) => values(src, "knobs", "placement", v, Knob::Placement)?
                .into_iter()
                .map(|p| p.placement)
                .collect(),
        };
        // `[memory]` lists of numbers or names read as the knob's plan-string values.
        let memory_values = |name: &str, v: &[RawFraction], knob: Knob| {
            let texts: Vec<String> = v.iter().map(RawFraction::text).collect();
            values(src, "memory", name, &texts, knob)
        };
        let offload_optimizer = match &raw.memory.offload_optimizer {
            None => vec![0],
            Some(v) => memory_values("offload_optimizer", v, Knob::OffloadOptimizer)?
                .into_iter()
                .map(|p| p.offload_optimizer)
                .collect(),
        };
        let offload_params = match &raw.memory.offload_params {
            None => vec![false],
            Some(v) => bools(src, "memory", "offload_params", v)?,
        };
        let offload_activations = match &raw.memory.offload_activations {
            None => vec![0],
            Some(v) => memory_values("offload_activations", v, Knob::OffloadActivations)?
                .into_iter()
                .map(|p| p.offload_activations)
                .collect(),
        };
        check_zero_constraints(src, &raw)?;
        let c = &raw.constraints;
        Ok(Space {
            description: raw.description.clone().unwrap_or_default(),
            tp: degrees(src, "degrees", "tp", &d.tp)?,
            pp: degrees(src, "degrees", "pp", &d.pp)?,
            cp: degrees(src, "degrees", "cp", &d.cp)?,
            ep: degrees(src, "degrees", "ep", &d.ep)?,
            moe_tp: degrees(src, "degrees", "moe_tp", &d.moe_tp)?,
            dp: None,
            mbs: degrees(src, "batch", "mbs", &raw.batch.mbs)?,
            recompute: canon(recompute, |r| *r),
            zero: canon(
                raw.memory.zero.iter().filter_map(RawZero::zero).collect(),
                |z| *z,
            ),
            schedule: canon(schedule, |&x| SCHEDULES.position(x)),
            vpp: degrees(src, "pipeline", "vpp", &raw.pipeline.vpp)?,
            sp: bools(src, "knobs", "sp", &k.sp)?,
            cp_comm: canon(cp_comm, cp_comm_key),
            tp_sp_transition: canon(tp_sp, |&x| TRANSITIONS.position(x)),
            moe_tp_scheme: canon(mts, |&x| MOE_TP_SCHEMES.position(x)),
            dispatcher: canon(disp, |&x| DISPATCHERS.position(x)),
            algo: canon(algo, algo_key),
            order: canon(order, order_key),
            tp_overlap: bools(src, "knobs", "tp_overlap", &k.tp_overlap)?,
            ep_overlap: bools(src, "knobs", "ep_overlap", &k.ep_overlap)?,
            placement: canon(placement, placement_key),
            offload_optimizer: canon(offload_optimizer, |x| *x),
            offload_params,
            offload_activations: canon(offload_activations, |x| *x),
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
    /// Keys and values are the plan string's (`autoplan_plan::knob`, so every plan the search
    /// prints can be fixed), plus the space files' spellings (`tp_sp_transition`,
    /// `rank_order`, `all-reduce-slice`, `true`/`false`); `dp` restricts what the GPUs leave.
    ///
    /// `--fix` narrows, never widens: a value must be one the space lists for the knob, or the
    /// value every plan shows where the knob does not apply (`Plan::default()`'s, e.g. `sp=off`
    /// with tp = 1, `ep=1` on a dense model, `vpp=1` without the interleaved schedule), so
    /// every plan the search prints can be fixed back. A knob given twice is an error (as in
    /// `evaluate --plan`), whatever the spelling of its key.
    pub fn fix(&mut self, assignments: &str) -> Result<(), FixError> {
        let mut seen: Vec<(Knob, String)> = Vec::new();
        for part in assignments
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            let err = |reason: String| FixError {
                item: part.to_string(),
                reason,
            };
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| err("expected key=value".into()))?;
            let knob = Knob::from_key(key)
                .ok_or_else(|| err(format!("unknown key; expected one of {}", fix_keys())))?;
            if let Some((_, first)) = seen.iter().find(|(k, _)| *k == knob) {
                return Err(err(format!(
                    "`{}` is fixed twice (first `{first}`); give each knob once",
                    knob.key()
                )));
            }
            seen.push((knob, part.to_string()));
            let plan = parse_knob(knob, value).map_err(err)?;
            if !self.admits(knob, &plan) {
                return Err(err(format!(
                    "{}={} is not in the space (it lists {}={}); --fix narrows the space to one \
                     of its values, edit the space file to try others",
                    knob.key(),
                    knob.value(&plan),
                    knob.key(),
                    self.values(knob).join("|"),
                )));
            }
            self.restrict(knob, &plan).map_err(err)?;
        }
        Ok(())
    }

    /// Whether `--fix` may restrict `knob` to `plan`'s value: one the space lists, or the
    /// default a plan shows where the knob does not apply (a knob that can be irrelevant:
    /// [`Knob::matters`] is false for it in the smallest context). `dp` is not a list, and the
    /// knobs the search does not decide are refused by [`Space::restrict`].
    fn admits(&self, knob: Knob, plan: &Plan) -> bool {
        if self.count(knob) == 0 {
            return true;
        }
        let smallest = knob::Context::new(&Plan::default(), false);
        let collapsible = !knob.matters(&smallest);
        (collapsible && knob.same(plan, &Plan::default()))
            || (0..self.count(knob)).any(|i| {
                let mut q = *plan;
                self.set(knob, i, &mut q);
                knob.same(&q, plan)
            })
    }

    /// The space's values of `knob`, as the plan string writes them.
    fn values(&self, knob: Knob) -> Vec<String> {
        (0..self.count(knob))
            .map(|i| {
                let mut q = Plan::default();
                self.set(knob, i, &mut q);
                knob.value(&q)
            })
            .collect()
    }

    /// Restrict `knob`'s list to `plan`'s value; an error for a knob the space does not list.
    fn restrict(&mut self, knob: Knob, plan: &Plan) -> Result<(), String> {
        let p = plan;
        match knob {
            Knob::Tp => self.tp = vec![p.tp],
            Knob::Pp => self.pp = vec![p.pp],
            Knob::Cp => self.cp = vec![p.cp],
            Knob::Dp => self.dp = Some(p.dp),
            Knob::Ep => self.ep = vec![p.ep],
            Knob::MoeTp => self.moe_tp = vec![p.moe_tp],
            Knob::Mbs => self.mbs = vec![p.mbs],
            Knob::Vpp => self.vpp = vec![p.vpp],
            Knob::Zero => self.zero = vec![p.zero],
            Knob::Recompute => self.recompute = vec![(p.recompute, p.recompute_modules)],
            Knob::Schedule => self.schedule = vec![p.schedule],
            Knob::Sp => self.sp = vec![p.sp],
            Knob::CpComm => self.cp_comm = vec![p.cp_comm],
            Knob::Transition => self.tp_sp_transition = vec![p.tp_sp_transition],
            Knob::MoeTpScheme => self.moe_tp_scheme = vec![p.moe_tp_scheme],
            Knob::Dispatcher => self.dispatcher = vec![p.dispatcher],
            Knob::Algo => self.algo = vec![p.algo],
            Knob::Order => self.order = vec![p.order],
            Knob::TpOverlap => self.tp_overlap = vec![p.tp_overlap],
            Knob::EpOverlap => self.ep_overlap = vec![p.ep_overlap],
            Knob::Placement => self.placement = vec![p.placement],
            Knob::OffloadOptimizer => self.offload_optimizer = vec![p.offload_optimizer],
            Knob::OffloadParams => self.offload_params = vec![p.offload_params],
            Knob::OffloadActivations => self.offload_activations = vec![p.offload_activations],
            Knob::RecomputeLayers
            | Knob::FirstStageLayers
            | Knob::LastStageLayers
            | Knob::PipelineSplit => {
                return Err(format!(
                    "`{}` is not a decision of the search (use `autoplan evaluate --plan`)",
                    knob.key()
                ))
            }
        }
        Ok(())
    }

    /// How many values the space lists for `knob`, one of [`Knob::KEY_ORDER`] (0 for the
    /// others). Pair with [`Space::set`].
    pub fn count(&self, knob: Knob) -> usize {
        match knob {
            Knob::Tp => self.tp.len(),
            Knob::Pp => self.pp.len(),
            Knob::Cp => self.cp.len(),
            Knob::Ep => self.ep.len(),
            Knob::MoeTp => self.moe_tp.len(),
            Knob::Mbs => self.mbs.len(),
            Knob::Vpp => self.vpp.len(),
            Knob::Zero => self.zero.len(),
            Knob::Recompute => self.recompute.len(),
            Knob::Schedule => self.schedule.len(),
            Knob::Sp => self.sp.len(),
            Knob::CpComm => self.cp_comm.len(),
            Knob::Transition => self.tp_sp_transition.len(),
            Knob::MoeTpScheme => self.moe_tp_scheme.len(),
            Knob::Dispatcher => self.dispatcher.len(),
            Knob::Algo => self.algo.len(),
            Knob::Order => self.order.len(),
            Knob::TpOverlap => self.tp_overlap.len(),
            Knob::EpOverlap => self.ep_overlap.len(),
            Knob::Placement => self.placement.len(),
            Knob::OffloadOptimizer => self.offload_optimizer.len(),
            Knob::OffloadParams => self.offload_params.len(),
            Knob::OffloadActivations => self.offload_activations.len(),
            Knob::Dp
            | Knob::RecomputeLayers
            | Knob::FirstStageLayers
            | Knob::LastStageLayers
            | Knob::PipelineSplit => 0,
        }
    }

    /// Set `plan`'s `knob` to the space's `i`-th value (`i < self.count(knob)`; a knob the
    /// space does not list is left alone).
    #[inline]
    pub fn set(&self, knob: Knob, i: usize, plan: &mut Plan) {
        let p = plan;
        match knob {
            Knob::Tp => p.tp = self.tp[i],
            Knob::Pp => p.pp = self.pp[i],
            Knob::Cp => p.cp = self.cp[i],
            Knob::Ep => p.ep = self.ep[i],
            Knob::MoeTp => p.moe_tp = self.moe_tp[i],
            Knob::Mbs => p.mbs = self.mbs[i],
            Knob::Vpp => p.vpp = self.vpp[i],
            Knob::Zero => p.zero = self.zero[i],
            Knob::Recompute => (p.recompute, p.recompute_modules) = self.recompute[i],
            Knob::Schedule => p.schedule = self.schedule[i],
            Knob::Sp => p.sp = self.sp[i],
            Knob::CpComm => p.cp_comm = self.cp_comm[i],
            Knob::Transition => p.tp_sp_transition = self.tp_sp_transition[i],
            Knob::MoeTpScheme => p.moe_tp_scheme = self.moe_tp_scheme[i],
            Knob::Dispatcher => p.dispatcher = self.dispatcher[i],
            Knob::Algo => p.algo = self.algo[i],
            Knob::Order => p.order = self.order[i],
            Knob::TpOverlap => p.tp_overlap = self.tp_overlap[i],
            Knob::EpOverlap => p.ep_overlap = self.ep_overlap[i],
            Knob::Placement => p.placement = self.placement[i],
            Knob::OffloadOptimizer => p.offload_optimizer = self.offload_optimizer[i],
            Knob::OffloadParams => p.offload_params = self.offload_params[i],
            Knob::OffloadActivations => p.offload_activations = self.offload_activations[i],
            Knob::Dp
            | Knob::RecomputeLayers
            | Knob::FirstStageLayers
            | Knob::LastStageLayers
            | Knob::PipelineSplit => {}
        }
    }
}

/// The keys `--fix` takes: the plan string's, but for the ones a search does not decide.
fn fix_keys() -> String {
    let keys: Vec<&str> = Knob::ALL
        .iter()
        .filter(|k| {
            !matches!(
                k,
                Knob::RecomputeLayers
                    | Knob::FirstStageLayers
                    | Knob::LastStageLayers
                    | Knob::PipelineSplit
            )
        })
        .map(|k| k.key())
        .collect();
    keys.join(", ")
}

/// A bad `--fix` item.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--fix `{item}`: {reason}")]
pub struct FixError {
    pub item: String,
    pub reason: String,
}

#[cfg(test)]
mod tests;
