//! One micro-batch of each class on one GPU: its compute ([`super::compute`]) and the exposed
//! time of its communication parts (TP, CP, EP), booked part by part. `run` books every part
//! under the plan's knobs; the step floor books each part under every open value of its knob
//! and keeps the least.

use std::cell::RefCell;

use autoplan_plan::{Plan, Recompute, StageLayout};

use super::classes::{Class, ClassId, NCLASS};
use super::compute::ComputeCost;
use super::ctx::{cached, Ctx, PlanKey, Slots};
use super::emit::Emitter;
use super::memo::Memo;
use super::recompute::rc_frac;
use super::Evaluator;
use crate::comm::{CommKind, Sink};

/// Costs of one class for one micro-batch on one GPU.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ClassCost {
    pub(super) fwd: f64,
    pub(super) bwd: f64,
    /// Full recompute of one block: the forward again (+ its communication, in `rc_comm`).
    pub(super) rc_full: f64,
    /// Exposed forward communication per kind that recompute runs again (the kinds of
    /// [`Evaluator::recompute_comm`]; the floor collects every kind).
    pub(super) rc_comm: [f64; 5],
    /// Selective recompute: the plan's modules again ([`Evaluator::price_selective`]); the
    /// attention core until then.
    pub(super) rc_sel: f64,
    /// Exposed communication per kind (no recompute).
    pub(super) exposed: [f64; 5],
    /// Scale-out network seconds beside the forward and backward compute (`Emitter::net`).
    pub(super) net: [f64; 2],
}

impl ClassCost {
    /// The class's compute with the exposed communication `exposed` (and `rc_comm` that
    /// recompute repeats).
    #[inline]
    pub(super) fn new(
        c: &ComputeCost,
        exposed: [f64; 5],
        rc_comm: [f64; 5],
        net: [f64; 2],
    ) -> ClassCost {
        ClassCost {
            fwd: c.fwd,
            bwd: c.bwd,
            rc_full: c.rc_full,
            rc_sel: c.core,
            rc_comm,
            exposed,
            net,
        }
    }
}

/// The communication parts of a class, each moving one kind of exposure and read by its own
/// knobs: TP (the TP→SP transition), CP (the CP exchange), EP (dispatcher, `moe_tp` scheme).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CommPart {
    Tp,
    Cp,
    Ep,
}

impl CommPart {
    /// In booking order.
    pub(super) const ALL: [CommPart; 3] = [CommPart::Tp, CommPart::Cp, CommPart::Ep];

    /// The kind of exposure the part moves.
    #[inline]
    pub(super) fn kind(self) -> CommKind {
        match self {
            CommPart::Tp => CommKind::Tp,
            CommPart::Cp => CommKind::Cp,
            CommPart::Ep => CommKind::Ep,
        }
    }

    /// Class `id` (`c`) has this part: TP every class, CP the attention (and MTP module's),
    /// EP the MoE layer (and a MoE MTP module's).
    #[inline]
    pub(super) fn applies(self, id: ClassId, c: &Class) -> bool {
        match self {
            CommPart::Tp => true,
            CommPart::Cp => matches!(id, ClassId::Attn | ClassId::Mtp),
            CommPart::Ep => matches!(id, ClassId::Moe | ClassId::Mtp) && c.ep_elems > 0.0,
        }
    }
}

impl Evaluator {
    /// Books part `part` of class `id` under `plan`'s knobs into `e`: `cc` is the class's
    /// compute, `attn` and `moe` the attention and MoE classes' (what CP and EP collectives
    /// hide behind).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(super) fn book_part<S: Sink>(
        &self,
        part: CommPart,
        plan: &Plan,
        id: ClassId,
        x: &Ctx,
        cc: &ComputeCost,
        (attn, moe): (&ComputeCost, &ComputeCost),
        e: &mut Emitter<'_, S>,
    ) {
        if !part.applies(id, &self.classes[id as usize]) {
            return;
        }
        let c = &self.classes[id as usize];
        match part {
            CommPart::Tp => self.tp_comm(plan, c, id, x, cc, e),
            CommPart::Cp => self.cp_comm(plan, c, x, e, attn.core, attn.core_bwd),
            CommPart::Ep => {
                // An MTP module's MoE layer is a MoE block's (`class_compute`): its window is
                // the MoE class's, not the module's projection and head.
                let m = if id == ClassId::Mtp { moe } else { cc };
                let windows = super::ep_overlap::EpWindows {
                    attn_fwd: attn.fwd,
                    attn_bwd: attn.bwd,
                    moe_fwd: m.fwd,
                    moe_bwd: m.bwd,
                };
                self.ep_comm(plan, x, e, windows)
            }
        }
    }

    /// [`Evaluator::class_costs`] without a table, kept per thread and keyed by the plan as
    /// the costs read it ([`class_view`]): the plans of a search that differ only in their
    /// sharding, offloads or block split (the walk's ZeRO level, every leaf under it) price
    /// them once.
    pub(super) fn class_costs_cached(&self, plan: &Plan, x: &Ctx) -> [ClassCost; NCLASS] {
        let key = PlanKey {
            evaluator: self.cache_id,
            plan: class_view(plan),
        };
        cached(&CLASS_CACHE, key.slot(CLASS_CACHE_BITS), key, || {
            self.class_costs(plan, x, &mut (), 0.0, 0)
        })
    }

    /// Per-class costs for one micro-batch, pushing the inventory rows into `sink` with
    /// `calls_per_mb × mult` calls per step (mult = micro-batches × blocks on the stage
    /// `bottleneck`).
    pub(super) fn class_costs<S: Sink>(
        &self,
        plan: &Plan,
        x: &Ctx,
        sink: &mut S,
        micro: f64,
        bottleneck: u32,
    ) -> [ClassCost; NCLASS] {
        let (counts, rc_frac) = if S::ENABLED {
            self.table_counts(plan, bottleneck)
        } else {
            ([0.0; NCLASS], 0.0)
        };
        let compute = self.class_compute(x);
        let attn = compute[ClassId::Attn as usize];
        let moe = compute[ClassId::Moe as usize];
        let mut out = [ClassCost::default(); NCLASS];
        let mut memo = Memo::default();
        for id in ClassId::ALL {
            if !self.has_class(id) {
                continue;
            }
            let i = id as usize;
            let mult = counts[i] * micro;
            let rc_kinds = Self::recompute_comm(plan, id);
            let layer = self.classes[i].kind;
            let mut e = Emitter::new(
                self,
                x,
                sink,
                &mut memo,
                layer,
                mult,
                mult * rc_frac,
                rc_kinds,
            );
            for part in CommPart::ALL {
                self.book_part(part, plan, id, x, &compute[i], (&attn, &moe), &mut e);
            }
            let b = e.booked;
            out[i] = ClassCost::new(&compute[i], b.exposed, b.rc, b.net);
        }
        if plan.recompute == Recompute::Selective {
            self.price_selective(plan.recompute_modules, x, &mut out);
        }
        out
    }

    /// The per-class layer counts of stage `bottleneck` (the table's multiplicities) and the
    /// share of its blocks recompute covers.
    pub(super) fn table_counts(&self, plan: &Plan, bottleneck: u32) -> ([f64; NCLASS], f64) {
        let layout = self.layout(plan).unwrap_or(StageLayout {
            pp: 1,
            vpp: 1,
            first: self.blocks,
            last: self.blocks,
            middle: 0,
            middle_extra: 0,
            split: autoplan_plan::PipelineSplit::Blocks,
        });
        let s = self.stage_blocks(&layout, bottleneck, layout.first_block(bottleneck));
        let first = bottleneck == 0;
        let last = bottleneck + 1 == plan.pp.max(1);
        let mut counts = self.class_counts(first, last, s);
        if super::dualpipe::paired(plan, plan.pp) {
            // A DualPipe rank runs half the micro-batches through each of its two stages.
            let j = plan.pp - 1 - bottleneck;
            let m = self.stage_blocks(&layout, j, layout.first_block(j));
            let mirror = self.class_counts(j == 0, j + 1 == plan.pp, m);
            for (c, o) in counts.iter_mut().zip(mirror) {
                *c = 0.5 * (*c + o);
            }
        }
        (counts, rc_frac(plan, s.0))
    }
}

/// `plan` with the knobs the class costs do not read at `Plan::default()`'s values: the
/// sharding stage, the three offloads and the pipeline's block split move the DP reduction,
/// the optimizer step, the host transfers and the stage layout, all priced after the class
/// costs (`step.rs`), never a class's compute or communication (the layout only picks the
/// table's layer counts, which a disabled sink does not ask for). The schedule and `vpp`
/// reach them only through the EP transfers' hiding (`ep_overlap.rs`, `paired_share`), so
/// they are set aside too without `ep_overlap`. `view_tests.rs` checks it on a grid of plans.
pub(super) fn class_view(plan: &Plan) -> Plan {
    let d = Plan::default();
    let (schedule, vpp) = if plan.ep_overlap {
        (plan.schedule, plan.vpp)
    } else {
        (d.schedule, d.vpp)
    };
    Plan {
        schedule,
        vpp,
        zero: d.zero,
        offload_optimizer: d.offload_optimizer,
        offload_params: d.offload_params,
        offload_activations: d.offload_activations,
        first_stage_layers: d.first_stage_layers,
        last_stage_layers: d.last_stage_layers,
        pipeline_split: d.pipeline_split,
        ..*plan
    }
}

/// log2 of the class-cost cache's slots: a task's walk revisits every (recompute, schedule,
/// leaf) combination once per sharding mode.
const CLASS_CACHE_BITS: u32 = 8;

thread_local! {
    /// Class costs priced on this thread (exact keys: a hit is what pricing again gives, bit
    /// for bit).
    static CLASS_CACHE: Slots<PlanKey, [ClassCost; NCLASS], { 1 << CLASS_CACHE_BITS }> =
        const { [const { RefCell::new(None) }; 1 << CLASS_CACHE_BITS] };
}
