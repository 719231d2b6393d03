//! DualPipe's ranks (DeepSeek-V3 report §3.2.1, Figure 5; deepseek-ai/DualPipe `dualpipe.py`):
//! rank `i` holds stage `i` of the forward direction and stage `pp − 1 − i` of the reverse one,
//! and half the micro-batches enter from each end, so every rank runs `m/2` micro-batches
//! through each of its two stages. Its steady-state time per micro-batch is the mean of its
//! two stages' times, and the embedding's light first stage shares a rank with the head's
//! heavy last one: that pairing is DualPipe's balance, which a per-stage maximum (1F1B's pace)
//! does not see. The memory side holds both stages per rank already (`autoplan_memory`,
//! `stage.rs`).

use autoplan_plan::{Plan, Schedule, StageLayout};

use super::classes::NCLASS;
use super::costs::ClassCost;
use super::ctx::Ctx;
use super::pipeline::{StageScan, StageTime, Stages};
use super::Evaluator;

/// Rank `i`'s time per micro-batch from its two stages `a` (stage `i`) and `b` (`pp − 1 − i`):
/// times are the mean (m/2 micro-batches through each); the parameters the sum (it holds
/// both, for the DP reduction and optimizer); blocks and their mix are stage `a`'s (the
/// per-stage recompute share and the report's stage).
fn pair(a: &StageTime, b: &StageTime) -> StageTime {
    let mut exposed = [0.0; 5];
    for (k, e) in exposed.iter_mut().enumerate() {
        *e = 0.5 * (a.exposed[k] + b.exposed[k]);
    }
    StageTime {
        t: 0.5 * (a.t + b.t),
        compute: 0.5 * (a.compute + b.compute),
        recompute: 0.5 * (a.recompute + b.recompute),
        exposed,
        blocks: a.blocks,
        dense: a.dense,
        moe: a.moe,
        params_dense: a.params_dense + b.params_dense,
        params_expert: a.params_expert + b.params_expert,
        fwd: 0.5 * (a.fwd + b.fwd),
        bwd: 0.5 * (a.bwd + b.bwd),
        net_fwd: 0.5 * (a.net_fwd + b.net_fwd),
        net_bwd: 0.5 * (a.net_bwd + b.net_bwd),
    }
}

/// Whether `plan` runs DualPipe's paired ranks (an even `pp ≥ 2`, `Plan::check`).
#[inline]
pub(super) fn paired(plan: &Plan, pp: u32) -> bool {
    plan.schedule == Schedule::DualPipe && pp >= 2 && pp.is_multiple_of(2)
}

impl Evaluator {
    /// `scan` (the stages of a DualPipe plan) with its pace, bottleneck and largest-parameter
    /// holder taken over the `pp/2` ranks instead of the stages; `sum` (the stage times of one
    /// micro-batch, the bubble's base) is unchanged. Pairs of middle stages with the same
    /// block mix as the previous pair reuse its time, and the stages `seen` (the scan's) are
    /// not priced again.
    pub(super) fn dualpipe_ranks(
        &self,
        plan: &Plan,
        x: &Ctx,
        costs: &[ClassCost; NCLASS],
        layout: &StageLayout,
        pp_t: f64,
        (scan, seen): (StageScan, &Stages),
    ) -> StageScan {
        let pp = x.pp;
        let mut out = StageScan {
            sum: scan.sum,
            ..StageScan::default()
        };
        let (mut lo_start, mut hi_end) = (0, layout.total());
        // The rank last paired and its block mixes (the next rank with the same mixes reuses
        // it in place, as the scan does its stages).
        let mut r = StageTime::default();
        let mut mix: Option<(u32, u32, u32, u32)> = None;
        for i in 0..pp / 2 {
            let j = pp - 1 - i;
            let hi_start = hi_end - layout.blocks(j);
            let (nl, dl, _) = self.stage_blocks(layout, i, lo_start);
            let (nh, dh, _) = self.stage_blocks(layout, j, hi_start);
            let middle = i > 0;
            if !(middle && mix == Some((nl, dl, nh, dh))) {
                // The scan priced these stages already (`Stages`: the same inputs).
                let stage = |k: u32, start: u32, (n, d): (u32, u32)| {
                    seen.get(Stages::key(k, pp, n, d))
                        .unwrap_or_else(|| self.stage(plan, x, costs, layout, k, start, pp_t))
                };
                r = pair(&stage(i, lo_start, (nl, dl)), &stage(j, hi_start, (nh, dh)));
            }
            mix = middle.then_some((nl, dl, nh, dh));
            lo_start += nl;
            hi_end = hi_start;
            if r.t > out.tmax {
                out.tmax = r.t;
                out.bottleneck = r;
                out.bi = i;
            }
            if r.params_dense + r.params_expert > out.pmax.params_dense + out.pmax.params_expert {
                out.pmax = r;
            }
        }
        out
    }
}
