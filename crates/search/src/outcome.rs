//! What a search takes and returns: [`SearchOptions`], the [`Observer`] of its progress, and
//! its [`Outcome`] (the [`Ranked`] plans, the [`Stats`], and [`NoFit`] when nothing fits).

use autoplan_plan::Plan;
/// The most plans a front end lets a user rank (`search --top`, a sweep's `top_k`). A ranking
/// is read by a person or kept per case in a sweep CSV: 10,000 rows is more than either uses,
/// and a K near the size of the space only disables the pruning (the K-th best time bounds
/// nothing). The engine itself takes any K: its lists grow with the plans found, not with K.
pub const MAX_TOP_K: usize = 10_000;

/// Options of one search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchOptions {
    /// How many plans to return (at least 1; any size: nothing is allocated in proportion to
    /// it, see [`MAX_TOP_K`] for the front ends' bound).
    pub top_k: usize,
    /// Evaluate every plan of the space, no pruning (to check the bounds, and for benches).
    pub exhaustive: bool,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            top_k: 10,
            exhaustive: false,
        }
    }
}

/// Progress of a search, pushed out of the core (the CLI draws a bar with it).
pub trait Observer: Sync {
    /// `done` of `total` tasks are finished. Called from worker threads.
    fn progress(&self, done: u64, total: u64);
}

impl Observer for () {
    fn progress(&self, _: u64, _: u64) {}
}

/// One plan of the ranking.
#[derive(Debug, Clone, Copy)]
pub struct Ranked<M> {
    pub plan: Plan,
    /// The plan's position in the space's canonical enumeration (the tie-breaker).
    pub key: u128,
    pub metrics: M,
    pub step_time_s: f64,
}

/// Counters of one search. `evaluated + pruned_plans = space_plans` (exhaustive: no pruning).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Stats {
    /// Valid plans in the space (after the constraints and the collapse of irrelevant knobs).
    pub space_plans: u64,
    /// Parallel tasks (degree tuple × micro-batch size).
    pub tasks: u64,
    /// Bounds computed at interior nodes of the tree (a task's root counts once per level of
    /// its bound: the ordering bound, then the screening and full ones where asked for).
    pub nodes: u64,
    /// Subtrees cut because their step-time bound exceeded the K-th best.
    pub pruned_by_time: u64,
    /// Subtrees cut because their memory floor exceeded HBM.
    pub pruned_by_memory: u64,
    /// Plans under the cut subtrees (never evaluated).
    pub pruned_plans: u64,
    /// Plans scored by the objective.
    pub evaluated: u64,
    pub feasible: u64,
    pub out_of_memory: u64,
    pub invalid: u64,
    pub threads: usize,
    pub wall_s: f64,
}

impl Stats {
    /// Fraction of the space never evaluated.
    pub fn prune_ratio(&self) -> f64 {
        if self.space_plans == 0 {
            0.0
        } else {
            self.pruned_plans as f64 / self.space_plans as f64
        }
    }

    /// Evaluated plans per second of wall time.
    pub fn plans_per_s(&self) -> f64 {
        self.evaluated as f64 / self.wall_s.max(1e-9)
    }

    pub(crate) fn add(&mut self, o: &Stats) {
        self.nodes += o.nodes;
        self.pruned_by_time += o.pruned_by_time;
        self.pruned_by_memory += o.pruned_by_memory;
        self.pruned_plans += o.pruned_plans;
        self.evaluated += o.evaluated;
        self.feasible += o.feasible;
        self.out_of_memory += o.out_of_memory;
        self.invalid += o.invalid;
    }
}

/// Why nothing fits: the least memory any plan of the space needs (a memory floor or the peak
/// of an evaluated plan, whichever is smaller) against the HBM.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct NoFit {
    pub min_memory_bytes: f64,
    pub hbm_bytes: f64,
}

/// The result of a search.
#[derive(Debug, Clone)]
pub struct Outcome<M> {
    /// Best first, ranked by `(step time, key)`.
    pub plans: Vec<Ranked<M>>,
    pub stats: Stats,
    /// Set when no plan fits in memory (and `plans` is empty).
    pub no_fit: Option<NoFit>,
}

impl<M> Outcome<M> {
    /// The ranked plans' keys (for comparing two searches).
    pub fn keys(&self) -> Vec<u128> {
        self.plans.iter().map(|r| r.key).collect()
    }
}
