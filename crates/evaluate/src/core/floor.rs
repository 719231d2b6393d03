//! An admissible floor of the step time over the communication knobs a search has not decided
//! yet ([`Evaluator::step_floor`]): the branch-and-bound of `autoplan-search` cuts with it the
//! subtrees whose plans differ only in how they communicate.
//!
//! The floor is [`Evaluator::run`]'s step time with every class's exposed communication
//! replaced by its minimum over the open knobs, one kind at a time, and the whole minimised over
//! the open rank orders and ZeRO stages. It is admissible — no completion is faster — because:
//! - the compute of a class (`compute`, `gemm_fwd`) does not read the rank order, the TP→SP
//!   transition, the CP exchange, the dispatcher or the `moe_tp` scheme, so every completion
//!   has the same `fwd`, `bwd`, `rc_full`, `rc_sel` and GEMM windows as the floor;
//! - each of those four knobs moves the exposure of one kind only (`tp_comm` reads the
//!   transition and writes TP, `cp_comm` the exchange and CP, `ep_comm` the dispatcher and
//!   scheme and EP), so a completion's exposure of each kind is at least the minimum over the
//!   kind's knob, and the sum of minima is at most the minimum of sums;
//! - `stage` adds the exposures to the stage time, and `run`'s pipeline time
//!   `m·t_max + f·(Σt − t_max) = (m − f)·t_max + f·Σt` (`m ≥ 1 ≥ f ≥ 0`) grows with every stage
//!   time; the DP reduction (`dp_comm`), the ZeRO-3 gathers and the optimizer step depend on
//!   the order and the ZeRO stage (both minimised over) and on the stage holding the most
//!   parameters and its compute, neither of which the knobs change.
//!
//! The same operations run in the same order as in `run` on inputs no larger, and IEEE
//! rounding is monotone, so the floor holds in floating point too; a relative margin of 1e-12
//! covers `Σt − t_max` (not monotone by an ulp).

use autoplan_plan::{CpComm, Dispatcher, MoeTpScheme, Plan, RankOrder, TpSpTransition, Zero};

use super::{
    ClassCost, Emitter, Evaluator, Memo, StageTime, ADAM_BYTES_PER_PARAM, ATTN, HEAD, MLP, MOE,
    MTP, NCLASS, SGD_BYTES_PER_PARAM,
};
use crate::comm::CommKind;
use autoplan_cost::compute::memory_bound_time;
use autoplan_graph::Optimizer;
use autoplan_plan::{Recompute, Schedule};

/// Relative margin for the rounding of `Σt − t_max` (module docs).
const MARGIN: f64 = 1.0 - 1e-12;

impl Evaluator {
    /// A lower bound on the step time of every plan that equals `plan` except for its rank
    /// order (any of `orders`), ZeRO stage (any of `zeros`), TP→SP transition, CP exchange,
    /// dispatcher and `moe_tp` scheme (any of the lists); the other fields are taken from
    /// `plan` (a caller bounding both overlap settings passes the most hiding one, `true`:
    /// overlap only hides time). 0 if `plan` is invalid (no information). Allocation-free.
    #[allow(clippy::too_many_arguments)]
    pub fn step_floor(
        &self,
        plan: &Plan,
        orders: &[RankOrder],
        zeros: &[Zero],
        tp_sp: &[TpSpTransition],
        cp_comm: &[CpComm],
        dispatchers: &[Dispatcher],
        schemes: &[MoeTpScheme],
    ) -> f64 {
        let lists = [orders.len(), zeros.len(), tp_sp.len(), cp_comm.len()];
        if lists.contains(&0) || dispatchers.is_empty() || schemes.is_empty() {
            return 0.0;
        }
        if plan.check(&self.model, self.cluster.gpus()).is_err() {
            return 0.0;
        }
        let Ok(layout) = self.layout(plan) else {
            return 0.0;
        };
        let mut q = *plan;
        // Compute, once: `class_costs`' calls, in its order (the MTP module reuses the GEMM
        // times of the classes it repeats).
        let x0 = self.ctx(plan);
        let mut cc = [(0.0, 0.0, 0.0, 0.0, 0.0); NCLASS];
        cc[ATTN] = self.compute(&self.classes[ATTN], &x0, None);
        for (i, c) in self.classes.iter().enumerate() {
            if i == MOE && self.experts == 0.0 || i == MTP && self.mtp == 0 || i == ATTN {
                continue;
            }
            cc[i] = if i == MTP && self.mtp_reuse {
                let mlp = if c.expert_params > 0.0 { MOE } else { MLP };
                let own = self.gemm_fwd(c.kind, &c.gemms[..1], &x0);
                let g = own + cc[ATTN].4 + cc[mlp].4 + cc[HEAD].4;
                self.compute(c, &x0, Some(g))
            } else {
                self.compute(c, &x0, None)
            };
        }
        let mut best = f64::INFINITY;
        for &order in orders {
            q.order = order;
            let x = self.ctx(&q);
            let mut memo = Memo::default();
            let mut costs = [ClassCost::default(); NCLASS];
            for (i, c) in self.classes.iter().enumerate() {
                if i == MOE && self.experts == 0.0 || i == MTP && self.mtp == 0 {
                    continue;
                }
                let (fwd, bwd, rc_full, rc_sel, gemm) = cc[i];
                let full = q.recompute == Recompute::Full && matches!(i, ATTN | MLP | MOE | MTP);
                let mut e = Emitter {
                    ev: self,
                    x: &x,
                    sink: &mut (),
                    memo: &mut memo,
                    layer: c.kind,
                    mult: 0.0,
                    rc_mult: 0.0,
                    exposed: [0.0; 5],
                    rc: 0.0,
                    full,
                };
                // One exposure per kind, each the least over its own knob (module docs).
                let (mut tp, mut rc) = (f64::INFINITY, f64::INFINITY);
                for &t in tp_sp {
                    q.tp_sp_transition = t;
                    e.exposed = [0.0; 5];
                    e.rc = 0.0;
                    self.tp_comm(&q, c, i, &x, gemm, &mut e);
                    tp = tp.min(e.exposed[CommKind::Tp.index()]);
                    rc = rc.min(e.rc);
                }
                let mut cpx = 0.0;
                if i == ATTN || i == MTP {
                    cpx = f64::INFINITY;
                    for &k in cp_comm {
                        q.cp_comm = k;
                        e.exposed = [0.0; 5];
                        self.cp_comm(&q, c, &x, &mut e, cc[ATTN].0, cc[ATTN].1);
                        cpx = cpx.min(e.exposed[CommKind::Cp.index()]);
                    }
                }
                let mut epx = 0.0;
                if (i == MOE || i == MTP) && c.ep_elems > 0.0 {
                    epx = f64::INFINITY;
                    let budget = fwd + bwd + cc[ATTN].0 + cc[ATTN].1;
                    // Without EP (or moe_tp) the dispatcher (or scheme) moves nothing.
                    let ds = if x.ep > 1.0 {
                        dispatchers
                    } else {
                        &dispatchers[..1]
                    };
                    let ss = if x.mt > 1.0 { schemes } else { &schemes[..1] };
                    for &d in ds {
                        for &s in ss {
                            q.dispatcher = d;
                            q.moe_tp_scheme = s;
                            e.exposed = [0.0; 5];
                            self.ep_comm(&q, c, &x, &mut e, budget);
                            epx = epx.min(e.exposed[CommKind::Ep.index()]);
                        }
                    }
                }
                let mut exposed = [0.0; 5];
                exposed[CommKind::Tp.index()] = tp;
                exposed[CommKind::Cp.index()] = cpx;
                exposed[CommKind::Ep.index()] = epx;
                costs[i] = ClassCost {
                    fwd,
                    bwd,
                    rc_full,
                    rc_sel,
                    rc_comm: rc,
                    exposed,
                };
            }
            // `run`'s pipeline composition.
            let (_, pp_t) = self.pp_hop(&x);
            let (mut tmax, mut sum, mut start) = (0.0, 0.0, 0);
            let mut pmax = StageTime::default();
            for i in 0..x.pp {
                let s = self.stage(&q, &x, &costs, &layout, i, start, pp_t);
                start += s.blocks;
                sum += s.t;
                if s.t > tmax {
                    tmax = s.t;
                }
                if s.params_dense + s.params_expert > pmax.params_dense + pmax.params_expert {
                    pmax = s;
                }
            }
            let micro = x.micro;
            let base = sum - tmax;
            let bubble = match q.schedule {
                Schedule::OneF1B => base,
                Schedule::Interleaved => base / x.vpp,
                Schedule::ZeroBubble => base / 3.0,
                Schedule::DualPipe => {
                    let p = x.pp as f64;
                    if p > 2.0 {
                        base * (p - 2.0) / (3.0 * (p - 1.0))
                    } else {
                        0.0
                    }
                }
            };
            for &z in zeros {
                q.zero = z;
                // `run`'s DP reduction and optimizer step.
                let (dp_exposed, zero3_per_mb) = self.dp_comm(&q, &x, &pmax, &mut (), micro);
                let pipeline = micro * (tmax + zero3_per_mb) + bubble;
                let shard_d = if q.zero >= Zero(1) {
                    x.g_dp.size as f64
                } else {
                    1.0
                };
                let shard_e = if q.zero >= Zero(1) {
                    x.g_edp.size as f64
                } else {
                    1.0
                };
                let per_param = match self.model.training.optimizer {
                    Optimizer::Adam => ADAM_BYTES_PER_PARAM,
                    Optimizer::Sgd => SGD_BYTES_PER_PARAM,
                };
                let opt_params = pmax.params_dense / shard_d + pmax.params_expert / shard_e;
                let optimizer = memory_bound_time(&self.gpu, per_param * opt_params);
                best = best.min(pipeline + dp_exposed + optimizer);
            }
        }
        if best.is_finite() {
            best * MARGIN
        } else {
            0.0
        }
    }
}
