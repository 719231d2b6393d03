//! Two promises the search's bounds need of the cost model (docs/search.md): an overlap never
//! prices a plan slower than none (the floors take `tp_overlap` and `ep_overlap` on wherever
//! the space lists them), and a knob that cannot matter for a plan (`Knob::matters`: the
//! engine fixes its default there) changes neither its step time nor its memory. Each was
//! broken once, found by the search's oracle test: the TP overlap's tiled input-gradient
//! reduce-scatter, and the MoE dispatch buffers of a group of one.

use autoplan_cluster::{resolve_cluster, Cluster};
use autoplan_evaluate::{EvalOptions, Evaluator, Metrics};
use autoplan_graph::resolve_model;
use autoplan_plan::knob::{
    Context, Knob, Named, DISPATCHERS, MOE_TP_SCHEMES, SCHEDULES, TRANSITIONS,
};
use autoplan_plan::{Plan, Recompute, Zero};
use proptest::prelude::*;

/// 16 A100s on two nodes, with HBM enough that every plan's memory is priced, not refused.
fn cluster() -> Cluster {
    let mut c = resolve_cluster("a100x64").unwrap().with_gpus(16).unwrap();
    c.gpu.hbm_bytes = 1e15;
    c
}

fn plans() -> impl Strategy<Value = Plan> {
    (
        prop::sample::select(vec![1u32, 2, 4]),
        prop::sample::select(vec![1u32, 2]),
        prop::sample::select(vec![1u32, 2, 4, 8]),
        prop::sample::select(vec![1u32, 2]),
        prop::bool::ANY,
        prop::sample::select(vec![Recompute::None, Recompute::Selective, Recompute::Full]),
        prop::sample::select(vec![Zero::stage(0), Zero::stage(1), Zero::stage(3)]),
        prop::sample::select(vec![1u32, 2]),
    )
        .prop_map(|(tp, pp, ep, moe_tp, sp, recompute, zero, mbs)| Plan {
            tp,
            pp,
            sp,
            dp: 16 / (tp * pp),
            ep,
            moe_tp,
            recompute,
            zero,
            mbs,
            ..Plan::default()
        })
}

/// Time and memory of `plan`, or that it does not evaluate (the same for every variant).
fn run(ev: &Evaluator, plan: &Plan) -> Option<(f64, f64)> {
    ev.evaluate(plan)
        .ok()
        .map(|m: Metrics| (m.step_time_s, m.memory_peak_bytes))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn an_overlap_never_slows_a_plan(plan in plans(), moe in prop::bool::ANY) {
        let m = resolve_model(if moe { "mixtral-8x7b" } else { "llama3-8b" }).unwrap();
        let ev = Evaluator::new(&m, &cluster(), EvalOptions::default());
        for (on, off) in [
            (Plan { tp_overlap: true, ..plan }, Plan { tp_overlap: false, ..plan }),
            (Plan { ep_overlap: true, ..plan }, Plan { ep_overlap: false, ..plan }),
        ] {
            if let (Some(a), Some(b)) = (run(&ev, &on), run(&ev, &off)) {
                prop_assert!(a.0 <= b.0 * (1.0 + 1e-12), "`{on}` {} s > `{off}` {} s", a.0, b.0);
            }
        }
    }

    #[test]
    fn a_knob_that_does_not_matter_changes_nothing(
        plan in plans(),
        moe in prop::bool::ANY,
        cp in prop::sample::select(vec![1u32, 2]),
    ) {
        let m = resolve_model(if moe { "mixtral-8x7b" } else { "llama3-8b" }).unwrap();
        let plan = Plan { cp, dp: plan.dp / cp, ..plan };
        let ctx = Context::new(&plan, moe);
        let ev = Evaluator::new(&m, &cluster(), EvalOptions::default());
        fn names<T>(n: &[Named<T>]) -> Vec<&'static str> {
            n.iter().map(|v| v.name).collect()
        }
        let values: [(Knob, Vec<&str>); 9] = [
            (Knob::Sp, vec!["on", "off"]),
            (Knob::TpOverlap, vec!["on", "off"]),
            (Knob::EpOverlap, vec!["on", "off"]),
            (Knob::Dispatcher, names(DISPATCHERS.0)),
            (Knob::MoeTpScheme, names(MOE_TP_SCHEMES.0)),
            (Knob::Transition, names(TRANSITIONS.0)),
            (Knob::CpComm, vec!["ring", "all-gather", "all-to-all"]),
            (Knob::Schedule, names(SCHEDULES.0)),
            (Knob::Placement, vec!["contiguous", "balanced", "balanced:1"]),
        ];
        for (knob, vals) in values {
            if knob.matters(&ctx) {
                continue;
            }
            // A value the plan checks refuse there (e.g. `ep_overlap=on` without EP) is never
            // enumerated; every value that evaluates costs the same.
            let each: Vec<(f64, f64)> = vals
                .iter()
                .filter_map(|v| {
                    let mut q = plan;
                    knob.parse_into(&mut q, v).expect("a value of the knob");
                    run(&ev, &q)
                })
                .collect();
            prop_assert!(each.iter().all(|r| *r == each[0]), "{} of `{plan}`: {each:?}", knob.key());
        }
    }
}
