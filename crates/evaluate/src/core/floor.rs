//! An admissible floor of the step time over the decisions a search has not taken yet
//! ([`Evaluator::step_floor`]): the branch-and-bound of `autoplan-search` cuts with it the
//! subtrees whose plans differ only in how they communicate, recompute and pipeline.
//!
//! The floor is `Evaluator::run`'s step time with every class's exposed communication replaced
//! by its minimum over the open communication knobs, one kind at a time, minimised over the open
//! rank orders, recompute modes, schedules and ZeRO stages. It is admissible — no completion is
//! faster — because:
//! - the compute of a class (`compute`, `gemm_fwd`) reads none of those decisions, so every
//!   completion has the same `fwd`, `bwd`, `rc_full`, `rc_sel` and GEMM windows as the floor;
//! - each communication knob moves the exposure of one kind only (`tp_comm` reads the TP→SP
//!   transition and writes TP, `cp_comm` the CP exchange and CP, `ep_comm` the dispatcher and
//!   `moe_tp` scheme and EP), so a completion's exposure of each kind is at least the minimum
//!   over the kind's knob, and the sum of minima is at most the minimum of sums;
//! - `stage` adds the exposures to the stage time, and `run`'s pipeline time
//!   `m·t_max + f·(Σt − t_max) = (m − f)·t_max + f·Σt` (`m ≥ 1 ≥ f ≥ 0`) grows with every stage
//!   time; the DP reduction (`dp_comm`), the ZeRO-3 gathers and the optimizer step depend on
//!   the order and the ZeRO stage (both minimised over) and on the stage holding the most
//!   parameters and its compute, which none of the knobs change;
//! - the recompute mode, the schedule and the ZeRO stage are minimised over exactly: each open
//!   value is composed as `run` composes it.
//!
//! The same operations run in the same order as in `run` on inputs no larger, and IEEE
//! rounding is monotone, so the floor holds in floating point too; a relative margin of 1e-12
//! covers `Σt − t_max` (not monotone by an ulp) and the regrouped sum of `stages_floor`.
//!
//! Kept in step with `run`, `class_costs` and `stage` by `crates/search/tests/floor.rs`: with
//! nothing open the floor equals the step time.

use autoplan_plan::{
    CpComm, Dispatcher, MoeTpScheme, Plan, RankOrder, RecomputeModules, TpSpTransition, Zero,
};

use super::{
    ClassCost, Ctx, Emitter, Evaluator, Memo, StageTime, ATTN, HEAD, MLP, MOE, MTP, NCLASS,
};
use crate::comm::CommKind;
use autoplan_cluster::GroupPlacement;
use autoplan_plan::{Recompute, Schedule, StageLayout};

/// Relative margin for the rounding of `Σt − t_max` and of the regrouped sum (module docs).
const MARGIN: f64 = 1.0 - 1e-12;
/// Group sets of distinct rank orders remembered (later ones are costed again).
const SEEN: usize = 24;
/// (Stage layout, recompute) pairs remembered per order (later ones are recomputed).
const LAYOUTS: usize = 16;

impl Evaluator {
    /// A lower bound on the step time of every plan that equals `plan` except for its rank
    /// order (any of `orders`), recompute mode and modules (any of `recomputes`), pipeline
    /// schedule and
    /// virtual stages (any pair of `schedules`), ZeRO stage (any of `zeros`), TP→SP
    /// transition, CP exchange, dispatcher and `moe_tp` scheme (any of the lists); the other
    /// fields are taken from `plan` (a caller bounding both overlap settings passes the most
    /// hiding one, `true`: overlap only hides time). 0 if `plan` is invalid with every
    /// recompute mode and schedule (no information). Allocation-free.
    #[allow(clippy::too_many_arguments)]
    pub fn step_floor(
        &self,
        plan: &Plan,
        orders: &[RankOrder],
        recomputes: &[(Recompute, RecomputeModules)],
        schedules: &[(Schedule, u32)],
        zeros: &[Zero],
        tp_sp: &[TpSpTransition],
        cp_comm: &[CpComm],
        dispatchers: &[Dispatcher],
        schemes: &[MoeTpScheme],
    ) -> f64 {
        let lists = [orders.len(), recomputes.len(), schedules.len(), zeros.len()];
        let knobs = [tp_sp.len(), cp_comm.len(), dispatchers.len(), schemes.len()];
        if lists.contains(&0) || knobs.contains(&0) {
            return 0.0;
        }
        // The (recompute, schedule, vpp) triples with a valid plan: a bit each (the first 64;
        // the others are checked where used). Invalid completions have no step time to bound.
        let mut q = *plan;
        let gpus = self.cluster.gpus();
        let valid =
            |q: &mut Plan, (r, m): (Recompute, RecomputeModules), (sch, v): (Schedule, u32)| {
                q.recompute = r;
                q.recompute_modules = m;
                q.schedule = sch;
                q.vpp = v;
                q.check(&self.model, gpus).is_ok() && self.layout(q).is_ok()
            };
        let n = schedules.len();
        let mut mask = 0u64;
        for (ri, &r) in recomputes.iter().enumerate() {
            for (k, &sv) in schedules.iter().enumerate() {
                if ri * n + k < 64 && valid(&mut q, r, sv) {
                    mask |= 1 << (ri * n + k);
                }
            }
        }
        if mask == 0 && recomputes.len() * n <= 64 {
            return 0.0;
        }
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
        // ZeRO 1 and 2 take the same time (`dp_comm` and `run` only ask `≥ 1` and `≥ 3`; they
        // differ in memory): one stage of each class.
        let class = |z: Zero| (z >= Zero(1), z >= Zero(3));
        let mut zs = [Zero(0); 3];
        let mut nz = 0;
        for &z in zeros {
            if !zs[..nz].iter().any(|&y| class(y) == class(z)) {
                zs[nz] = z;
                nz += 1;
            }
        }
        let zs = &zs[..nz];
        // Orders placing every group alike give the same floor (`Ctx` differs only in the
        // groups, and no cost reads `plan.order`): the group sets already seen.
        let none = GroupPlacement {
            size: 0,
            ranks_per_node: 0,
            nodes: 0,
        };
        let mut seen = [[none; 8]; SEEN];
        let mut n_seen = 0;
        let mut best = f64::INFINITY;
        for &order in orders {
            q.order = order;
            let x = self.ctx(&q);
            let groups = [
                x.g_tp, x.g_cp, x.g_dp, x.g_ep, x.g_mt, x.g_edp, x.hop_cp, x.hop_pp,
            ];
            if seen[..n_seen].contains(&groups) {
                continue;
            }
            if n_seen < SEEN {
                seen[n_seen] = groups;
                n_seen += 1;
            }
            let mut memo = Memo::default();
            let mut costs = [ClassCost::default(); NCLASS];
            for (i, c) in self.classes.iter().enumerate() {
                if i == MOE && self.experts == 0.0 || i == MTP && self.mtp == 0 {
                    continue;
                }
                // `rc_sel` is the attention core's here; each selective entry of `recomputes`
                // prices its modules below (`class_costs`' `selective_rc`).
                let (fwd, bwd, rc_full, rc_sel, gemm) = cc[i];
                // `class_costs` collects the recomputed forward's exposure (`rc`) for the kinds
                // the plan's recompute repeats, and `stage` reads only those: collect all.
                let rc_kinds = if matches!(i, ATTN | MLP | MOE | MTP) {
                    (1 << CommKind::Tp.index())
                        | (1 << CommKind::Cp.index())
                        | (1 << CommKind::Ep.index())
                } else {
                    0
                };
                let mut e = Emitter {
                    ev: self,
                    x: &x,
                    sink: &mut (),
                    memo: &mut memo,
                    layer: c.kind,
                    mult: 0.0,
                    rc_mult: 0.0,
                    exposed: [0.0; 5],
                    rc: [0.0; 5],
                    rc_kinds,
                };
                // One exposure per kind, each the least over its own knob (module docs); the
                // recomputed forward's exposure likewise.
                let mut rc = [0.0; 5];
                let (ti, ci, ei) = (
                    CommKind::Tp.index(),
                    CommKind::Cp.index(),
                    CommKind::Ep.index(),
                );
                let mut tp = f64::INFINITY;
                rc[ti] = f64::INFINITY;
                for &t in tp_sp {
                    q.tp_sp_transition = t;
                    e.exposed = [0.0; 5];
                    e.rc = [0.0; 5];
                    self.tp_comm(&q, c, i, &x, gemm, &mut e);
                    tp = tp.min(e.exposed[ti]);
                    rc[ti] = rc[ti].min(e.rc[ti]);
                }
                let mut cpx = 0.0;
                if i == ATTN || i == MTP {
                    cpx = f64::INFINITY;
                    rc[ci] = f64::INFINITY;
                    for &k in cp_comm {
                        q.cp_comm = k;
                        e.exposed = [0.0; 5];
                        e.rc = [0.0; 5];
                        self.cp_comm(&q, c, &x, &mut e, cc[ATTN].0, cc[ATTN].1);
                        cpx = cpx.min(e.exposed[ci]);
                        rc[ci] = rc[ci].min(e.rc[ci]);
                    }
                }
                let mut epx = 0.0;
                if (i == MOE || i == MTP) && c.ep_elems > 0.0 {
                    epx = f64::INFINITY;
                    rc[ei] = f64::INFINITY;
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
                            e.rc = [0.0; 5];
                            self.ep_comm(&q, c, &x, &mut e, budget);
                            epx = epx.min(e.exposed[ei]);
                            rc[ei] = rc[ei].min(e.rc[ei]);
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
            let (_, pp_t) = self.pp_hop(&x);
            // Per distinct stage layout (the schedules without interleaving share one): the
            // busiest stage, the stage sum, and the least once-per-step part over the ZeRO
            // stages.
            let empty = StageLayout {
                pp: 0,
                vpp: 0,
                first: 0,
                last: 0,
                middle: 0,
                middle_extra: 0,
            };
            let none = (Recompute::None, RecomputeModules::DEFAULT);
            let mut layouts = [(empty, none, 0.0, 0.0, 0.0); LAYOUTS];
            let mut n_layouts = 0;
            // The class costs of the recompute entry last priced.
            let mut priced: Option<(Recompute, RecomputeModules)> = None;
            let mut costs_r = costs;
            for (idx, (r, &(sch, v))) in recomputes
                .iter()
                .flat_map(|&r| schedules.iter().map(move |sv| (r, sv)))
                .enumerate()
            {
                let ok = if idx < 64 {
                    mask >> idx & 1 == 1
                } else {
                    valid(&mut q, r, (sch, v))
                };
                if !ok {
                    continue;
                }
                if priced != Some(r) {
                    costs_r = costs;
                    if r.0 == Recompute::Selective {
                        let rc = self.selective_rcs(r.1, &x0, &cc.map(|c| c.0), &cc.map(|c| c.3));
                        for (c, v) in costs_r.iter_mut().zip(rc) {
                            c.rc_sel = v;
                        }
                    }
                    priced = Some(r);
                }
                (q.recompute, q.recompute_modules) = r;
                q.schedule = sch;
                q.vpp = v;
                let Ok(mut layout) = self.layout(&q) else {
                    continue;
                };
                // `blocks` does not read `vpp`.
                layout.vpp = 1;
                let found = layouts[..n_layouts]
                    .iter()
                    .find(|l| l.0 == layout && l.1 == r);
                let (_, _, tmax, sum, rest) = match found {
                    Some(l) => *l,
                    None => {
                        let l = self.stages_floor(&mut q, &x, &costs_r, &layout, zs, pp_t);
                        let l = (layout, r, l.0, l.1, l.2);
                        if n_layouts < LAYOUTS {
                            layouts[n_layouts] = l;
                            n_layouts += 1;
                        }
                        l
                    }
                };
                // `run`'s bubble of the schedule.
                let base = sum - tmax;
                let bubble = sch.bubble(base, v, x.pp);
                best = best.min(x.micro * tmax + bubble + rest);
            }
        }
        if best.is_finite() {
            best * MARGIN
        } else {
            0.0
        }
    }

    /// For one stage layout: `run`'s busiest stage time `t_max` and stage sum, and the least
    /// over `zeros` of the rest of the step: `m·zero3_per_mb + dp_exposed + optimizer` (`run`
    /// sums `m·(t_max + zero3_per_mb) + bubble + dp_exposed + optimizer`; the regrouping moves
    /// the result by ulps, inside the floor's margin).
    fn stages_floor(
        &self,
        q: &mut Plan,
        x: &Ctx,
        costs: &[ClassCost; NCLASS],
        layout: &StageLayout,
        zeros: &[Zero],
        pp_t: f64,
    ) -> (f64, f64, f64) {
        // `run`'s stage loop, with its reuse of equal middle stages.
        let (mut tmax, mut sum, mut start) = (0.0, 0.0, 0);
        let mut pmax = StageTime::default();
        let mut prev: Option<StageTime> = None;
        for i in 0..x.pp {
            let (n, dense, _) = self.stage_blocks(layout, i, start);
            let middle = i > 0 && i + 1 < x.pp;
            let s = match prev {
                Some(p) if middle && p.blocks == n && p.dense == dense => p,
                _ => self.stage(q, x, costs, layout, i, start, pp_t),
            };
            prev = middle.then_some(s);
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
        let mut rest = f64::INFINITY;
        for &z in zeros {
            q.zero = z;
            // `run`'s DP reduction and optimizer step.
            let (dp_exposed, zero3_per_mb) = self.dp_comm(q, x, &pmax, &mut (), micro);
            let optimizer = self.optimizer_time(z, x, &pmax);
            rest = rest.min(micro * zero3_per_mb + dp_exposed + optimizer);
        }
        (tmax, sum, rest)
    }
}
