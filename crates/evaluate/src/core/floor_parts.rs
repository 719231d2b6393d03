//! The communication parts of the step floor's class costs (`floor.rs`,
//! `class_costs_floor_by`), priced once per thread for every task root that reads them alike.
//!
//! Per class, each part's exposure is its least over the part's open knob values (TP: the
//! TP→SP transition; CP: the CP exchange; EP: the dispatcher and `moe_tp` scheme), and so are
//! the recomputed forward's exposure and the network time beside each pass. The TP and CP
//! parts read no schedule and no micro-batch count. The EP part reads them only through EP
//! overlap's hiding (`ep_overlap.rs`): the form (DualPipe's partitioned SMs or the shared
//! ones) and the paired share `p` of the chunk passes. Every transfer's exposure is
//! `p·hidden + (1 − p)·t` (`Hide::exposed`, `hidden ≤ t`), the recomputed forward's the same,
//! and its time beside compute `t − exposed = p·(t − hidden)`: all affine in `p`. So each
//! (dispatcher, scheme) pair is priced at `p = 0` and at `p = 1` under each form
//! ([`EpOption`]; one booking gives all three, `Emitter::other_forms`), and a root's open schedules combine them, `(1 − p)·a₀ + p·a₁`, before the
//! least over the pairs is taken.
//!
//! What the parts then read ([`PartsKey`]) holds no pipeline depth, micro-batch count or
//! schedule: roots of other pipeline depths (and rank orders) with the same groups, tokens,
//! compute and open knob values share the prices: the search bench's DeepSeek-V3 case asks
//! 5,335 times and prices 2,065 (docs/benchmarks.md). The recombination rounds differently from pricing at `p`
//! (ulps of one part's exposure), well inside the floors' relative margin of 1e-12
//! (`floor.rs`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use autoplan_cluster::GroupPlacement;
use autoplan_cost::AlgoMode;
use autoplan_plan::knob::{Context, Knob};
use autoplan_plan::{
    CpComm, Dispatcher, MoeTpScheme, PlacementPolicy, Plan, Schedule, TpSpTransition,
};

use super::classes::{ClassId, NCLASS};
use super::compute::{ComputeCost, ComputeKey};
use super::costs::CommPart;
use super::ctx::{fx_step, group_word, Ctx};
use super::emit::{Booked, Emitter};
use super::floor::{tried, OpenKnobs};
use super::memo::Memo;
use super::Evaluator;

/// One part's least exposure of its kind, the recomputed forward's, and the network time
/// beside the forward and backward pass.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Part {
    pub(super) ex: f64,
    pub(super) rc: f64,
    pub(super) net: [f64; 2],
}

impl Part {
    const ZERO: Part = Part {
        ex: 0.0,
        rc: 0.0,
        net: [0.0; 2],
    };
    const INF: Part = Part {
        ex: f64::INFINITY,
        rc: f64::INFINITY,
        net: [f64::INFINITY; 2],
    };

    /// What was booked of kind `k` (`b`, an emitter's): its exposure, the recomputed
    /// forward's, and the network time beside each pass.
    #[inline]
    fn booked(b: &Booked, k: usize) -> Part {
        Part {
            ex: b.exposed[k],
            rc: b.rc[k],
            net: b.net,
        }
    }

    /// The least of each figure.
    #[inline]
    fn min(self, o: Part) -> Part {
        Part {
            ex: self.ex.min(o.ex),
            rc: self.rc.min(o.rc),
            net: [self.net[0].min(o.net[0]), self.net[1].min(o.net[1])],
        }
    }

    /// Each figure at paired share `p` from its values at 0 (`a0`) and 1 (`a1`) (module docs;
    /// exact at `p` = 0 and 1).
    #[inline]
    fn at(a0: Part, a1: Part, p: f64) -> Part {
        let f = |u: f64, v: f64| (1.0 - p) * u + p * v;
        Part {
            ex: f(a0.ex, a1.ex),
            rc: f(a0.rc, a1.rc),
            net: [f(a0.net[0], a1.net[0]), f(a0.net[1], a1.net[1])],
        }
    }
}

/// One (dispatcher, scheme) pair's EP part: at paired share 0, then at 1 under the shared
/// hiding ([`SHARED`]) and under DualPipe's partitioned one ([`PARTITIONED`]); without EP
/// overlap all three are the part unhidden.
pub(super) type EpOption = [Part; 3];

/// [`EpOption`]'s index of the shared hiding at share 1.
pub(super) const SHARED: usize = 1;
/// [`EpOption`]'s index of DualPipe's partitioned hiding at share 1.
pub(super) const PARTITIONED: usize = 2;

/// (dispatcher, scheme) pairs kept per class; further ones are merged into the last, figure by
/// figure at their least (a floor of theirs: `min (1 − p)·a₀ + p·a₁ ≥ (1 − p)·min a₀ + p·min a₁`).
const EP_OPTIONS: usize = 6;

/// The communication parts of every class, each at its least over its open knob values.
#[derive(Debug, Clone, Copy)]
pub(super) struct PartFloors {
    /// Per class: the TP part.
    tp: [Part; NCLASS],
    /// The CP part of the attention and of the MTP module ([`cp_slot`]).
    cp: [Part; 2],
    /// The EP part's options, one set for the MoE class and the MTP module: an MTP module's
    /// MoE layer is a MoE block's, with the MoE class's windows (`book_part`), so the two
    /// price alike.
    ep: [EpOption; EP_OPTIONS],
    n_ep: usize,
    /// Which classes have the EP part (by `ClassId`).
    has_ep: [bool; NCLASS],
}

impl Default for PartFloors {
    fn default() -> PartFloors {
        PartFloors {
            tp: [Part::ZERO; NCLASS],
            cp: [Part::ZERO; 2],
            ep: [[Part::ZERO; 3]; EP_OPTIONS],
            n_ep: 0,
            has_ep: [false; NCLASS],
        }
    }
}

impl PartFloors {
    /// Class `id`'s TP and CP parts.
    pub(super) fn tp_cp(&self, id: ClassId) -> [Part; 2] {
        let cp = cp_slot(id).map_or(Part::ZERO, |s| self.cp[s]);
        [self.tp[id as usize], cp]
    }

    /// Class `id`'s EP part at its least over the (dispatcher, scheme) pairs and the hidings
    /// `shares` (form index of [`EpOption`], paired share); none without EP overlap (the
    /// part unhidden). 0 where the class has no EP part.
    pub(super) fn ep_least(&self, id: ClassId, shares: &[(usize, f64)]) -> Part {
        if !self.has_ep[id as usize] || self.n_ep == 0 {
            return Part::ZERO;
        }
        let mut best = Part::INF;
        for o in &self.ep[..self.n_ep] {
            if shares.is_empty() {
                best = best.min(o[0]);
            }
            for &(form, p) in shares {
                best = best.min(Part::at(o[0], o[form], p));
            }
        }
        best
    }
}

/// The slot of [`PartFloors::cp`] of the classes that can have a CP part.
fn cp_slot(id: ClassId) -> Option<usize> {
    match id {
        ClassId::Attn => Some(0),
        ClassId::Mtp => Some(1),
        _ => None,
    }
}

/// The open values of the TP part's knob (the TP→SP transition) or the CP part's (the CP
/// exchange): the parts [`Evaluator::part_floor`] prices value by value (the EP part is priced
/// per option, `ep_options`).
#[derive(Clone, Copy)]
enum TpOrCp<'a> {
    Tp(&'a [TpSpTransition]),
    Cp(&'a [CpComm]),
}

/// Open values of a knob a key holds at most (a longer list is priced without the cache).
const KEY_LIST: usize = 6;

/// What [`Evaluator::price_parts`] reads, as exact values: the evaluator and the compute's
/// reads of the context (`ComputeKey`: degrees, tokens, routing), the algorithm mode, the
/// groups the parts communicate on (TP, CP and its ring hop, EP, `moe_tp`), the overlaps, the
/// expert placement, and the open knob values — each `a2a+p2p` CP exchange with the two levels
/// it places (`cp_levels` reads the rank order and the other degrees).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PartsKey {
    compute: ComputeKey,
    algo: AlgoMode,
    groups: [GroupPlacement; 5],
    overlaps: (bool, bool),
    placement: PlacementPolicy,
    tp_sp: [Option<TpSpTransition>; KEY_LIST],
    cp_comm: [Option<(CpComm, GroupPlacement, GroupPlacement)>; KEY_LIST],
    dispatchers: [Option<Dispatcher>; KEY_LIST],
    schemes: [Option<MoeTpScheme>; KEY_LIST],
}

impl std::hash::Hash for PartsKey {
    /// The fields roots vary most (equal keys hash alike, which is all a map needs; the
    /// comparison is exact).
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.compute.hash());
        for g in self.groups {
            state.write_u64(group_word(g));
        }
    }
}

/// `list` in a key's fixed array, `None` if it is too long.
fn keyed<T: Copy, U: Copy>(list: &[T], f: impl Fn(T) -> U) -> Option<[Option<U>; KEY_LIST]> {
    if list.len() > KEY_LIST {
        return None;
    }
    let mut out = [None; KEY_LIST];
    for (o, &v) in out.iter_mut().zip(list) {
        *o = Some(f(v));
    }
    Some(out)
}

/// Keys [`PARTS_CACHE`] holds before it starts afresh (the search bench's DeepSeek-V3 case
/// prices 2,065).
const PARTS_CACHE_LEN: usize = 4096;

/// The parts priced on one thread: the values in one growing array, a map from each key to
/// its index (so the map moves small entries when it grows).
#[derive(Default)]
struct PartsCache {
    index: HashMap<PartsKey, u32, BuildHasherDefault<Mix>>,
    values: Vec<PartFloors>,
}

thread_local! {
    /// Class communication parts priced on this thread (exact keys: a hit is what pricing
    /// again gives, bit for bit). A map rather than direct-mapped slots: the roots that share
    /// a key come far apart in a search's queue.
    static PARTS_CACHE: RefCell<PartsCache> = RefCell::new(PartsCache::default());
}

/// FxHash over [`PartsKey`]'s few words (`ctx::fx_step`; exact keys, built by the search: no
/// need for a keyed hash).
#[derive(Default)]
struct Mix(u64);

impl Hasher for Mix {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.0 = fx_step(self.0, v);
    }
}

impl Evaluator {
    /// [`Evaluator::price_parts`], kept per thread by what it reads ([`PartsKey`]).
    pub(super) fn part_floors(
        &self,
        q: &mut Plan,
        x: &Ctx,
        cc: &[ComputeCost; NCLASS],
        knobs: OpenKnobs<'_>,
    ) -> PartFloors {
        let Some(key) = self.parts_key(q, x, knobs) else {
            return self.price_parts(q, x, cc, knobs);
        };
        let hit = PARTS_CACHE.with(|c| {
            let c = c.borrow();
            c.index.get(&key).map(|&i| c.values[i as usize])
        });
        if let Some(v) = hit {
            return v;
        }
        let v = self.price_parts(q, x, cc, knobs);
        PARTS_CACHE.with(|c| {
            let mut c = c.borrow_mut();
            if c.values.len() >= PARTS_CACHE_LEN {
                c.index.clear();
                c.values.clear();
            }
            if c.values.capacity() == 0 {
                // About one search's keys up front: the arrays do not grow (and move) in it.
                c.values.reserve(PARTS_CACHE_LEN / 2);
                c.index.reserve(PARTS_CACHE_LEN / 2);
            }
            let i = c.values.len() as u32;
            c.values.push(v);
            c.index.insert(key, i);
        });
        v
    }

    /// The key of [`Evaluator::price_parts`]' reads; `None` where a list is too long to key.
    fn parts_key(&self, q: &Plan, x: &Ctx, knobs: OpenKnobs<'_>) -> Option<PartsKey> {
        let none = GroupPlacement {
            size: 0,
            ranks_per_node: 0,
            nodes: 0,
        };
        Some(PartsKey {
            compute: ComputeKey::new(self.cache_id, x),
            algo: x.algo,
            groups: x.class_groups(),
            overlaps: (q.tp_overlap, q.ep_overlap),
            placement: q.placement,
            tp_sp: keyed(knobs.tp_sp, |t| t)?,
            cp_comm: keyed(knobs.cp_comm, |c| match c {
                CpComm::Hierarchical { a2a } if x.cp > 1.0 => {
                    let (inner, outer) = self.cp_levels(q, a2a);
                    (c, inner, outer)
                }
                _ => (c, none, none),
            })?,
            dispatchers: keyed(knobs.dispatchers, |d| d)?,
            schemes: keyed(knobs.schemes, |s| s)?,
        })
    }

    /// Every class's communication parts at their least over the open knob values of `knobs`,
    /// the EP part per (dispatcher, scheme) pair at paired shares 0 and 1 (module docs).
    pub(super) fn price_parts(
        &self,
        q: &mut Plan,
        x: &Ctx,
        cc: &[ComputeCost; NCLASS],
        knobs: OpenKnobs<'_>,
    ) -> PartFloors {
        let attn = cc[ClassId::Attn as usize];
        let moe = cc[ClassId::Moe as usize];
        let mut memo = Memo::default();
        let mut out = PartFloors::default();
        // The knobs priced value by value, restored at the end: a cached answer leaves the
        // plan as it was, so a fresh one must too.
        let knobs_in = (q.tp_sp_transition, q.cp_comm, q.dispatcher, q.moe_tp_scheme);
        for id in ClassId::ALL {
            if !self.has_class(id) {
                continue;
            }
            let i = id as usize;
            // `class_costs` collects the recomputed forward's exposure (`rc`) for the kinds
            // the plan's recompute repeats, and `stage` reads only those: collect all.
            let rc_kinds = Self::block_comm_kinds(id);
            let layer = self.classes[i].kind;
            let mut sink = ();
            let mut e = Emitter::new(self, x, &mut sink, &mut memo, layer, 0.0, 0.0, rc_kinds);
            let tp = TpOrCp::Tp(knobs.tp_sp);
            out.tp[i] = self.part_floor(tp, q, id, x, &cc[i], (&attn, &moe), &mut e);
            if let Some(slot) = cp_slot(id) {
                let cp = TpOrCp::Cp(knobs.cp_comm);
                out.cp[slot] = self.part_floor(cp, q, id, x, &cc[i], (&attn, &moe), &mut e);
            }
            if CommPart::Ep.applies(id, &self.classes[i]) {
                // Priced once: the MoE class's and the MTP module's EP parts are alike
                // (`PartFloors::ep`).
                if !out.has_ep.contains(&true) {
                    out.n_ep = self.ep_options(
                        q,
                        id,
                        x,
                        (&cc[i], &attn, &moe),
                        &mut e,
                        knobs,
                        &mut out.ep,
                    );
                }
                out.has_ep[i] = true;
            }
        }
        (q.tp_sp_transition, q.cp_comm, q.dispatcher, q.moe_tp_scheme) = knobs_in;
        out
    }

    /// The least exposure of the TP or CP part of class `id` over its open knob values
    /// (`open`), and of its recomputed forward, and its least network time beside each pass; 0
    /// where the class has no such part.
    #[allow(clippy::too_many_arguments)]
    fn part_floor(
        &self,
        open: TpOrCp<'_>,
        q: &mut Plan,
        id: ClassId,
        x: &Ctx,
        cc: &ComputeCost,
        (attn, moe): (&ComputeCost, &ComputeCost),
        e: &mut Emitter<'_, ()>,
    ) -> Part {
        let part = match open {
            TpOrCp::Tp(_) => CommPart::Tp,
            TpOrCp::Cp(_) => CommPart::Cp,
        };
        if !part.applies(id, &self.classes[id as usize]) {
            return Part::ZERO;
        }
        let k = part.kind().index();
        let mut best = Part::INF;
        let mut price = |q: &Plan, e: &mut Emitter<'_, ()>| {
            e.reset();
            self.book_part(part, q, id, x, cc, (attn, moe), e);
            best = best.min(Part::booked(&e.booked, k));
        };
        match open {
            TpOrCp::Tp(values) => {
                // The other classes price alike under every transition (`reads_transition`).
                for &t in tried(super::tp::reads_transition(id), values) {
                    q.tp_sp_transition = t;
                    price(q, e);
                }
            }
            TpOrCp::Cp(values) => {
                for &c in values {
                    q.cp_comm = c;
                    price(q, e);
                }
            }
        }
        best
    }

    /// The EP part of class `id` per open (dispatcher, scheme) pair into `out` (their count
    /// returned): at paired share 0 and at 1 under each hiding form with EP overlap, the part
    /// unhidden without (module docs). The dispatcher also matters with `moe_tp > 1` at
    /// `ep = 1` (its buffer, a memory fact): there the values tried price alike.
    #[allow(clippy::too_many_arguments)]
    fn ep_options(
        &self,
        q: &mut Plan,
        id: ClassId,
        x: &Ctx,
        (cc, attn, moe): (&ComputeCost, &ComputeCost, &ComputeCost),
        e: &mut Emitter<'_, ()>,
        knobs: OpenKnobs<'_>,
        out: &mut [EpOption; EP_OPTIONS],
    ) -> usize {
        let k = CommPart::Ep.kind().index();
        let ctx = Context::new(q, true);
        let ds = tried(Knob::Dispatcher.matters(&ctx), knobs.dispatchers);
        let ss = tried(Knob::MoeTpScheme.matters(&ctx), knobs.schemes);
        let (sch0, v0) = (q.schedule, q.vpp);
        let mut n = 0;
        for &d in ds {
            for &s in ss {
                q.dispatcher = d;
                q.moe_tp_scheme = s;
                e.reset();
                let opt = if q.ep_overlap {
                    // The shared form (a schedule other than DualPipe, `ep_hide`) at share 1,
                    // booked beside it unhidden (share 0: every transfer whole) and under the
                    // partitioned form (`Emitter::other_forms`).
                    q.schedule = Schedule::OneF1B;
                    e.ep_paired = Some(1.0);
                    e.other_forms = Some([Booked::default(); 2]);
                    self.book_part(CommPart::Ep, q, id, x, cc, (attn, moe), e);
                    let [bare, partitioned] = e.other_forms.take().unwrap_or_default();
                    [
                        Part::booked(&bare, k),
                        Part::booked(&e.booked, k),
                        Part::booked(&partitioned, k),
                    ]
                } else {
                    e.ep_paired = None;
                    self.book_part(CommPart::Ep, q, id, x, cc, (attn, moe), e);
                    [Part::booked(&e.booked, k); 3]
                };
                if n < EP_OPTIONS {
                    out[n] = opt;
                    n += 1;
                } else {
                    let last = &mut out[EP_OPTIONS - 1];
                    for (l, o) in last.iter_mut().zip(opt) {
                        *l = l.min(o);
                    }
                }
            }
        }
        (q.schedule, q.vpp) = (sch0, v0);
        e.ep_paired = None;
        n
    }
}
