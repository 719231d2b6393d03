//! The bounds of `Scorer` (the real cost model) are admissible, and its branch-and-bound
//! agrees with exhaustive enumeration on small bundled cases, for 1 and 3 threads.

use autoplan_cost::calibration::{dgx_a100, dgx_h100};
use autoplan_evaluate::EvalOptions;
use autoplan_graph::resolve_model;
use autoplan_plan::Plan;
use autoplan_search::{
    resolve_space, search, Depth, Objective, Partial, Reject, Scorer, SearchOptions, Space,
};
use proptest::prelude::*;

mod common;
use common::random_plan;

fn scorer(model: &str, nodes: u32, hopper: bool) -> Scorer {
    let m = resolve_model(model).expect("bundled model");
    let c = if hopper {
        dgx_h100(nodes)
    } else {
        dgx_a100(nodes)
    };
    Scorer::new(&m, &c, EvalOptions::default())
}

fn keys_and_times(s: &Scorer, space: &Space, exhaustive: bool, threads: usize) -> Vec<String> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    let o = pool.install(|| {
        search(
            s,
            space,
            &SearchOptions {
                top_k: 8,
                exhaustive,
            },
            &(),
        )
    });
    o.plans
        .iter()
        .map(|r| format!("{} {} {:?}", r.key, r.plan, r.metrics))
        .collect()
}

#[test]
fn bnb_equals_exhaustive_on_bundled_models() {
    for (model, nodes, hopper, space) in [
        ("gpt2-1b", 2, false, "dense"),
        ("mixtral-8x7b", 2, true, "quick"),
        // Sliding-window attention on every other block.
        ("gpt-oss-120b", 8, true, "quick"),
    ] {
        let s = scorer(model, nodes, hopper);
        let space = resolve_space(space).unwrap();
        // Megatron-Core's recompute module sets too (the MLA one is dropped for both models).
        let space = if model == "mixtral-8x7b" {
            common::with_module_sets(space)
        } else {
            space
        };
        let exact = keys_and_times(&s, &space, true, 1);
        assert!(!exact.is_empty(), "{model}: nothing fits");
        assert_eq!(exact, keys_and_times(&s, &space, false, 1), "{model}");
        assert_eq!(exact, keys_and_times(&s, &space, false, 3), "{model}");
    }
}

/// `plan` cut down to `depth`: every decision below it back at the space's first value.
fn partial(plan: &Plan, space: &Space, depth: Depth) -> Plan {
    common::partial(plan, &common::first_leaves(plan, space), space, depth)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// bound(partial) ≤ evaluate(plan) in time and memory, at every depth above the plan, for
    /// random plans of the default space (with SP and TP overlap both ways).
    #[test]
    fn bounds_are_admissible(case in 0usize..4, ix in prop::collection::vec(any::<prop::sample::Index>(), 19)) {
        let (model, nodes, hopper) = [("gpt2-1b", 2, false), ("llama3-8b", 2, true), ("mixtral-8x7b", 2, true), ("gpt-oss-120b", 8, true)][case];
        let s = scorer(model, nodes, hopper);
        let mut space = common::with_module_sets(resolve_space("default").unwrap());
        space.sp = vec![false, true];
        space.tp_overlap = vec![false, true];
        space.ep_overlap = vec![false, true];
        let plan = random_plan(&s.exact, &space, &ix);
        prop_assume!(plan.is_some());
        let mut plan = plan.unwrap();
        // The engine's canonical form: no dispatcher choice without dispatch.
        if plan.ep * plan.moe_tp == 1 {
            plan.dispatcher = Plan::default().dispatcher;
        }
        let m = match Objective::evaluate(&s, &plan) {
            Ok(m) => (m.step_time_s, m.memory_peak_bytes),
            Err(Reject::OutOfMemory { peak_bytes, .. }) => (f64::INFINITY, peak_bytes),
            Err(Reject::Invalid) => return Ok(()),
        };
        for depth in [Depth::MicroBatch, Depth::Recompute, Depth::Zero, Depth::Schedule] {
            let b = s.bound(&Partial { plan: partial(&plan, &space, depth), depth, space: &space, threshold: f64::INFINITY });
            prop_assert!(b.step_time_s <= m.0 * (1.0 + 1e-12), "{:?}: {} > {} for {}", depth, b.step_time_s, m.0, plan);
            prop_assert!(b.memory_bytes <= m.1 * (1.0 + 1e-12), "{:?}: memory {} > {} for {}", depth, b.memory_bytes, m.1, plan);
        }
    }
}

#[test]
fn ep_overlap_is_searched_where_only_moe_tp_moves_tokens() {
    // ep = 1, moe_tp = 2: no all-to-all, but the moe_tp collectives hide behind compute under
    // the EP overlap (autoplan-evaluate's `ep_comm`), so both values are plans of the space.
    let s = scorer("mixtral-8x7b", 4, true);
    let mut space = resolve_space("moe").unwrap();
    space
        .fix("tp=2,pp=1,ep=1,moe_tp=2,cp=1,mbs=1,recompute=full,zero=3")
        .unwrap();
    space.ep_overlap = vec![false, true];
    let o = search(
        &s,
        &space,
        &SearchOptions {
            top_k: 10_000,
            exhaustive: true,
        },
        &(),
    );
    assert!(!o.plans.is_empty(), "{:?}", o.no_fit);
    assert!(
        o.plans.iter().any(|r| r.plan.ep_overlap),
        "{}",
        o.plans.len()
    );
    assert!(o.plans.iter().any(|r| !r.plan.ep_overlap));
    let best = |on: bool| {
        o.plans
            .iter()
            .filter(|r| r.plan.ep_overlap == on)
            .map(|r| r.metrics.step_time_s)
            .fold(f64::INFINITY, f64::min)
    };
    assert!(
        best(true) < best(false),
        "{} vs {}",
        best(true),
        best(false)
    );
}
