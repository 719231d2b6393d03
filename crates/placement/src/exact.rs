//! The exact solver: the MILP of seed 004 §4.2.1 (formulated in [`crate::formulation`]) solved
//! by microlp (pure Rust, through good_lp) to proven optimality, warm-started from the
//! heuristic; and its LP relaxation as a lower bound.

use good_lp::{microlp, Solution, SolutionStatus, SolverModel, WithTimeLimit};

use crate::eval::Placement;
use crate::eval::Routing;
pub use crate::formulation::ExactError;
use crate::formulation::{build, routing_of, Mode};
use crate::instance::Instance;

/// How the exact solve ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExactStatus {
    /// Branch and bound finished: the placement is optimal.
    Optimal,
    /// The time limit stopped branch and bound; the placement is the best found.
    TimeLimit,
}

/// Knobs of [`solve_exact`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExactOptions {
    /// Refuse instances with more binaries than this (microlp's branch and bound is
    /// exponential in the worst case).
    pub max_binaries: usize,
    /// Wall-clock limit in seconds; `None` = run to proven optimality (deterministic).
    pub time_limit_s: Option<f64>,
}

impl Default for ExactOptions {
    fn default() -> Self {
        ExactOptions {
            max_binaries: 160,
            time_limit_s: None,
        }
    }
}

/// The exact solver's answer.
#[derive(Debug, Clone)]
pub struct ExactResult {
    pub placement: Placement,
    pub routing: Routing,
    pub status: ExactStatus,
    /// The MILP's objective value, seconds (equals the evaluated objective of the answer).
    pub objective_s: f64,
    pub binaries: usize,
    pub continuous: usize,
}

/// Binaries the MILP of `inst` would have (R plus the α indicators).
pub fn binaries(inst: &Instance) -> usize {
    let p = inst.gpus();
    let t = inst.topology();
    let y = (0..p)
        .flat_map(|i| (0..p).map(move |j| (i, j)))
        .filter(|&(i, j)| i != j && t.alpha(i, j) + t.alpha(j, i) > 0.0)
        .count();
    p * inst.experts() + y
}

/// The longest time limit of the exact solver: one day, in seconds. Beyond it (or NaN,
/// infinity, a negative number) the limit is no longer a duration the solver can take.
pub const MAX_TIME_LIMIT_S: f64 = 86_400.0;

/// Solve the placement MILP of `inst` exactly (microlp branch and bound).
pub fn solve_exact(inst: &Instance, opts: &ExactOptions) -> Result<ExactResult, ExactError> {
    if let Some(tl) = opts.time_limit_s {
        if !(tl.is_finite() && tl > 0.0 && tl <= MAX_TIME_LIMIT_S) {
            return Err(ExactError::TimeLimit(tl));
        }
    }
    let nb = binaries(inst);
    if nb > opts.max_binaries {
        return Err(ExactError::TooLarge {
            binaries: nb,
            limit: opts.max_binaries,
        });
    }
    // Warm start from the heuristic: branch and bound begins with its incumbent and prunes
    // everything that cannot beat it.
    let h = crate::heuristic::heuristic(inst, &crate::heuristic::HeuristicOptions::default());
    let m = build(inst, Mode::Binary(Some((&h.placement, &h.routing))));
    let mut problem = m.vars.minimise(m.objective.clone()).using(microlp);
    if let Some(tl) = opts.time_limit_s {
        problem = problem.with_time_limit(tl);
    }
    for c in m.constraints {
        problem.add_constraint(c);
    }
    let sol = problem.solve()?;
    let status = match sol.status() {
        SolutionStatus::Optimal => ExactStatus::Optimal,
        _ => ExactStatus::TimeLimit,
    };
    let (p, e_n) = (inst.gpus(), inst.experts());
    let mut gpus = vec![Vec::new(); p];
    for (j, hosted) in gpus.iter_mut().enumerate() {
        for e in 0..e_n {
            if let Some(v) = m.flows.r[j * e_n + e] {
                if sol.value(v) > 0.5 {
                    hosted.push(e);
                }
            }
        }
    }
    let objective_s = m.objective.eval_with(&sol) / m.scale;
    Ok(ExactResult {
        placement: Placement { gpus },
        routing: routing_of(inst, &m.flows, &sol),
        status,
        objective_s,
        binaries: m.binaries,
        continuous: m.continuous,
    })
}

/// Lower bound on the optimal objective: the MILP's LP relaxation (R and the α indicators in
/// [0, 1]). Seconds. It has P·P·E routing variables, so use it only on small instances; see
/// [`crate::bound::combinatorial_bound`] for large ones.
pub fn lp_lower_bound(inst: &Instance) -> Result<f64, ExactError> {
    lp_bound(inst, None)
}

/// The longest the optional LP stages ([`lp_lower_bound_bounded`] and the heuristic's routing
/// LP, [`crate::formulation::optimal_routing_bounded`]) may run, seconds. microlp's simplex
/// can stall on highly degenerate LPs (uniform loads on a symmetric topology: every vertex
/// ties) and never return; the LPs these stages accept (at most 4096 routing variables) solve
/// in about a second in a release build when they solve at all, so 5 s leaves room for a
/// slower machine while keeping `place-experts` prompt.
pub const LP_STAGE_TIME_LIMIT_S: f64 = 5.0;

/// [`lp_lower_bound`] stopped after [`LP_STAGE_TIME_LIMIT_S`]: an error (the solver's, or
/// the time limit) means the bound is unavailable, and callers fall back to
/// [`crate::bound::combinatorial_bound`].
pub fn lp_lower_bound_bounded(inst: &Instance) -> Result<f64, ExactError> {
    lp_bound(inst, Some(LP_STAGE_TIME_LIMIT_S))
}

fn lp_bound(inst: &Instance, time_limit_s: Option<f64>) -> Result<f64, ExactError> {
    let m = build(inst, Mode::Relaxed);
    let mut problem = m.vars.minimise(m.objective.clone()).using(microlp);
    if let Some(tl) = time_limit_s {
        problem = problem.with_time_limit(tl);
    }
    for c in m.constraints {
        problem.add_constraint(c);
    }
    let sol = problem.solve()?;
    // An LP stopped by the time limit has no proven optimum, so its value bounds nothing.
    if !matches!(sol.status(), SolutionStatus::Optimal) {
        return Err(ExactError::Solver(
            "LP relaxation stopped by its time limit".into(),
        ));
    }
    Ok(m.objective.eval_with(&sol) / m.scale)
}
