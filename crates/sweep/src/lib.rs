//! Sweeps: run a grid of models × clusters × workloads × search spaces through a planner and
//! write one CSV row per (case, rank) — deterministic, resumable, shardable and mergeable.
//!
//! Boundary: this crate writes no files and the engine is generic over how a case is planned:
//! a [`Planner`] ([`SearchPlanner`] runs `autoplan-search` over the evaluator, the one the CLI
//! uses; [`testing::SyntheticPlanner`] is arithmetic, for tests). Finished cases are handed, as
//! CSV text, to a callback that the CLI turns into an append + `fsync` on the output file. What
//! makes files safe to resume, shard and merge — the schema ([`schema`]), the case order,
//! complete-block detection — lives here as pure functions of text. (Reading inputs — spec,
//! models, clusters, spaces — goes through `autoplan_input::Source` and the resolvers.)
//!
//! The principal types are [`SweepSpec`] (a validated spec), [`Case`] (one grid point) and
//! [`SweepTable`] (a parsed sweep CSV). The file order is canonical: blocks of rows sorted by
//! case index. During a run, blocks are appended in *completion* order (so no finished case
//! waits on a slow one, and a kill loses at most the cases in flight); when the run ends the
//! file is rewritten in canonical order ([`merge`] of the one file). Hence the same inputs give
//! the same bytes whatever the thread count, after a resume, or after sharding and merging.
//!
//! ```
//! use autoplan_input::Source;
//! use autoplan_sweep::{merge, run, Infeasible, SweepSpec};
//!
//! let spec = SweepSpec::parse(Source::new("s.toml", r#"
//!     top_k = 1
//!     models = ["tiny"]
//!     seq_lens = [2048]
//!     global_batches = [8, 7]
//!     spaces = ["default"]
//!     [[clusters]]
//!     name = "x8"
//! "#)).unwrap();
//! let cases = spec.cases(|_| Ok(8)).unwrap();
//! // A planner that finds nothing when the batch does not split over the GPUs.
//! let planner = |c: &autoplan_sweep::Case| {
//!     if c.global_batch % c.gpus != 0 {
//!         return Err(Infeasible { reason: "global batch not divisible by data parallelism".into() });
//!     }
//!     Err(Infeasible { reason: "synthetic".into() })
//! };
//! let mut out = autoplan_sweep::header();
//! run(&cases, &planner, 2, |_case, block| {
//!     out.push_str(&block);
//!     Ok::<_, std::convert::Infallible>(std::ops::ControlFlow::Continue(()))
//! }).unwrap();
//! let out = merge(&[("out.csv", out.as_str())], Some(&cases)).unwrap();
//! assert_eq!(out.lines().count(), 3);
//! assert!(out.lines().nth(2).unwrap().contains("infeasible,global batch not divisible"));
//! ```

mod diff;
mod engine;
pub mod front;
mod planner;
pub mod schema;
mod spec;
mod table;
pub mod testing;

use std::fmt;
use std::str::FromStr;

pub use autoplan_plan::Plan;
pub use diff::{diff, Change, DiffReport};
pub use engine::{run, Planner, RunError};
pub use planner::SearchPlanner;
pub use schema::{header, render_case, COLUMNS};
pub use spec::{ClusterEntry, SpecField, SweepSpec};
pub use table::{merge, resume_point, Block, CsvError, Resume, SweepTable};

/// One point of the grid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    /// Position in the full grid (0-based): the canonical order of the output.
    pub index: usize,
    /// Model name or path, as written in the spec.
    pub model: String,
    /// Cluster name or path, as written in the spec.
    pub cluster: String,
    /// GPU count: the scaled size, or the cluster's own when `scaled` is false.
    pub gpus: u32,
    /// The cluster is a template scaled to `gpus` GPUs (`Cluster::with_gpus`).
    pub scaled: bool,
    pub seq_len: u32,
    /// Global batch in sequences.
    pub global_batch: u32,
    /// Search space name or path, as written in the spec.
    pub space: String,
    /// Plans kept for this case.
    pub top_k: u32,
    /// The framework its plans must run in, as `--framework` spells it (`Framework::spec`).
    pub framework: String,
}

impl Case {
    /// What identifies the case across specs (for `diff`): everything but its index and top-K.
    pub fn keys(&self) -> CaseKeys {
        CaseKeys {
            model: self.model.clone(),
            cluster: self.cluster.clone(),
            gpus: self.gpus,
            seq_len: self.seq_len,
            global_batch: self.global_batch,
            space: self.space.clone(),
        }
    }
}

/// What identifies a case across two sweeps.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CaseKeys {
    pub model: String,
    pub cluster: String,
    pub gpus: u32,
    pub seq_len: u32,
    pub global_batch: u32,
    pub space: String,
}

impl fmt::Display for CaseKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} on {}×{} GPUs, seq {}, batch {}, space {}",
            self.model, self.cluster, self.gpus, self.seq_len, self.global_batch, self.space
        )
    }
}

/// Predicted metrics of a plan, as written in the CSV. SI units.
#[derive(Debug, Clone, PartialEq)]
pub struct Metrics {
    pub step_time_s: f64,
    pub tokens_per_s: f64,
    pub tokens_per_s_per_gpu: f64,
    /// Model FLOPs utilisation in [0, 1].
    pub mfu: f64,
    /// Peak memory of the most loaded GPU, bytes.
    pub memory_peak_bytes: f64,
    /// Communication time on the critical path per step (all kinds), seconds.
    pub exposed_comm_s: f64,
    /// Pipeline bubble per step, seconds.
    pub bubble_s: f64,
    /// The parallelism whose communication has the most exposed time: `tp`, `cp`, `ep`, `pp`,
    /// `dp`, or `none`.
    pub dominant_comm: String,
    /// Its exposed time per step, seconds.
    pub dominant_comm_exposed_s: f64,
    /// Its collective with the most exposed time, e.g.
    /// `reduce-scatter ring inter-node (dp gradient reduce-scatter)`; empty when none.
    pub dominant_collective: String,
}

/// A plan and its predicted metrics, at the rank given by its position in the planner's list.
#[derive(Debug, Clone, PartialEq)]
pub struct RankedPlan {
    pub plan: Plan,
    pub metrics: Metrics,
}

/// Why a case has no plan (nothing fits in memory, an invalid combination...). A value, not an
/// error: it becomes an `infeasible` row and the sweep goes on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Infeasible {
    pub reason: String,
}

/// The K-th of N deterministic slices of a grid: case `i` belongs to shard `i mod N + 1`.
/// Round-robin rather than contiguous ranges, so each shard gets its share of the big
/// (slow) GPU counts, which sit next to each other in the grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// 1-based.
    k: u32,
    n: u32,
}

impl Shard {
    /// The whole grid.
    pub const ALL: Shard = Shard { k: 1, n: 1 };

    /// Shard `k` (1-based) of `n`.
    pub fn new(k: u32, n: u32) -> Result<Shard, ShardError> {
        if n == 0 || k == 0 || k > n {
            return Err(ShardError(format!("{k}/{n}")));
        }
        Ok(Shard { k, n })
    }

    pub fn k(&self) -> u32 {
        self.k
    }

    pub fn n(&self) -> u32 {
        self.n
    }

    /// Whether case `index` belongs to this shard.
    pub fn contains(&self, index: usize) -> bool {
        index % self.n as usize == (self.k - 1) as usize
    }

    /// This shard's cases, in order.
    pub fn select(&self, cases: &[Case]) -> Vec<Case> {
        cases
            .iter()
            .filter(|c| self.contains(c.index))
            .cloned()
            .collect()
    }
}

/// A `--shard` value that is not `K/N` with 1 ≤ K ≤ N.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("shard `{0}`: expected K/N with 1 ≤ K ≤ N, e.g. 3/8")]
pub struct ShardError(String);

impl FromStr for Shard {
    type Err = ShardError;
    fn from_str(s: &str) -> Result<Shard, ShardError> {
        let bad = || ShardError(s.to_string());
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let k = k.trim().parse().map_err(|_| bad())?;
        let n = n.trim().parse().map_err(|_| bad())?;
        Shard::new(k, n).map_err(|_| bad())
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.k, self.n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_partition_the_grid() {
        for n in 1..6u32 {
            let mut owners = [0; 23];
            for k in 1..=n {
                let s: Shard = format!("{k}/{n}").parse().unwrap();
                for (i, o) in owners.iter_mut().enumerate() {
                    if s.contains(i) {
                        *o += 1;
                    }
                }
            }
            assert!(owners.iter().all(|&o| o == 1), "n = {n}");
        }
    }

    #[test]
    fn bad_shards_are_rejected() {
        for s in ["0/4", "5/4", "1/0", "3", "a/b", "1/2/3"] {
            assert!(s.parse::<Shard>().is_err(), "{s}");
        }
        assert_eq!(" 2 / 4".parse::<Shard>().unwrap().to_string(), "2/4");
    }
}
