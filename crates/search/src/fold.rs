//! Ties and near-ties of a ranking: the rows a person reads should be real alternatives.
//!
//! - **Ties** (step times equal within [`TIE`], relative): the plan with the fewest knobs away
//!   from the framework's defaults ranks first ([`deviations`]: [`Plan::default`] is
//!   Megatron-Core's default run — rank order tp-cp-dp-pp, 1F1B, the row-parallel TP→SP
//!   transition, the group-wise all-to-all `moe_tp` scheme, contiguous experts, no overlap), then
//!   the search's canonical order. So of the two `moe_tp` schemes, which always tie, the one
//!   Megatron runs comes first.
//! - **Near-ties**: a plan with the same "shape" as a row above it — tp, pp, ep, moe_tp, the
//!   micro-batch size, the recompute mode and modules and the sharding mode (`shape`) — and a
//!   step time within `tolerance` of that row's is folded under it as a variant (it differs
//!   only in the cp/dp split, the schedule and vpp, the rank order or communication knobs).

use autoplan_plan::knob::{Context, Knob};
use autoplan_plan::Plan;

use crate::Ranked;

/// Relative difference below which two step times tie.
pub const TIE: f64 = 1e-9;

/// The default fold tolerance (`search --fold`): 1% of the step time, finer than the cost
/// model's accuracy on measured runs (`autoplan validate`).
pub const DEFAULT_FOLD_TOLERANCE: f64 = 0.01;

/// One row of a folded ranking: indices into the ranked plans.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub head: usize,
    /// Plans within the tolerance of `head` with its shape, best first.
    pub variants: Vec<usize>,
}

/// The knobs (beyond the degrees and micro-batch size) where `plan` differs from
/// [`Plan::default`], counting only the knobs that matter for it.
pub fn deviations(plan: &Plan, moe: bool) -> usize {
    let ctx = Context::new(plan, moe);
    let d = Plan::default();
    Knob::ALL
        .iter()
        .filter(|k| {
            !matches!(
                k,
                Knob::Tp | Knob::Cp | Knob::Dp | Knob::Pp | Knob::Ep | Knob::MoeTp | Knob::Mbs
            )
        })
        .filter(|k| k.matters(&ctx) && !k.same(plan, &d))
        .count()
}

/// What a variant must share with its row.
fn shape(p: &Plan) -> impl PartialEq {
    (
        (p.tp, p.pp, p.ep, p.moe_tp, p.mbs),
        (p.recompute, p.recompute_modules, p.recompute_layers),
        p.zero,
    )
}

/// The ranking in tie-broken order, folded into rows (module docs). `tolerance` 0 folds
/// nothing (every plan is a row; ties still broken). `moe`: the model has routed experts.
pub fn fold<M>(plans: &[Ranked<M>], tolerance: f64, moe: bool) -> Vec<Row> {
    let order = tie_order(plans, moe);
    let mut rows: Vec<Row> = Vec::new();
    for i in order {
        let p = &plans[i];
        let host = (tolerance > 0.0)
            .then(|| {
                rows.iter_mut().find(|r| {
                    let h = &plans[r.head];
                    shape(&h.plan) == shape(&p.plan)
                        && p.step_time_s <= h.step_time_s * (1.0 + tolerance)
                })
            })
            .flatten();
        match host {
            Some(r) => r.variants.push(i),
            None => rows.push(Row {
                head: i,
                variants: Vec::new(),
            }),
        }
    }
    rows
}

/// The indices of `plans` (sorted by step time, then the search's key) with each run of ties
/// reordered by [`deviations`] (stable).
fn tie_order<M>(plans: &[Ranked<M>], moe: bool) -> Vec<usize> {
    let mut out = Vec::with_capacity(plans.len());
    let mut i = 0;
    while i < plans.len() {
        let t0 = plans[i].step_time_s;
        let mut j = i + 1;
        while j < plans.len() && plans[j].step_time_s <= t0 + t0.abs() * TIE {
            j += 1;
        }
        let mut run: Vec<usize> = (i..j).collect();
        run.sort_by_key(|&k| deviations(&plans[k].plan, moe));
        out.extend(run);
        i = j;
    }
    out
}

/// The `key=value` items of `variant` that differ from `head` (what the fold hides).
pub fn difference(head: &Plan, variant: &Plan) -> String {
    Knob::ALL
        .iter()
        .filter(|k| !k.same(head, variant))
        .map(|k| format!("{}={}", k.key(), k.value(variant)))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoplan_plan::{MoeTpScheme, RankOrder, Schedule};

    fn ranked(plan: Plan, t: f64, key: u128) -> Ranked<()> {
        Ranked {
            plan,
            key,
            metrics: (),
            step_time_s: t,
        }
    }

    #[test]
    fn ties_prefer_the_default_moe_tp_scheme() {
        let base = Plan {
            tp: 2,
            sp: true,
            dp: 4,
            ep: 4,
            moe_tp: 2,
            ..Plan::default()
        };
        let sg = Plan {
            moe_tp_scheme: MoeTpScheme::ScatterGather,
            ..base
        };
        // The search's canonical order puts scatter-gather first; the tie rule does not.
        let plans = [ranked(sg, 1.0, 0), ranked(base, 1.0, 1)];
        let rows = fold(&plans, 0.0, true);
        assert_eq!(rows[0].head, 1);
        assert_eq!(rows.len(), 2);
        // Not a tie: the faster plan stays first.
        let plans = [ranked(sg, 1.0, 0), ranked(base, 1.0 + 1e-6, 1)];
        assert_eq!(fold(&plans, 0.0, true)[0].head, 0);
    }

    #[test]
    fn near_ties_of_one_shape_fold_and_others_do_not() {
        let a = Plan {
            tp: 2,
            sp: true,
            pp: 4,
            dp: 8,
            schedule: Schedule::Interleaved,
            vpp: 2,
            ..Plan::default()
        };
        let order = Plan {
            order: "tp-cp-pp-dp".parse::<RankOrder>().unwrap(),
            ..a
        };
        let cp = Plan { cp: 2, dp: 4, ..a };
        let other = Plan { mbs: 2, ..a };
        let plans = [
            ranked(a, 10.0, 0),
            ranked(order, 10.05, 1),
            ranked(other, 10.06, 2),
            ranked(cp, 10.09, 3),
            ranked(cp, 10.2, 4),
        ];
        let rows = fold(&plans, 0.01, false);
        assert_eq!(rows.len(), 3, "{rows:?}");
        assert_eq!(
            rows[0],
            Row {
                head: 0,
                variants: vec![1, 3]
            }
        );
        assert_eq!(rows[1].head, 2);
        assert_eq!(rows[2].head, 4, "beyond 1% of the row: its own row");
        assert_eq!(difference(&a, &cp), "cp=2,dp=4");
        assert_eq!(fold(&plans, 0.0, false).len(), 5);
    }
}
