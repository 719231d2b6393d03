//! MoE expert placement and replication for one MoE layer: choose which experts (and
//! redundant copies, the thesis's "virtual experts") live on which GPU of an EP group, and how
//! each GPU's tokens are routed among the copies, to minimise the dispatch + combine
//! all-to-all time (seed 004 chapter 4).
//!
//! Boundary: this crate is pure computation on an [`Instance`] (α-β matrix, token demand,
//! slots); it reads no files and prints nothing — trace and α-β *text* is parsed here, files
//! are read by the CLI (`autoplan place-experts`). It does not model the rest of the training
//! step; the plan evaluator's cheap per-GPU load estimates (`balanced_imbalance`,
//! `contiguous_imbalance`) live in autoplan-evaluate.
//!
//! The principal types are [`Instance`] (validated problem) and [`Report`] (every solver's
//! placement, routing and [`Metrics`] side by side, with a lower bound and the gap).
//!
//! Solvers: [`baseline::contiguous`] (the default EP layout), [`baseline::eplb`] (DeepSeek's
//! EPLB, the peer to beat), [`heuristic::heuristic`] (greedy + local search, E=256, P=64 in
//! well under a second), [`exact::solve_exact`] (the MILP, proven optimal, small instances).
//!
//! # The α-β link model and how to measure it (seed 004 §4.1.2)
//! Sending m bytes from GPU i to GPU j takes `α_ij + m/β_ij`. The thesis measures each pair
//! by timing k back-to-back messages of M bytes, `T1 = k(α + M/β)`, and one message of k·M
//! bytes, `T2 = α + kM/β`. Subtracting, `T1 − T2 = (k − 1)α`, so `α = (T1 − T2)/(k − 1)`
//! and `1/β = (T2 − α)/(kM)`. Measure every ordered pair (intra-node pairs have
//! small α and large β, cross-node pairs the reverse) and write them as a CSV
//! `src,dst,alpha_us,bw_gbps` for [`parse_alpha_beta_csv`]; [`alpha_beta_from_timings`] does
//! the arithmetic. Without measurements the matrix comes from the cluster description
//! ([`Topology::from_cluster`]).
//!
//! # Example: the thesis's worked example (4 nodes × 2 GPUs, one expert per GPU)
//! ```
//! use autoplan_placement::*;
//! // Only cross-server tokens cost (1 per token), as the thesis counts them.
//! let topo = Topology::two_level(4, 2, (0.0, 0.0), (0.0, 1.0)).unwrap();
//! let demand = loads::thesis_example().demand(8, 8, "thesis").unwrap();
//! let opts = InstanceOptions { objective: Objective::Thesis, ..Default::default() };
//! let inst = Instance::new(topo, 8, 1, demand, opts).unwrap();
//! let m = evaluate_nearest(&inst, &baseline::contiguous(&inst));
//! assert_eq!(m.cross_node_bytes, 11544.0); // (210 + 312 + ... + 250) × 6
//! ```

pub mod baseline;
pub mod bound;
mod csvrows;
pub mod eval;
pub mod exact;
pub mod formulation;
pub mod heuristic;
pub mod instance;
pub mod loads;
mod matrix;

pub use eval::{
    evaluate, evaluate_nearest, replica_sync_s, Metrics, Placement, PlacementError, Routing,
};
pub use exact::{ExactError, ExactOptions, ExactResult, ExactStatus};
pub use heuristic::{HeuristicOptions, SearchStats};
pub use instance::{
    Instance, InstanceError, InstanceOptions, Objective, Topology, MAX_EP, MAX_EXPERTS, MAX_SLOTS,
    MAX_TOTAL_SLOTS,
};
pub use matrix::{alpha_beta_from_timings, parse_alpha_beta_csv, MatrixError};

/// One solver's answer and its cost.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Candidate {
    /// `contiguous`, `eplb`, `heuristic` or `exact`.
    pub name: &'static str,
    pub placement: Placement,
    #[serde(skip)]
    pub routing: Routing,
    pub metrics: Metrics,
}

/// Where the reported lower bound comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BoundKind {
    /// The exact solver proved optimality: the bound is the optimum.
    ProvenOptimum,
    /// The MILP's LP relaxation ([`exact::lp_lower_bound`]).
    LpRelaxation,
    /// [`bound::combinatorial_bound`] (instances too large for the LP).
    Combinatorial,
    /// [`bound::combinatorial_bound`] on an instance small enough for the LP, because the LP
    /// relaxation was unavailable: microlp failed on it (e.g. a singular basis) or did not
    /// finish within [`exact::LP_STAGE_TIME_LIMIT_S`] (degenerate LPs, e.g. uniform loads).
    CombinatorialLpUnavailable,
}

/// Knobs of [`solve`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SolveOptions {
    pub heuristic: HeuristicOptions,
    /// Run the exact MILP too (`None`: heuristic only).
    pub exact: Option<ExactOptions>,
    /// Compute the LP-relaxation bound when the LP has at most this many routing variables
    /// (P·P·E); above, the combinatorial bound is used.
    pub lp_bound_max_vars: usize,
}

impl Default for SolveOptions {
    fn default() -> Self {
        SolveOptions {
            heuristic: HeuristicOptions::default(),
            exact: None,
            lp_bound_max_vars: 4096,
        }
    }
}

/// Everything `autoplan place-experts` reports.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    pub objective: Objective,
    pub contiguous: Candidate,
    pub eplb: Candidate,
    pub heuristic: Candidate,
    pub heuristic_stats: SearchStats,
    pub exact: Option<Candidate>,
    pub exact_status: Option<ExactStatus>,
    /// Lower bound on the optimal objective, seconds, and where it comes from.
    pub lower_bound_s: f64,
    pub bound_kind: BoundKind,
    /// (heuristic − bound) / bound: how far the heuristic can at most be from optimal.
    pub heuristic_gap: f64,
}

impl Report {
    /// The best answer: the exact one when it was computed, else the heuristic's.
    pub fn best(&self) -> &Candidate {
        match &self.exact {
            Some(x)
                if x.metrics.objective_s <= self.heuristic.metrics.objective_s * (1.0 + 1e-9) =>
            {
                x
            }
            _ => &self.heuristic,
        }
    }
}

fn candidate(
    inst: &Instance,
    name: &'static str,
    placement: Placement,
    routing: Routing,
) -> Candidate {
    let metrics = evaluate(inst, &placement, &routing);
    Candidate {
        name,
        placement,
        routing,
        metrics,
    }
}

/// Run the baselines, the heuristic, optionally the exact solver, and a lower bound.
pub fn solve(inst: &Instance, opts: &SolveOptions) -> Result<Report, ExactError> {
    let nearest = |name, pl: Placement| {
        let r = Routing::nearest(inst, &pl);
        candidate(inst, name, pl, r)
    };
    let contiguous = nearest("contiguous", baseline::contiguous(inst));
    let eplb = nearest("eplb", baseline::eplb(inst));
    let h = heuristic::heuristic(inst, &opts.heuristic);
    let heuristic = candidate(inst, "heuristic", h.placement, h.routing);
    let (exact, exact_status) = match &opts.exact {
        Some(o) => {
            let x = exact::solve_exact(inst, o)?;
            (
                Some(candidate(inst, "exact", x.placement, x.routing)),
                Some(x.status),
            )
        }
        None => (None, None),
    };
    let (lower_bound_s, bound_kind) = match (&exact, exact_status) {
        // The MILP does not price the replicas' gradient sync: its optimum bounds the
        // objective only when there is none to price (the LP and combinatorial bounds ignore
        // a nonnegative term, so they stay bounds).
        (Some(x), Some(ExactStatus::Optimal)) if inst.replica_sync_bytes() <= 0.0 => {
            (x.metrics.objective_s, BoundKind::ProvenOptimum)
        }
        _ if inst.gpus() * inst.gpus() * inst.experts() <= opts.lp_bound_max_vars => {
            // The LP bound is optional: a solver failure or a stall makes it unavailable, not
            // the command fail.
            let comb = bound::combinatorial_bound(inst);
            match exact::lp_lower_bound_bounded(inst) {
                Ok(lp) => (lp.max(comb), BoundKind::LpRelaxation),
                Err(_) => (comb, BoundKind::CombinatorialLpUnavailable),
            }
        }
        _ => (bound::combinatorial_bound(inst), BoundKind::Combinatorial),
    };
    let heuristic_gap = gap(heuristic.metrics.objective_s, lower_bound_s);
    Ok(Report {
        objective: inst.objective(),
        contiguous,
        eplb,
        heuristic,
        heuristic_stats: h.stats,
        exact,
        exact_status,
        lower_bound_s,
        bound_kind,
        heuristic_gap,
    })
}

/// Relative gap `(value − bound) / bound`, 0 when both are 0.
pub fn gap(value: f64, bound: f64) -> f64 {
    if bound > 0.0 {
        ((value - bound) / bound).max(0.0)
    } else if value > 0.0 {
        f64::INFINITY
    } else {
        0.0
    }
}
