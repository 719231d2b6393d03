//! Seed 004 §4.2.1 as a linear model, built in one place for its three uses: the mixed-integer
//! program that [`crate::exact`] solves to proven optimality, its LP relaxation (a lower bound),
//! and the optimal routing of a fixed placement ([`optimal_routing`], an LP the heuristic also
//! calls). Solved by microlp (pure Rust, through good_lp).
//!
//! The thesis's formulation multiplies the placement R by the routing W inside V_ij, which is
//! not linear. It is linearised here without loss by routing fractions w_ije of GPU i's
//! tokens for expert e to GPU j, bounded by the placement: `w_ije ≤ R_je`. So
//!
//! * `Σ_e R_je ≤ L` (slots), `Σ_j R_je ≥ 1` (every expert exists), `R_je ∈ {0,1}`;
//! * `Σ_j w_ije = 1` for every (i, e) with `C_ie > 0`, `0 ≤ w_ije ≤ R_je`. The thesis writes
//!   this constraint as `Σ_k W_ijk = 1` (summing over experts), which would force every pair
//!   to carry traffic; its prose ("the fraction of GPU i's data for expert k sent to GPU j")
//!   means the sum over destinations j, used here;
//! * `V_ij = bytes_per_token · Σ_e C_ie · w_ije` for i ≠ j (tokens kept on their GPU are free,
//!   the thesis's `(1 − R_ik)` factor);
//! * α is paid on a pair only when it carries traffic: a binary `y_ij ≥ w_ije` (only where
//!   α > 0). The thesis sums α over all pairs, a constant that would not change the optimum.
//!
//! Objective [`Objective::Thesis`]: `Σ_{i≠j} (α_ij + α_ji) y_ij + V_ij (1/β_ij + 1/β_ji)`
//! (dispatch plus the combine that sends V_ij back). Objective [`Objective::Synchronous`]:
//! `T_d + T_c` with `T_d ≥` every rank's dispatch send and receive time and `T_c` the same for
//! combine. Both add `M ≥ compute_s_per_token · load_j` for every GPU j.

use good_lp::{
    microlp, variable, Expression, ProblemVariables, ResolutionError, Solution, SolutionStatus,
    SolverModel, Variable, WithTimeLimit,
};

use crate::baseline;
use crate::eval::{evaluate_nearest, Placement, Routing};
use crate::instance::{Instance, Objective};

/// Why the exact solver (or an LP of this formulation) gave no answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExactError {
    #[error("instance too large for the exact solver: {binaries} binary variables (limit {limit}); use the heuristic")]
    TooLarge { binaries: usize, limit: usize },
    #[error("MILP solver (microlp) failed: {0}")]
    Solver(String),
    #[error("time limit {0} s: expected a finite number of seconds in (0, {max}]", max = crate::exact::MAX_TIME_LIMIT_S)]
    TimeLimit(f64),
}

impl From<ResolutionError> for ExactError {
    fn from(e: ResolutionError) -> Self {
        ExactError::Solver(e.to_string())
    }
}

/// Which of the three programs [`build`] makes.
pub(crate) enum Mode<'a> {
    /// The MILP, optionally warm-started from a known placement and routing (microlp
    /// completes the continuous variables by LP and starts with that incumbent).
    Binary(Option<(&'a Placement, &'a Routing)>),
    Relaxed,
    Fixed(&'a Placement),
}

/// A built program: variables, objective (scaled by `scale`) and constraints.
pub(crate) struct Model {
    pub(crate) vars: ProblemVariables,
    pub(crate) objective: Expression,
    pub(crate) constraints: Vec<good_lp::Constraint>,
    pub(crate) flows: FlowVars,
    pub(crate) binaries: usize,
    pub(crate) continuous: usize,
    pub(crate) scale: f64,
}

/// The placement and routing variables a solution is read from.
pub(crate) struct FlowVars {
    /// R_je, indexed `j·E + e` (none for a fixed placement).
    pub(crate) r: Vec<Option<Variable>>,
    /// y_ij, indexed `i·P + j` (none for a pair without α).
    y: Vec<Option<Variable>>,
    /// (i, e, j, var)
    w: Vec<(usize, usize, usize, Variable)>,
    /// R and y are binary (the MILP), not relaxed.
    integral: bool,
}

/// The program under construction: its variables, constraints and their counts.
struct Builder {
    vars: ProblemVariables,
    constraints: Vec<good_lp::Constraint>,
    binaries: usize,
    continuous: usize,
}

impl Builder {
    /// A 0/1 variable: binary in the MILP (warm-started at `initial` when given), else relaxed
    /// to [0, 1].
    fn indicator(&mut self, integral: bool, initial: Option<f64>) -> Variable {
        if integral {
            self.binaries += 1;
            let def = variable().binary();
            self.vars.add(match initial {
                Some(x) => def.initial(x),
                None => def,
            })
        } else {
            self.continuous += 1;
            self.vars.add(variable().clamp(0.0, 1.0))
        }
    }
}

/// Per-rank dispatch/combine send/receive time expressions, the per-GPU compute loads and the
/// thesis sum (all scaled).
struct RankTimes {
    dsend: Vec<Expression>,
    drecv: Vec<Expression>,
    csend: Vec<Expression>,
    crecv: Vec<Expression>,
    load: Vec<Expression>,
    thesis: Expression,
}

/// Builds the program of `mode`: the variables R (placement), y (pairs that pay α) and w
/// (routing fractions) with their constraints, then the objective.
pub(crate) fn build(inst: &Instance, mode: Mode) -> Model {
    let scale = scale_of(inst);
    let mut b = Builder {
        vars: ProblemVariables::new(),
        constraints: Vec::new(),
        binaries: 0,
        continuous: 0,
    };
    let integral = matches!(mode, Mode::Binary(_));
    let hint = match mode {
        Mode::Binary(h) => h,
        _ => None,
    };
    let r = placement_vars(&mut b, inst, &mode, integral, hint);
    let y = pair_vars(&mut b, inst, integral, hint);
    let w = routing_vars(&mut b, inst, &mode, &r, &y);
    placement_constraints(&mut b, inst, &r);
    let times = rank_times(inst, scale, &y, &w);
    let objective = objective(&mut b, inst, times);
    Model {
        vars: b.vars,
        objective,
        constraints: b.constraints,
        flows: FlowVars { r, y, w, integral },
        binaries: b.binaries,
        continuous: b.continuous,
        scale,
    }
}

/// Coefficients are in units of the contiguous placement's objective, so the LP sees numbers
/// near 1 rather than microseconds.
fn scale_of(inst: &Instance) -> f64 {
    let reference = evaluate_nearest(inst, &baseline::contiguous(inst)).objective_s;
    if reference > 0.0 {
        1.0 / reference
    } else {
        1.0
    }
}

/// R_je for every (GPU j, expert e), indexed `j·E + e` (none for a fixed placement).
fn placement_vars(
    b: &mut Builder,
    inst: &Instance,
    mode: &Mode,
    integral: bool,
    hint: Option<(&Placement, &Routing)>,
) -> Vec<Option<Variable>> {
    let (p, e_n) = (inst.gpus(), inst.experts());
    let mut r = vec![None; p * e_n];
    if !matches!(mode, Mode::Fixed(_)) {
        for (k, slot) in r.iter_mut().enumerate() {
            let initial =
                hint.map(|(pl, _)| f64::from(u8::from(pl.gpus[k / e_n].contains(&(k % e_n)))));
            *slot = Some(b.indicator(integral, initial));
        }
    }
    r
}

/// y_ij for every pair i ≠ j whose α is positive, indexed `i·P + j` (warm-started with the
/// pairs the hint's routing uses).
fn pair_vars(
    b: &mut Builder,
    inst: &Instance,
    integral: bool,
    hint: Option<(&Placement, &Routing)>,
) -> Vec<Option<Variable>> {
    let (p, e_n) = (inst.gpus(), inst.experts());
    let t = inst.topology();
    let mut used_pairs = vec![false; p * p];
    if let Some((_, routing)) = hint {
        for (k, flows) in routing.flows.iter().enumerate() {
            let i = k / e_n;
            for &(j, f) in flows {
                if f > 0.0 && i != j {
                    used_pairs[i * p + j] = true;
                }
            }
        }
    }
    let mut y = vec![None; p * p];
    for i in 0..p {
        for j in 0..p {
            if i != j && t.alpha(i, j) + t.alpha(j, i) > 0.0 {
                let initial = hint.map(|_| f64::from(u8::from(used_pairs[i * p + j])));
                y[i * p + j] = Some(b.indicator(integral, initial));
            }
        }
    }
    y
}

/// w_ije for every demand (i, e) and every GPU j that may host e, with `Σ_j w_ije = 1`,
/// `w_ije ≤ R_je` and `w_ije ≤ y_ij`; returned as (i, e, j, var).
fn routing_vars(
    b: &mut Builder,
    inst: &Instance,
    mode: &Mode,
    r: &[Option<Variable>],
    y: &[Option<Variable>],
) -> Vec<(usize, usize, usize, Variable)> {
    let (p, e_n) = (inst.gpus(), inst.experts());
    let hosts = |j: usize, e: usize| match mode {
        Mode::Fixed(pl) => pl.gpus[j].contains(&e),
        _ => true,
    };
    let mut w = Vec::new();
    for i in 0..p {
        for e in 0..e_n {
            if inst.demand(i, e) == 0.0 {
                continue;
            }
            let mut sum = Expression::with_capacity(p);
            for j in 0..p {
                if !hosts(j, e) {
                    continue;
                }
                let v = b.vars.add(variable().clamp(0.0, 1.0));
                b.continuous += 1;
                sum.add_mul(1.0, v);
                if let Some(rv) = r[j * e_n + e] {
                    b.constraints.push(Expression::from(v).leq(rv));
                }
                if let Some(yv) = y[i * p + j] {
                    b.constraints.push(Expression::from(v).leq(yv));
                }
                w.push((i, e, j, v));
            }
            b.constraints.push(sum.eq(1.0));
        }
    }
    w
}

/// `Σ_e R_je ≤ L` (slots) and `Σ_j R_je ≥ 1` (every expert exists), where R is a variable.
fn placement_constraints(b: &mut Builder, inst: &Instance, r: &[Option<Variable>]) {
    let (p, e_n) = (inst.gpus(), inst.experts());
    for j in 0..p {
        if r[j * e_n].is_some() {
            let mut s = Expression::with_capacity(e_n);
            for e in 0..e_n {
                s.add_mul(1.0, r[j * e_n + e].expect("R exists"));
            }
            b.constraints.push(s.leq(inst.slots() as f64));
        }
    }
    if r[0].is_some() {
        for e in 0..e_n {
            let mut s = Expression::with_capacity(p);
            for j in 0..p {
                s.add_mul(1.0, r[j * e_n + e].expect("R exists"));
            }
            b.constraints.push(s.geq(1.0));
        }
    }
}

/// The α terms of the pairs (y) and the β and compute terms of the routing (w), per rank.
fn rank_times(
    inst: &Instance,
    scale: f64,
    y: &[Option<Variable>],
    w: &[(usize, usize, usize, Variable)],
) -> RankTimes {
    let p = inst.gpus();
    let t = inst.topology();
    let bpt = inst.bytes_per_token();
    let mut dsend: Vec<Expression> = (0..p).map(|_| Expression::default()).collect();
    let mut drecv = dsend.clone();
    let mut csend = dsend.clone();
    let mut crecv = dsend.clone();
    let mut load = dsend.clone();
    let mut thesis = Expression::default();
    for i in 0..p {
        for j in 0..p {
            if let Some(yv) = y[i * p + j] {
                let (ad, ac) = (t.alpha(i, j) * scale, t.alpha(j, i) * scale);
                dsend[i].add_mul(ad, yv);
                drecv[j].add_mul(ad, yv);
                csend[j].add_mul(ac, yv);
                crecv[i].add_mul(ac, yv);
                thesis.add_mul(ad + ac, yv);
            }
        }
    }
    for &(i, e, j, v) in w {
        let c = inst.demand(i, e);
        load[j].add_mul(c * inst.compute_s_per_token() * scale, v);
        if i == j {
            continue;
        }
        let d = c * bpt * t.inv_beta(i, j) * scale;
        let cb = c * bpt * t.inv_beta(j, i) * scale;
        dsend[i].add_mul(d, v);
        drecv[j].add_mul(d, v);
        csend[j].add_mul(cb, v);
        crecv[i].add_mul(cb, v);
        thesis.add_mul(d + cb, v);
    }
    RankTimes {
        dsend,
        drecv,
        csend,
        crecv,
        load,
        thesis,
    }
}

/// The objective (module docs): `M ≥` every GPU's compute load when compute is priced, plus
/// the thesis sum or `T_d + T_c` over the per-rank times.
fn objective(b: &mut Builder, inst: &Instance, times: RankTimes) -> Expression {
    let p = inst.gpus();
    let mut objective = Expression::default();
    if inst.compute_s_per_token() > 0.0 {
        let m = b.vars.add(variable().min(0.0));
        b.continuous += 1;
        for l in times.load {
            b.constraints.push(l.leq(m));
        }
        objective.add_mul(1.0, m);
    }
    match inst.objective() {
        Objective::Thesis => objective += times.thesis,
        Objective::Synchronous => {
            let td = b.vars.add(variable().min(0.0));
            let tc = b.vars.add(variable().min(0.0));
            b.continuous += 2;
            for g in 0..p {
                b.constraints.push(times.dsend[g].clone().leq(td));
                b.constraints.push(times.drecv[g].clone().leq(td));
                b.constraints.push(times.csend[g].clone().leq(tc));
                b.constraints.push(times.crecv[g].clone().leq(tc));
            }
            objective.add_mul(1.0, td);
            objective.add_mul(1.0, tc);
        }
    }
    objective
}

/// Read the routing fractions of a solved model (dropping noise below 1e-9 and, in the MILP,
/// flows its binaries forbid; renormalised).
pub(crate) fn routing_of(inst: &Instance, m: &FlowVars, sol: &impl Solution) -> Routing {
    let (p, e_n) = (inst.gpus(), inst.experts());
    // In the MILP a flow may use a host or a pair only where its binary is 1 (`w ≤ R`,
    // `w ≤ y`); the solver's integrality tolerance leaves flows of that order where the
    // binary is 0, which would pay an α the MILP did not count: they are dropped.
    let on = |v: Option<Variable>| !m.integral || v.is_none_or(|v| sol.value(v) > 0.5);
    let mut flows = vec![Vec::new(); p * e_n];
    for &(i, e, j, v) in &m.w {
        let f = sol.value(v);
        if f > 1e-9 && on(m.r[j * e_n + e]) && on(m.y[i * p + j]) {
            flows[i * e_n + e].push((j, f));
        }
    }
    for f in &mut flows {
        let s: f64 = f.iter().map(|x| x.1).sum();
        if s > 0.0 {
            f.iter_mut().for_each(|x| x.1 /= s);
        }
    }
    Routing {
        experts: e_n,
        flows,
    }
}

/// The routing W minimising the objective for a fixed placement (an LP; the α indicators
/// are relaxed, so the result is re-evaluated by the caller).
pub fn optimal_routing(inst: &Instance, placement: &Placement) -> Result<Routing, ExactError> {
    routing_lp(inst, placement, None)
}

/// [`optimal_routing`] stopped after [`crate::exact::LP_STAGE_TIME_LIMIT_S`] (see there why):
/// an error (the solver's, or the time limit) means the stage is unavailable, and the caller
/// keeps the nearest-copy routing.
pub fn optimal_routing_bounded(
    inst: &Instance,
    placement: &Placement,
) -> Result<Routing, ExactError> {
    routing_lp(inst, placement, Some(crate::exact::LP_STAGE_TIME_LIMIT_S))
}

fn routing_lp(
    inst: &Instance,
    placement: &Placement,
    time_limit_s: Option<f64>,
) -> Result<Routing, ExactError> {
    let m = build(inst, Mode::Fixed(placement));
    let mut problem = m.vars.minimise(m.objective.clone()).using(microlp);
    if let Some(tl) = time_limit_s {
        problem = problem.with_time_limit(tl);
    }
    for c in m.constraints {
        problem.add_constraint(c);
    }
    let sol = problem.solve()?;
    if !matches!(sol.status(), SolutionStatus::Optimal) {
        return Err(ExactError::Solver(
            "routing LP stopped by its time limit".into(),
        ));
    }
    Ok(routing_of(inst, &m.flows, &sol))
}
