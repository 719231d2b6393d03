//! An admissible floor of the step time over the decisions a search has not taken yet
//! ([`Evaluator::step_floor`]): the branch-and-bound of `autoplan-search` cuts with it the
//! subtrees whose plans differ only in how they communicate, recompute and pipeline.
//!
//! The floor is `Evaluator::run`'s step time, computed by the same per-part functions, with
//! every class's exposed communication replaced by its minimum over the open communication
//! knobs, one part at a time, minimised over the open rank orders, recompute modes, schedules
//! and ZeRO stages. It is admissible — no completion is faster — because:
//! - the compute of a class (`class_compute`) reads none of those decisions, so every
//!   completion has the same `fwd`, `bwd`, `rc_full`, `rc_sel` and GEMM windows as the floor;
//! - each communication part moves the exposure of one kind only (`book_part`: `tp_comm` reads
//!   the TP→SP transition and writes TP, `cp_comm` the CP exchange and CP, `ep_comm` the
//!   dispatcher and `moe_tp` scheme and EP), so a completion's exposure of each kind is at
//!   least the minimum over the part's knob, and the sum of minima is at most the minimum of
//!   sums;
//! - `stage` adds the exposures to the stage time, and `run`'s pipeline time
//!   `m·t_max + f·(Σt − t_max) = (m − f)·t_max + f·Σt` (`m ≥ 1 ≥ f ≥ 0`) grows with every stage
//!   time; the DP reduction (`dp_comm`), the ZeRO-3 gathers and the optimizer step
//!   (`after_pipeline`) depend on the order and the ZeRO stage (both minimised over) and on the
//!   stage holding the most parameters and its compute, which none of the knobs change;
//! - the recompute mode, the schedule and the ZeRO stage are minimised over exactly: each open
//!   value is composed as `run` composes it (`price_selective`, `scan_stages`, the bubble).
//!
//! The same operations run in the same order as in `run` on inputs no larger, and IEEE
//! rounding is monotone, so the floor holds in floating point too; a relative margin of 1e-12
//! covers `Σt − t_max` (not monotone by an ulp), the regrouped sum of `stages_floor` and the EP
//! part recombined at each schedule's paired share from its prices at 0 and 1
//! (`floor_parts.rs`, which keeps the parts' prices per thread across task roots).
//!
//! What stays the floor's own: the loops over the open values and their caches (valid
//! (recompute, schedule) pairs, rank orders with the same groups, stage layouts), the
//! regrouped sum `m·t_max + bubble + rest`.
//!
//! Kept in step with `run` by `crates/search/tests/floor.rs`: with nothing open the floor
//! equals the step time.
//!
//! Two looser, cheaper floors of the same completions share the code
//! ([`Evaluator::step_floor_quick`], [`Evaluator::step_floor_compute`]): with every stage priced
//! without recompute and without the once-per-step rest, then without any communication. Each
//! drops only terms that add to a stage time or to the step (recompute time and the recomputed
//! forward's exposure, the exposures, the pipeline hop, the DP reduction, ZeRO gathers and
//! optimizer step are all ≥ 0), and the pipeline time grows with every stage time (above), so
//! `step_floor_compute ≤ step_floor_quick ≤ step_floor`. The search bounds every task root
//! with the compute floor (one `class_compute`, about one evaluation's work) and asks for the
//! others only where it does not cut.

use autoplan_cluster::GroupPlacement;
use autoplan_plan::{
    CpComm, Dispatcher, MoeTpScheme, Plan, RankOrder, Recompute, RecomputeModules, Schedule,
    StageLayout, TpSpTransition, Zero,
};

use super::classes::{ClassId, NCLASS};
use super::compute::ComputeCost;
use super::costs::ClassCost;
use super::ctx::Ctx;
use super::pipeline::StageTime;
use super::Evaluator;
use crate::comm::CommKind;

/// Relative margin for the rounding of `Σt − t_max` and of the regrouped sum (module docs).
pub(super) const MARGIN: f64 = 1.0 - 1e-12;
/// Group sets of distinct rank orders remembered (later ones are costed again).
pub(super) const SEEN: usize = 24;
/// (Stage layout, recompute) pairs remembered per order (later ones are recomputed).
const LAYOUTS: usize = 16;

/// The open values of the communication knobs.
#[derive(Clone, Copy)]
pub(super) struct OpenKnobs<'a> {
    /// The open (schedule, vpp) pairs: EP overlap's hiding reads them.
    pub(super) schedules: &'a [(Schedule, u32)],
    pub(super) tp_sp: &'a [TpSpTransition],
    pub(super) cp_comm: &'a [CpComm],
    pub(super) dispatchers: &'a [Dispatcher],
    pub(super) schemes: &'a [MoeTpScheme],
    /// Only the exposures are read (the quick and compute floors: no recompute, no DP rest,
    /// so neither the recomputed forward's exposure nor the network time beside compute).
    pub(super) exposure_only: bool,
}

/// The open values a step floor minimises over, one list per decision still open (the plan's
/// own value alone where it is taken). A floor with an empty list is 0 (no information).
#[derive(Debug, Clone, Copy)]
pub struct OpenLists<'a> {
    pub orders: &'a [RankOrder],
    pub recomputes: &'a [(Recompute, RecomputeModules)],
    /// The (schedule, vpp) pairs.
    pub schedules: &'a [(Schedule, u32)],
    /// The sharding modes (the quick floor reads none: it prices no rest after the pipeline).
    pub zeros: &'a [Zero],
    pub tp_sp: &'a [TpSpTransition],
    pub cp_comm: &'a [CpComm],
    pub dispatchers: &'a [Dispatcher],
    pub schemes: &'a [MoeTpScheme],
}

impl<'a> OpenLists<'a> {
    /// The communication knobs' lists, as the floors' parts read them.
    pub(super) fn knobs(&self, exposure_only: bool) -> OpenKnobs<'a> {
        OpenKnobs {
            schedules: self.schedules,
            tp_sp: self.tp_sp,
            cp_comm: self.cp_comm,
            dispatchers: self.dispatchers,
            schemes: self.schemes,
            exposure_only,
        }
    }
}

/// Where a knob cannot change the plan's cost its first open value stands for all; whether it
/// can is the plan crate's one rule, [`Knob::matters`] (the dispatcher and the `moe_tp`
/// scheme; the TP→SP transition and the CP exchange are always tried, their parts pricing
/// nothing where they do not apply: [`CommPart::applies`]); every open sharding mode is
/// priced (each communicates differently, `dp.rs`).
///
/// `values` if the knob matters, else its first value alone.
#[inline]
pub(super) fn tried<T>(matters: bool, values: &[T]) -> &[T] {
    if matters {
        values
    } else {
        &values[..1]
    }
}

/// The EP hidings of the open (schedule, vpp) pairs that give the least of every EP figure the
/// floor keeps, as (form index of `floor_parts::EpOption`, paired share), written to `out` (at
/// most 4; their count returned); none without EP overlap (the part unhidden), the plan's own
/// schedule's where `schedules` is empty. A schedule reaches the EP costs only through its
/// hiding (`Evaluator::ep_hide`): DualPipe's partitioned SMs or the others' shared ones, each
/// with the paired share of its chunk passes (`paired_share`). Every transfer's exposure
/// `paired·hidden + (1 − paired)·t` (`Hide::exposed`, `hidden ≤ t`) falls as the share grows,
/// and so does the recomputed forward's, while its time beside compute `t − exposed` grows: of
/// each hiding form, the largest share gives the least exposure and the smallest the least
/// network time, so those two give the same minima as every pair. With `exposure_only` (a
/// floor that reads no network time or recompute) the largest alone.
fn hidings(
    q: &Plan,
    micro: f64,
    schedules: &[(Schedule, u32)],
    exposure_only: bool,
    out: &mut [(usize, f64); 4],
) -> usize {
    if !q.ep_overlap {
        return 0;
    }
    let own = [(q.schedule, q.vpp)];
    let schedules = if schedules.is_empty() {
        &own[..]
    } else {
        schedules
    };
    // (least share, largest share) per form: shared, partitioned.
    let mut ext: [Option<(f64, f64)>; 2] = [None; 2];
    for &(schedule, vpp) in schedules {
        let p = Plan {
            schedule,
            vpp,
            ..*q
        };
        let share = super::ep_overlap::paired_share(&p, micro);
        let form = usize::from(schedule == Schedule::DualPipe);
        ext[form] = Some(match ext[form] {
            None => (share, share),
            Some((lo, hi)) => (lo.min(share), hi.max(share)),
        });
    }
    let forms = [super::floor_parts::SHARED, super::floor_parts::PARTITIONED];
    let mut n = 0;
    for (form, e) in forms.into_iter().zip(ext) {
        let Some((lo, hi)) = e else { continue };
        out[n] = (form, hi);
        n += 1;
        if lo != hi && !exposure_only {
            out[n] = (form, lo);
            n += 1;
        }
    }
    n
}

impl Evaluator {
    /// A lower bound on the step time of every plan that equals `plan` except for its rank
    /// order, recompute mode and modules, pipeline schedule and virtual stages, ZeRO stage,
    /// TP→SP transition, CP exchange, dispatcher and `moe_tp` scheme (any value of the lists
    /// in `open`); the other fields are taken from `plan` (a caller bounding both overlap
    /// settings passes the most hiding one, `true`: overlap only hides time). 0 if `plan` is
    /// invalid with every recompute mode and schedule (no information). Allocates only the
    /// group sets of the orders seen, where more than one order is open.
    pub fn step_floor(&self, plan: &Plan, open: &OpenLists<'_>) -> f64 {
        self.floor_of(plan, open, Some(open.zeros), true, open.knobs(false))
    }

    /// A cheaper, looser floor of the same completions as [`Evaluator::step_floor`] (the
    /// ZeRO stage open too: `open.zeros` is not read): the pipeline with every stage priced
    /// without recompute (the recompute time and the recomputed forward's communication only
    /// add to a stage, and `run`'s pipeline time grows with every stage time: module docs) and
    /// without the once-per-step rest (DP reduction, ZeRO gathers, optimizer step: times,
    /// ≥ 0). So `step_floor_quick ≤ step_floor` on the same lists; it skips the per-recompute
    /// stage scans and the DP collectives, the bulk of `step_floor`'s work. A search orders
    /// and cuts with it first and asks for `step_floor` only where it does not cut.
    pub fn step_floor_quick(&self, plan: &Plan, open: &OpenLists<'_>) -> f64 {
        self.floor_of(plan, open, None, true, open.knobs(true))
    }

    /// The cheapest floor, below [`Evaluator::step_floor_quick`] for any open rank orders and
    /// communication knobs: `run`'s pipeline of the stages' compute alone (no communication
    /// exposed, no pipeline hop, no recompute, no once-per-step rest: each only adds to a stage
    /// or to the step, module docs). It costs one `class_compute` and a stage scan per stage
    /// layout; a search orders its tasks by it and asks for the communication floors only of
    /// those it does not cut.
    pub fn step_floor_compute(
        &self,
        plan: &Plan,
        recomputes: &[(Recompute, RecomputeModules)],
        schedules: &[(Schedule, u32)],
    ) -> f64 {
        let open = OpenLists {
            orders: std::slice::from_ref(&plan.order),
            recomputes,
            schedules,
            zeros: std::slice::from_ref(&plan.zero),
            tp_sp: std::slice::from_ref(&plan.tp_sp_transition),
            cp_comm: std::slice::from_ref(&plan.cp_comm),
            dispatchers: std::slice::from_ref(&plan.dispatcher),
            schemes: std::slice::from_ref(&plan.moe_tp_scheme),
        };
        self.floor_of(plan, &open, None, false, open.knobs(true))
    }

    /// The cheapest floor, below [`Evaluator::step_floor_compute`] for any open recompute
    /// modes, schedules and stage layouts: the work of the whole model spread evenly over the
    /// pipeline, `m·S/pp` (`S` every layer's forward and backward compute of one micro-batch).
    /// `run`'s step is at least `m·t_max`, and the busiest stage (or DualPipe rank, the mean
    /// of two stages) holds at least `1/pp` of the stages' sum, which is `S` plus the
    /// recompute, exposures and hops (all ≥ 0); the bubble is ≥ 0. One `class_compute` (cached
    /// per thread) and a sum over the classes: no stage layout, no validity check, so a search
    /// can bound every task with it and ask for the compute floor only of those it does not
    /// cut.
    pub fn step_floor_work(&self, plan: &Plan) -> f64 {
        let x = self.ctx_ungrouped(plan);
        let cc = self.class_compute(&x);
        // Every layer: one stage that is both the first and the last.
        let dense = self.dense_blocks.min(self.blocks);
        let counts = self.class_counts(true, true, (self.blocks, dense, self.blocks - dense));
        let work: f64 = ClassId::ALL
            .into_iter()
            .filter(|&id| self.has_class(id))
            .map(|id| counts[id as usize] * (cc[id as usize].fwd + cc[id as usize].bwd))
            .sum();
        let w = x.micro * work / f64::from(x.pp.max(1));
        if w.is_finite() {
            // Summed by class rather than by stage: the margin once more keeps it below the
            // compute floor where the two meet (a balanced pipeline without a bubble).
            w * MARGIN * MARGIN
        } else {
            0.0
        }
    }

    /// [`Evaluator::step_floor`] with `zeros`, [`Evaluator::step_floor_quick`] without
    /// (`None`: no recompute, no once-per-step rest), [`Evaluator::step_floor_compute`]
    /// without `comm` either (no communication).
    fn floor_of(
        &self,
        plan: &Plan,
        open: &OpenLists<'_>,
        zeros: Option<&[Zero]>,
        comm: bool,
        knobs: OpenKnobs<'_>,
    ) -> f64 {
        let OpenLists {
            orders,
            recomputes,
            schedules,
            tp_sp,
            cp_comm,
            dispatchers,
            schemes,
            zeros: _,
        } = *open;
        let lists = [
            orders.len(),
            recomputes.len(),
            schedules.len(),
            zeros.map_or(1, <[Zero]>::len),
        ];
        let sizes = [tp_sp.len(), cp_comm.len(), dispatchers.len(), schemes.len()];
        if lists.contains(&0) || sizes.contains(&0) {
            return 0.0;
        }
        let mut q = *plan;
        // The open knobs at a value they can take: a partial plan carries placeholders for the
        // undecided ones (e.g. the space's first `moe_tp_scheme` on a dense model, where only
        // the default is valid), and validity is checked on `q`.
        q.tp_sp_transition = tp_sp[0];
        q.cp_comm = cp_comm[0];
        q.dispatcher = dispatchers[0];
        q.moe_tp_scheme = schemes[0];
        let Some(mask) = self.valid_mask(&mut q, recomputes, schedules, zeros.is_none()) else {
            return 0.0;
        };
        // Compute, once: `run`'s, which reads none of the open decisions.
        let x0 = self.ctx(plan);
        let cc = self.class_compute(&x0);
        let zs = zeros;
        // Orders placing every group alike give the same floor (`Ctx` differs only in the
        // groups, and no cost reads `plan.order`): the group sets already seen.
        let none = GroupPlacement {
            size: 0,
            ranks_per_node: 0,
            nodes: 0,
        };
        // Only as long as the orders (zeroing the whole array costs more than a floor of one
        // order's compute).
        let mut seen: Vec<[GroupPlacement; 8]> = Vec::new();
        if orders.len() > 1 {
            seen.reserve_exact(orders.len().min(SEEN));
        }
        // The class costs: compute alone (`step_floor_compute`), or those last priced, with
        // their groups (`class_groups`), filled in place (no copies of the array).
        let mut costs = [ClassCost::default(); NCLASS];
        if !comm {
            for id in ClassId::ALL.into_iter().filter(|&id| self.has_class(id)) {
                costs[id as usize] = ClassCost::new(&cc[id as usize], [0.0; 5], [0.0; 5], [0.0; 2]);
            }
        }
        let mut priced: Option<[GroupPlacement; 5]> = None;
        let mut best = f64::INFINITY;
        for &order in orders {
            q.order = order;
            // Compute alone reads no group: the plan's own context.
            let x = if comm { self.ctx(&q) } else { x0 };
            // The quick and compute floors read no DP group (no rest after the pipeline): the
            // class costs' groups and the pipeline hop decide their order's floor.
            let groups = if zs.is_some() {
                x.groups()
            } else {
                let [tp, cp, cp_hop, ep, mt] = x.class_groups();
                [tp, cp, cp_hop, ep, mt, x.hop_pp, none, none]
            };
            if seen.contains(&groups) {
                continue;
            }
            if orders.len() > 1 && seen.len() < SEEN {
                seen.push(groups);
            }
            // Orders that place the class costs' groups alike share them (`class_groups`).
            let key = x.class_groups();
            if comm && priced != Some(key) {
                let out = std::slice::from_mut(&mut costs);
                self.class_costs_floor_by(&mut q, &x, &cc, knobs, false, out);
                priced = Some(key);
            }
            let pp_t = if comm { self.pp_hop(&x).1 } else { 0.0 };
            let order_best = self.order_floor(
                &mut q, &x, &x0, &costs, mask, recomputes, schedules, zs, pp_t,
            );
            best = best.min(order_best);
        }
        if best.is_finite() {
            best * MARGIN
        } else {
            0.0
        }
    }

    /// The (recompute, schedule, vpp) triples with a valid plan: a bit each (the first 64;
    /// the others are checked where used). Invalid completions have no step time to bound.
    /// `None` when none of the first 64 is valid and there are no others. With `first_only`
    /// (the quick floor, which prices every recompute entry alike) only the first valid
    /// entry of each schedule.
    fn valid_mask(
        &self,
        q: &mut Plan,
        recomputes: &[(Recompute, RecomputeModules)],
        schedules: &[(Schedule, u32)],
        first_only: bool,
    ) -> Option<u64> {
        let n = schedules.len();
        let mut mask = 0u64;
        for (k, &sv) in schedules.iter().enumerate() {
            for (ri, &r) in recomputes.iter().enumerate() {
                if ri * n + k < 64 && self.valid_with(q, r, sv) {
                    mask |= 1 << (ri * n + k);
                    if first_only {
                        break;
                    }
                }
            }
        }
        if mask == 0 && recomputes.len() * n <= 64 {
            return None;
        }
        Some(mask)
    }

    /// `q` with recompute `(r, m)` and schedule `(sch, v)` is a valid plan (left set in `q`).
    pub(super) fn valid_with(
        &self,
        q: &mut Plan,
        (r, m): (Recompute, RecomputeModules),
        (sch, v): (Schedule, u32),
    ) -> bool {
        q.recompute = r;
        q.recompute_modules = m;
        q.schedule = sch;
        q.vpp = v;
        q.check(&self.model, self.cluster.gpus()).is_ok() && self.layout(q).is_ok()
    }

    /// `class_costs` with each part's exposure (and the recomputed forward's) the least over
    /// its open knob values, into `out[0]` (`rc_sel` is the attention core's: each selective
    /// entry of the recompute list prices its modules later, `price_selective`); or with
    /// `by_schedule` one set per open (schedule, vpp) pair, `out[j]` with the EP part's least
    /// over `knobs.schedules[j]` alone (EP overlap's hiding reads the schedule,
    /// `ep_overlap.rs`; the TP and CP parts read none). The parts come priced per thread
    /// (`floor_parts.rs`): the TP and CP parts at their least, the EP part per (dispatcher,
    /// scheme) pair at paired shares 0 and 1, combined here under each set's schedules.
    pub(super) fn class_costs_floor_by(
        &self,
        q: &mut Plan,
        x: &Ctx,
        cc: &[ComputeCost; NCLASS],
        knobs: OpenKnobs<'_>,
        by_schedule: bool,
        out: &mut [[ClassCost; NCLASS]],
    ) {
        let parts = self.part_floors(q, x, cc, knobs);
        // Each set's EP part under the hidings of its schedules (`hidings`).
        for (j, set) in out.iter_mut().enumerate() {
            let schedules = if by_schedule {
                &knobs.schedules[j..=j]
            } else {
                knobs.schedules
            };
            let mut shares = [(0, 0.0); 4];
            let n_shares = hidings(q, x.micro, schedules, knobs.exposure_only, &mut shares);
            *set = [ClassCost::default(); NCLASS];
            for id in ClassId::ALL.into_iter().filter(|&id| self.has_class(id)) {
                let i = id as usize;
                let [tp, cp] = parts.tp_cp(id);
                let ep = parts.ep_least(id, &shares[..n_shares]);
                let (mut ex, mut rc) = ([0.0; 5], [0.0; 5]);
                (ex[CommKind::Tp.index()], rc[CommKind::Tp.index()]) = (tp.ex, tp.rc);
                (ex[CommKind::Cp.index()], rc[CommKind::Cp.index()]) = (cp.ex, cp.rc);
                (ex[CommKind::Ep.index()], rc[CommKind::Ep.index()]) = (ep.ex, ep.rc);
                let net = [
                    tp.net[0] + cp.net[0] + ep.net[0],
                    tp.net[1] + cp.net[1] + ep.net[1],
                ];
                set[i] = ClassCost::new(&cc[i], ex, rc, net);
            }
        }
    }

    /// For one rank order (context `x`, class costs `costs`): the least over the valid
    /// (recompute, schedule) pairs of `run`'s step, regrouped as `m·t_max + bubble + rest`;
    /// with `zs` `None` (`step_floor_quick`) the stages without recompute and no rest; `pp_t`
    /// the pipeline hop's seconds (0 for `step_floor_compute`).
    #[allow(clippy::too_many_arguments)]
    fn order_floor(
        &self,
        q: &mut Plan,
        x: &Ctx,
        x0: &Ctx,
        costs: &[ClassCost; NCLASS],
        mask: u64,
        recomputes: &[(Recompute, RecomputeModules)],
        schedules: &[(Schedule, u32)],
        zs: Option<&[Zero]>,
        pp_t: f64,
    ) -> f64 {
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
            split: autoplan_plan::PipelineSplit::Blocks,
        };
        let none = (Recompute::None, RecomputeModules::DEFAULT);
        let mut layouts = [(empty, none, false, 0.0, 0.0, 0.0); LAYOUTS];
        let mut n_layouts = 0;
        // The least rest of the stages scanned, by what `after_pipeline` reads of its stage
        // (`rest_key`): a layout's recompute entries leave it alike.
        let mut rests = [([0u64; 6], 0.0); LAYOUTS];
        let mut n_rests = 0;
        // The class costs of the selective entry last priced (the others read `costs`).
        let mut priced: Option<(Recompute, RecomputeModules)> = None;
        let mut selective = [ClassCost::default(); NCLASS];
        let mut best = f64::INFINITY;
        for (idx, (r, &(sch, v))) in recomputes
            .iter()
            .flat_map(|&r| schedules.iter().map(move |sv| (r, sv)))
            .enumerate()
        {
            let ok = if idx < 64 {
                mask >> idx & 1 == 1
            } else {
                self.valid_with(q, r, (sch, v))
            };
            if !ok {
                continue;
            }
            // The quick floor prices every stage without recompute (docs above).
            let r = if zs.is_some() { r } else { none };
            let costs_r = if r.0 == Recompute::Selective {
                if priced != Some(r) {
                    selective = *costs;
                    self.price_selective(r.1, x0, &mut selective);
                    priced = Some(r);
                }
                &selective
            } else {
                costs
            };
            (q.recompute, q.recompute_modules) = r;
            q.schedule = sch;
            q.vpp = v;
            let Ok(mut layout) = self.layout(q) else {
                continue;
            };
            // `blocks` does not read `vpp`; DualPipe's ranks pair the stages (`dualpipe.rs`).
            layout.vpp = 1;
            let dual = super::dualpipe::paired(q, x.pp);
            let found = layouts[..n_layouts]
                .iter()
                .find(|l| l.0 == layout && l.1 == r && l.2 == dual);
            let (_, _, _, tmax, sum, rest) = match found {
                Some(l) => *l,
                None => {
                    let l = self.stages_floor(
                        q,
                        x,
                        costs_r,
                        &layout,
                        zs,
                        pp_t,
                        (&mut rests, &mut n_rests),
                    );
                    let l = (layout, r, dual, l.0, l.1, l.2);
                    if n_layouts < LAYOUTS {
                        layouts[n_layouts] = l;
                        n_layouts += 1;
                    }
                    l
                }
            };
            // `run`'s bubble of the schedule.
            let bubble = sch.bubble_of(sum, tmax, v, x.pp, x.micro);
            best = best.min(x.micro * tmax + bubble + rest);
        }
        best
    }

    /// For one stage layout: `run`'s busiest stage time `t_max` and stage sum, and the least
    /// over `zeros` of the rest of the step: `m·dp_per_mb + dp_exposed + optimizer` (`run`
    /// sums `m·(t_max + dp_per_mb) + bubble + dp_exposed + optimizer`; the regrouping moves
    /// the result by ulps, inside the floor's margin).
    /// `rests` holds the rests already found under the same context and sharding modes.
    #[allow(clippy::too_many_arguments)]
    fn stages_floor(
        &self,
        q: &mut Plan,
        x: &Ctx,
        costs: &[ClassCost; NCLASS],
        layout: &StageLayout,
        zeros: Option<&[Zero]>,
        pp_t: f64,
        (rests, n_rests): (&mut [([u64; 6], f64); LAYOUTS], &mut usize),
    ) -> (f64, f64, f64) {
        // The quick and compute floors: no recompute, no rest (times, ≥ 0), so the stage
        // times alone (`scan_times`).
        let Some(zeros) = zeros else {
            let (tmax, sum) = self.scan_times(q, x, costs, layout, pp_t);
            return (tmax, sum, 0.0);
        };
        let scan = self.scan_stages(q, x, costs, layout, pp_t);
        let key = rest_key(&scan.pmax);
        if let Some(&(_, rest)) = rests[..*n_rests].iter().find(|(k, _)| *k == key) {
            return (scan.tmax, scan.sum, rest);
        }
        let micro = x.micro;
        let mut rest = f64::INFINITY;
        for &z in zeros {
            q.zero = z;
            let r = self.after_pipeline(q, x, &scan.pmax, &mut (), micro);
            rest = rest.min(micro * r.dp.per_mb + r.dp.step + r.optimizer);
        }
        if *n_rests < LAYOUTS {
            rests[*n_rests] = (key, rest);
            *n_rests += 1;
        }
        (scan.tmax, scan.sum, rest)
    }
}

/// What `after_pipeline` reads of its stage, beside the plan's sharding mode and the context:
/// the stage's forward and backward times and the network time beside each (the windows the
/// DP collectives hide in, `dp.rs`, `replica.rs`) and its dense and expert parameters (the
/// bytes, and the optimizer's shard, `optimizer.rs`). Stages equal in these have the same rest
/// under each sharding mode (`tests/floor.rs` checks every floor-table entry against
/// `step_floor`, and every floor against the plans it bounds).
pub(super) fn rest_key(s: &StageTime) -> [u64; 6] {
    [
        s.fwd,
        s.bwd,
        s.net_fwd,
        s.net_bwd,
        s.params_dense,
        s.params_expert,
    ]
    .map(f64::to_bits)
}
