//! The step floor of every (recompute, schedule, sharding) triple of a task at once
//! ([`Evaluator::floor_table`]): the search bounds every node of a task's walk from one table
//! instead of asking `step_floor` (`floor.rs`, whose admissibility argument it shares) at each.

use autoplan_cluster::GroupPlacement;
use autoplan_plan::{Plan, Recompute, RecomputeModules, StageLayout};

use super::classes::{ClassId, NCLASS};
use super::costs::{ClassCost, CommPart};
use super::floor::{rest_key, OpenLists, MARGIN, SEEN};
use super::Evaluator;

/// (Schedule, vpp) pairs a [`Evaluator::floor_table`] holds at most.
const TABLE_SCHEDULES: usize = 32;
/// Sharding modes a [`Evaluator::floor_table`] holds at most.
const TABLE_ZEROS: usize = 16;

impl Evaluator {
    /// [`Evaluator::step_floor`] of each (recompute, schedule, sharding) triple on its own,
    /// all from one pass: `out[(r·S + s)·Z + z]` (`S` schedules, `Z` sharding modes) is
    /// lowered to the floor of the completions of `plan` with `open.recomputes[r]`,
    /// `open.schedules[s]` and `open.zeros[z]` and any value of the other lists — the number
    /// `step_floor` gives with those three lists of one value each (`tests/floor.rs` checks
    /// it) — and left as it is where that triple makes no valid plan. A search bounds every
    /// node below a task's root from one table (the least entry of the node's block) instead
    /// of a floor per node: the class costs, the stage scans and the DP rest, the bulk of a
    /// floor, are computed once per rank order. False, with `out` untouched, where `out` has
    /// not `R·S·Z` entries or the lists are longer than the table's arrays
    /// (32 (schedule, vpp) pairs, 16 sharding modes).
    pub fn floor_table(&self, plan: &Plan, open: &OpenLists<'_>, out: &mut [f64]) -> bool {
        let OpenLists {
            orders,
            recomputes,
            schedules,
            zeros,
            tp_sp,
            cp_comm,
            dispatchers,
            schemes,
        } = *open;
        let (nr, ns, nz) = (recomputes.len(), schedules.len(), zeros.len());
        if out.len() != nr * ns * nz || ns > TABLE_SCHEDULES || nz > TABLE_ZEROS {
            return false;
        }
        let knobs = open.knobs(false);
        if orders.is_empty()
            || [tp_sp.len(), cp_comm.len(), dispatchers.len(), schemes.len()].contains(&0)
        {
            return true;
        }
        let mut q = *plan;
        // The open knobs at a value they can take (`floor_of`).
        q.tp_sp_transition = tp_sp[0];
        q.cp_comm = cp_comm[0];
        q.dispatcher = dispatchers[0];
        q.moe_tp_scheme = schemes[0];
        // The valid triples (`valid_with` with the sharding mode set: an HSDP group can be
        // invalid at these degrees).
        let mut valid = vec![false; out.len()];
        for (ri, &r) in recomputes.iter().enumerate() {
            for (si, &sv) in schedules.iter().enumerate() {
                for (zi, &z) in zeros.iter().enumerate() {
                    q.zero = z;
                    valid[(ri * ns + si) * nz + zi] = self.valid_with(&mut q, r, sv);
                }
            }
        }
        if !valid.contains(&true) {
            return true;
        }
        // Under EP overlap the EP part reads the schedule: one set of class costs per open
        // (schedule, vpp) pair, as the floor of a node with that pair prices it.
        let by_schedule = q.ep_overlap
            && ns > 1
            && ClassId::ALL.into_iter().any(|id| {
                self.has_class(id) && CommPart::Ep.applies(id, &self.classes[id as usize])
            });
        let sets = if by_schedule { ns } else { 1 };
        let x0 = self.ctx(plan);
        let cc = self.class_compute(&x0);
        let none = GroupPlacement {
            size: 0,
            ranks_per_node: 0,
            nodes: 0,
        };
        let mut seen = [[none; 8]; SEEN];
        let mut n_seen = 0;
        let mut costs = vec![[ClassCost::default(); NCLASS]; sets];
        let mut priced = None;
        // (layout, recompute, DualPipe pairing, cost set) → (t_max, stage sum, rest per mode).
        type Scanned = (
            StageLayout,
            (Recompute, RecomputeModules),
            bool,
            usize,
            f64,
            f64,
            [f64; TABLE_ZEROS],
        );
        let mut layouts: Vec<Scanned> = Vec::new();
        // The rest per sharding mode of the stages scanned under one order, by what
        // `after_pipeline` reads of its stage (`rest_key`): the recompute entries of a layout
        // leave it alike.
        let mut rests: Vec<([u64; 6], [f64; TABLE_ZEROS])> = Vec::new();
        for &order in orders {
            q.order = order;
            let x = self.ctx(&q);
            let groups = x.groups();
            if seen[..n_seen].contains(&groups) {
                continue;
            }
            if n_seen < SEEN {
                seen[n_seen] = groups;
                n_seen += 1;
            }
            // Orders that place the class costs' groups alike share them (`class_groups`).
            let key = x.class_groups();
            if priced != Some(key) {
                self.class_costs_floor_by(&mut q, &x, &cc, knobs, by_schedule, &mut costs);
                priced = Some(key);
            }
            let pp_t = self.pp_hop(&x).1;
            layouts.clear();
            rests.clear();
            for (ri, &r) in recomputes.iter().enumerate() {
                for (si, &(sch, v)) in schedules.iter().enumerate() {
                    let row = (ri * ns + si) * nz;
                    if !valid[row..row + nz].contains(&true) {
                        continue;
                    }
                    let set = if by_schedule { si } else { 0 };
                    (q.recompute, q.recompute_modules) = r;
                    q.schedule = sch;
                    q.vpp = v;
                    let Ok(mut layout) = self.layout(&q) else {
                        continue;
                    };
                    // `blocks` does not read `vpp`; DualPipe's ranks pair the stages.
                    layout.vpp = 1;
                    let dual = super::dualpipe::paired(&q, x.pp);
                    let found = layouts
                        .iter()
                        .find(|l| l.0 == layout && l.1 == r && l.2 == dual && l.3 == set);
                    let (.., tmax, sum, rest) = match found {
                        Some(l) => *l,
                        None => {
                            let mut costs_r = costs[set];
                            if r.0 == Recompute::Selective {
                                self.price_selective(r.1, &x0, &mut costs_r);
                            }
                            let scan = self.scan_stages(&q, &x, &costs_r, &layout, pp_t);
                            let key = rest_key(&scan.pmax);
                            let rest = match rests.iter().find(|(k, _)| *k == key) {
                                Some(&(_, rest)) => rest,
                                None => {
                                    let mut rest = [f64::INFINITY; TABLE_ZEROS];
                                    for (zi, &z) in zeros.iter().enumerate() {
                                        q.zero = z;
                                        let a = self.after_pipeline(
                                            &q,
                                            &x,
                                            &scan.pmax,
                                            &mut (),
                                            x.micro,
                                        );
                                        rest[zi] = x.micro * a.dp.per_mb + a.dp.step + a.optimizer;
                                    }
                                    rests.push((key, rest));
                                    rest
                                }
                            };
                            let l = (layout, r, dual, set, scan.tmax, scan.sum, rest);
                            layouts.push(l);
                            l
                        }
                    };
                    // `run`'s bubble of the schedule (`order_floor`).
                    let bubble = sch.bubble_of(sum, tmax, v, x.pp, x.micro);
                    for zi in 0..nz {
                        if valid[row + zi] {
                            let t = (x.micro * tmax + bubble + rest[zi]) * MARGIN;
                            out[row + zi] = out[row + zi].min(t);
                        }
                    }
                }
            }
        }
        true
    }
}
