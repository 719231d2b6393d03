//! When a knob matters: the relevance rule the search collapses irrelevant knobs by, and the
//! knobs that apply to MoE models only (the plan check's rule for dense models).

use super::Knob;
use crate::{Dim, Plan, RankOrder, Schedule};

/// What the relevance rules read: the plan's degrees and schedule, and whether the model has
/// routed experts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Context {
    pub tp: u32,
    pub cp: u32,
    pub dp: u32,
    pub pp: u32,
    pub ep: u32,
    pub moe_tp: u32,
    pub schedule: Schedule,
    /// The model has MoE layers.
    pub moe: bool,
}

impl Context {
    /// The context of `plan` for a model with (`moe`) or without routed experts.
    pub fn new(plan: &Plan, moe: bool) -> Context {
        Context {
            tp: plan.tp,
            cp: plan.cp,
            dp: plan.dp,
            pp: plan.pp,
            ep: plan.ep,
            moe_tp: plan.moe_tp,
            schedule: plan.schedule,
            moe,
        }
    }

    /// Expert-data-parallel degree under parallel folding ([`Plan::edp`]).
    pub fn edp(&self) -> u32 {
        self.tp * self.cp * self.dp / (self.ep * self.moe_tp).max(1)
    }

    /// Grid sizes per [`Dim`] (Tp, Cp, Dp, Pp): the dense grid, and the folded MoE grid
    /// (`moe_tp`, `ep`, `edp` in place of `tp`, `cp`, `dp`).
    fn grids(&self) -> ([u32; 4], [u32; 4]) {
        (
            [self.tp, self.cp, self.dp, self.pp],
            [self.moe_tp, self.ep, self.edp(), self.pp],
        )
    }

    /// The rank order with the dims of size 1 in both the dense and the folded MoE grid
    /// dropped: orders with the same class place every group alike, so only the first of
    /// each class matters.
    pub fn order_class(&self, order: &RankOrder) -> [Option<Dim>; 4] {
        let (dense, folded) = self.grids();
        let mut k = [None; 4];
        let mut j = 0;
        for &dim in &order.0 {
            let i = dim as usize;
            if dense[i] > 1 || folded[i] > 1 {
                k[j] = Some(dim);
                j += 1;
            }
        }
        k
    }
}

impl Knob {
    /// Whether the knob can change a plan's numbers (step time or memory) in `ctx`. Where it
    /// cannot, the search fixes it to [`Plan::default`]'s value, so the ranking holds no two
    /// plans that differ only in it. The rank order always matters but collapses by
    /// [`Context::order_class`].
    pub fn matters(self, ctx: &Context) -> bool {
        let moe = ctx.moe;
        match self {
            Knob::Tp
            | Knob::Cp
            | Knob::Dp
            | Knob::Pp
            | Knob::Mbs
            | Knob::Recompute
            | Knob::RecomputeLayers
            | Knob::Algo
            | Knob::Order
            // Offload moves optimizer state, parameters or activations to the host whatever
            // the degrees.
            | Knob::OffloadOptimizer
            | Knob::OffloadParams
            | Knob::OffloadActivations => true,
            // A dense model has no expert degrees.
            Knob::Ep | Knob::MoeTp => moe,
            // Sequence parallelism, the TP→SP transition and TP overlap shard or move TP
            // traffic: nothing without TP.
            Knob::Sp | Knob::Transition | Knob::TpOverlap => ctx.tp > 1,
            Knob::CpComm => ctx.cp > 1,
            // ZeRO, FSDP and HSDP shard over the data-parallel ranks (dense `dp·cp`, experts
            // `edp`); a shard group that does not fit is `Plan::check`'s.
            Knob::Zero => ctx.dp * ctx.cp > 1 || ctx.edp() > 1,
            Knob::Schedule
            | Knob::FirstStageLayers
            | Knob::LastStageLayers
            | Knob::PipelineSplit => ctx.pp > 1,
            Knob::Vpp => ctx.pp > 1 && ctx.schedule == Schedule::Interleaved,
            Knob::MoeTpScheme => moe && ctx.moe_tp > 1,
            // The EP overlap also hides the `moe_tp` collectives (autoplan-evaluate's
            // `ep_comm`); the dispatcher's buffer grows with `ep·moe_tp` (autoplan-memory).
            Knob::Dispatcher | Knob::EpOverlap => moe && ctx.ep * ctx.moe_tp > 1,
            // Placement moves experts between EP ranks.
            Knob::Placement => moe && ctx.ep > 1,
        }
    }

    /// Whether the knob applies to MoE models only: it cannot matter for a dense model
    /// whatever the plan's degrees and schedule, and can for a model with experts
    /// ([`Self::matters`] with every degree > 1 and the interleaved schedule, dense and MoE):
    /// `ep`, `moe_tp`, `moe_tp_scheme`, `dispatcher`, `ep_overlap`, `placement`.
    pub fn moe_only(self) -> bool {
        Self::moe_only_knobs().contains(&self)
    }

    /// The [`Self::moe_only`] knobs, worked out once.
    pub fn moe_only_knobs() -> &'static [Knob] {
        static MOE_ONLY: std::sync::LazyLock<Vec<Knob>> = std::sync::LazyLock::new(|| {
            Knob::ALL
                .into_iter()
                .filter(|k| k.moe_only_by_matters())
                .collect()
        });
        &MOE_ONLY
    }

    /// [`Self::moe_only`] from [`Self::matters`].
    fn moe_only_by_matters(self) -> bool {
        let every = |moe| Context {
            tp: 2,
            cp: 2,
            dp: 2,
            pp: 2,
            ep: 2,
            moe_tp: 2,
            schedule: Schedule::Interleaved,
            moe,
        };
        !self.matters(&every(false)) && self.matters(&every(true))
    }
}
