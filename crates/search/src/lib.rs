//! Find the best parallel training plans of a model on a cluster: an exact, parallel,
//! deterministic branch-and-bound over a search space of degrees and knobs.
//!
//! Boundary: this crate enumerates and prunes; it does not score plans. Scoring is the job of an
//! [`Objective`] (implemented for `autoplan_evaluate::Evaluator`, and by the synthetic
//! objective of [`testing`]); printing, progress bars and files are the CLI's.
//!
//! The principal function is [`search`]; the principal types are [`Space`] (what may be chosen,
//! from `search_spaces/*.toml`), [`Objective`] (score + admissible lower bounds) and
//! [`Outcome`] (the ranked top-K and the [`Stats`]).
//!
//! ```
//! use autoplan_search::{search, resolve_space, SearchOptions, testing::Synthetic};
//!
//! let space = resolve_space("quick").unwrap();
//! let objective = Synthetic::example();
//! let fast = search(&objective, &space, &SearchOptions { top_k: 3, exhaustive: false }, &());
//! let slow = search(&objective, &space, &SearchOptions { top_k: 3, exhaustive: true }, &());
//! // Pruning never changes the answer (the bounds are admissible).
//! assert_eq!(fast.keys(), slow.keys());
//! assert!(fast.stats.evaluated <= slow.stats.evaluated);
//! ```

mod case;
mod degrees;
mod engine;
mod evaluator;
pub mod fold;
pub mod framework;
mod outcome;
pub mod pareto;
mod queue;
pub mod space;
pub mod testing;
pub mod train;

use autoplan_plan::{Plan, Recompute, RecomputeModules, Schedule, Zero};

pub use case::{search_case, search_case_for, CaseOutcome, Target, DEFAULT_MIN_HEADROOM_BYTES};
pub use engine::search;
pub use evaluator::Scorer;
pub use outcome::{NoFit, Observer, Outcome, Ranked, SearchOptions, Stats, MAX_TOP_K};
pub use space::{bundled_spaces, resolve_space, FixError, Space, SpaceError};

/// What the search needs to know about the model and the cluster to enumerate valid degrees.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    /// GPUs of the cluster; every plan uses all of them (`tp·cp·dp·pp = gpus`).
    pub gpus: u32,
    /// GPUs per NVLink domain (`Cluster::domain_gpus`: a host's GPUs, or an NVL72 rack's 72):
    /// the "node" of the cost model and of the `tp_within_node` constraint.
    pub gpus_per_node: u32,
    /// Attention heads (`tp` must divide them).
    pub heads: u32,
    /// Transformer blocks (`pp` ≤ blocks).
    pub layers: u32,
    /// Routed experts per MoE layer; 0 for a dense model (then `ep = moe_tp = 1`).
    pub experts: u32,
    /// Global batch in sequences (`mbs · dp` must divide it).
    pub global_batch: u32,
    /// HBM per GPU, bytes: a subtree whose memory floor exceeds it is cut.
    pub hbm_bytes: f64,
}

/// How far down the decision order a [`Partial`] plan is fixed. The order is
/// `pp → tp → ep → moe_tp → cp → (dp) → mbs → recompute → schedule/vpp → zero → knobs`:
/// the degrees first (they decide memory floors and most of the time), the knobs that only
/// move communication last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Depth {
    /// Degrees and micro-batch size fixed.
    MicroBatch,
    /// ... and the recompute mode.
    Recompute,
    /// ... and the pipeline schedule with its virtual stages.
    Schedule,
    /// ... and the ZeRO stage (only the knobs remain).
    Zero,
}

/// A plan fixed down to `depth`; fields below it hold the space's first (canonical) values.
/// `space` tells what the remaining decisions can still be.
#[derive(Debug, Clone, Copy)]
pub struct Partial<'a> {
    pub plan: Plan,
    pub depth: Depth,
    pub space: &'a Space,
    /// The current K-th best step time (∞ until K plans are known): a bound above it cuts the
    /// subtree, so an objective may stop refining its bound once it exceeds this.
    pub threshold: f64,
}

/// Admissible lower bounds for every completion of a [`Partial`]: no completion has a smaller
/// step time or a smaller peak memory. `Bound::NONE` prunes nothing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bound {
    pub step_time_s: f64,
    pub memory_bytes: f64,
}

impl Bound {
    pub const NONE: Bound = Bound {
        step_time_s: 0.0,
        memory_bytes: 0.0,
    };
}

/// The values a task's tree still decides below its root, in the order its walk takes them:
/// the index of a node's value in these lists is its position in a [`Objective::floor_table`].
#[derive(Debug, Clone, Copy)]
pub struct Open<'a> {
    /// Recompute entries (mode, modules).
    pub recomputes: &'a [(Recompute, RecomputeModules)],
    /// (Schedule, virtual stages) pairs.
    pub schedules: &'a [(Schedule, u32)],
    /// Sharding modes.
    pub zeros: &'a [Zero],
}

impl Open<'_> {
    /// Entries of a table over these lists.
    pub fn len(&self) -> usize {
        self.recomputes.len() * self.schedules.len() * self.zeros.len()
    }

    /// Whether a table over these lists is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The table index of (recompute `r`, schedule pair `s`, sharding mode `z`).
    pub fn index(&self, r: usize, s: usize, z: usize) -> usize {
        (r * self.schedules.len() + s) * self.zeros.len() + z
    }
}

/// Why an objective rejected a complete plan.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reject {
    /// Not a valid plan for this model and cluster.
    Invalid,
    /// Needs `peak_bytes` on its busiest GPU, more than `hbm_bytes`.
    OutOfMemory { peak_bytes: f64, hbm_bytes: f64 },
}

/// What the search optimises: a score for complete plans and admissible bounds for partial
/// ones (egg's `CostFunction`: one job). The search minimises [`Objective::step_time`].
///
/// **Contract:** `bound(p).step_time_s ≤ step_time(evaluate(plan))` and
/// `bound(p).memory_bytes ≤` the peak memory of `plan` for every complete `plan` below `p`,
/// and a plan is rejected for memory exactly when its peak exceeds `shape().hbm_bytes`.
/// Then pruning never changes the top-K (tested against exhaustive enumeration).
pub trait Objective: Sync {
    /// The figures of merit of one plan (`Copy`: no allocation per plan).
    type Metrics: Copy + Send + Sync + std::fmt::Debug;
    fn shape(&self) -> Shape;
    /// Score one complete plan. Called millions of times: must not allocate.
    fn evaluate(&self, plan: &Plan) -> Result<Self::Metrics, Reject>;
    /// Seconds per optimizer step; smaller is better.
    fn step_time(metrics: &Self::Metrics) -> f64;
    /// Whether the model can take this recompute entry of a space (e.g. `mla_up_proj` needs
    /// MLA): the search drops the others before it starts. The default takes every entry.
    fn admits(&self, recompute: (Recompute, RecomputeModules)) -> bool {
        let _ = recompute;
        true
    }
    /// Lower bounds for every completion of `partial`. The default prunes nothing.
    fn bound(&self, partial: &Partial<'_>) -> Bound {
        let _ = partial;
        Bound::NONE
    }
    /// The step-time part of [`Objective::bound`] alone (the search orders its tasks by it
    /// and asks for the memory floor only of those it does not cut by time). The default is
    /// `bound`'s; an objective whose memory floor is costly computes the time part alone.
    fn time_bound(&self, partial: &Partial<'_>) -> f64 {
        self.bound(partial).step_time_s
    }
    /// A cheaper step-time bound than [`Objective::time_bound`], possibly looser (never above
    /// it): the search bounds every task's root with it up front, orders the tasks by it and
    /// asks for `time_bound` only of those it does not cut. The default is `time_bound`.
    fn order_bound(&self, partial: &Partial<'_>) -> f64 {
        self.time_bound(partial)
    }
    /// A step-time bound between [`Objective::order_bound`] and [`Objective::screen_bound`]
    /// (both inclusive): the search asks for it at a task's root after the ordering bound, so
    /// the screening one is computed only where this does not cut. The default is
    /// `order_bound`.
    fn compute_bound(&self, partial: &Partial<'_>) -> f64 {
        self.order_bound(partial)
    }
    /// A step-time bound between [`Objective::compute_bound`] and [`Objective::time_bound`]
    /// (both inclusive): the search asks for it at a task's root after the compute bound and
    /// before the full one, so the full one is computed only where this does not cut. The
    /// default is `compute_bound`.
    fn screen_bound(&self, partial: &Partial<'_>) -> f64 {
        self.compute_bound(partial)
    }
    /// Step-time floors of a task's tree from its root `root` (depth `MicroBatch`), one per
    /// (recompute, schedule, sharding) triple of `open` at [`Open::index`]: each bounds every
    /// completion of the root with those three values, as [`Objective::time_bound`] bounds the
    /// node fixing them, and is `∞` where the triple makes no valid plan. The search then
    /// bounds each node by the least entry of its block (0 where all are `∞`: no
    /// information) and asks only for its memory floor. False where the objective has no
    /// table (the default): the search asks `bound` at every node.
    fn floor_table(&self, root: &Partial<'_>, open: &Open<'_>, out: &mut Vec<f64>) -> bool {
        let _ = (root, open, out);
        false
    }
    /// The memory part of [`Objective::bound`] alone. The default is `bound`'s.
    fn memory_bound(&self, partial: &Partial<'_>) -> f64 {
        self.bound(partial).memory_bytes
    }
}
