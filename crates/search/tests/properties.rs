//! Properties of the branch-and-bound on random small models, clusters and spaces (synthetic
//! objective): it agrees with exhaustive enumeration, does not depend on the thread count,
//! is monotone in the constraints and the memory, and returns plans that re-evaluate to the
//! same numbers and fit.

use autoplan_plan::{
    AlgoMode, CpComm, Dim, Dispatcher, MoeTpScheme, PlacementPolicy, RankOrder, Recompute,
    Schedule, TpSpTransition, Zero,
};
use autoplan_search::space::Constraints;
use autoplan_search::testing::Synthetic;
use autoplan_search::{search, Objective, Outcome, SearchOptions, Shape, Space};
use proptest::prelude::*;

fn subset<T: Clone + std::fmt::Debug + 'static>(all: Vec<T>) -> impl Strategy<Value = Vec<T>> {
    let n = all.len();
    proptest::sample::subsequence(all, 1..=n)
}

fn space() -> impl Strategy<Value = Space> {
    (
        (
            subset(vec![1u32, 2, 4, 8]),
            subset(vec![1u32, 2, 4, 8]),
            subset(vec![1u32, 2, 4]),
            subset(vec![1u32, 2, 4, 8]),
            subset(vec![1u32, 2]),
            subset(vec![1u32, 2, 4]),
        ),
        (
            subset(vec![Recompute::None, Recompute::Selective, Recompute::Full]),
            subset(vec![
                Zero::stage(0),
                Zero::stage(1),
                Zero::stage(2),
                Zero::stage(3),
            ]),
            subset(vec![
                Schedule::OneF1B,
                Schedule::Interleaved,
                Schedule::ZeroBubble,
                Schedule::DualPipe,
            ]),
            subset(vec![2u32, 4]),
            subset(vec![false, true]),
            subset(vec![CpComm::Ring, CpComm::AllToAll]),
        ),
        (
            subset(vec![
                TpSpTransition::AllReduceSlice,
                TpSpTransition::AllToAll,
            ]),
            subset(vec![MoeTpScheme::ScatterGather, MoeTpScheme::GroupAllToAll]),
            subset(vec![Dispatcher::AllToAll, Dispatcher::AllGather]),
            subset(vec![
                RankOrder([Dim::Tp, Dim::Cp, Dim::Dp, Dim::Pp]),
                RankOrder([Dim::Tp, Dim::Dp, Dim::Cp, Dim::Pp]),
                RankOrder([Dim::Pp, Dim::Tp, Dim::Cp, Dim::Dp]),
            ]),
            subset(vec![false, true]),
            (any::<bool>(), proptest::option::of(1u32..8)),
        ),
    )
        .prop_map(
            |(
                (tp, pp, cp, ep, moe_tp, mbs),
                (rc, zero, sch, vpp, sp, cpc),
                (tpsp, mts, disp, order, ov, (tin, maxpp)),
            )| Space {
                description: String::new(),
                tp,
                pp,
                cp,
                ep,
                moe_tp,
                dp: None,
                mbs,
                recompute: rc
                    .into_iter()
                    .map(|r| (r, autoplan_plan::RecomputeModules::DEFAULT))
                    .collect(),
                zero,
                schedule: sch,
                vpp,
                sp,
                cp_comm: cpc,
                tp_sp_transition: tpsp,
                moe_tp_scheme: mts,
                dispatcher: disp,
                algo: vec![AlgoMode::Cheapest],
                order,
                tp_overlap: ov.clone(),
                ep_overlap: ov,
                placement: vec![PlacementPolicy::Contiguous],
                offload_optimizer: vec![0],
                offload_params: vec![false],
                offload_activations: vec![0],
                constraints: Constraints {
                    tp_within_node: tin,
                    max_pp: maxpp,
                    ..Constraints::default()
                },
            },
        )
}

fn objective() -> impl Strategy<Value = Synthetic> {
    (
        prop::sample::select(vec![8u32, 16, 32]),
        prop::sample::select(vec![2u32, 4, 8]),
        prop::sample::select(vec![4u32, 8, 12]),
        2u32..10,
        prop::sample::select(vec![0u32, 4, 8]),
        prop::sample::select(vec![8u32, 16, 64]),
        10.0f64..80.0,
        prop::sample::select(vec![0.0, 1e-3, 0.05]),
    )
        .prop_map(|(gpus, gpn, heads, layers, experts, batch, hbm, quantum)| {
            let mut s = Synthetic::example();
            s.shape = Shape {
                gpus,
                gpus_per_node: gpn,
                heads,
                layers,
                experts,
                global_batch: batch,
                hbm_bytes: hbm * 1e9,
            };
            if experts == 0 {
                s.expert_params = 0.0;
            }
            s.quantum = quantum;
            s
        })
}

/// Everything that must be identical: the ranking, keys, plans and numbers.
fn ranking<M: Copy + std::fmt::Debug>(o: &Outcome<M>) -> Vec<String> {
    o.plans
        .iter()
        .map(|r| format!("{} {:?} {:?} {}", r.key, r.plan, r.metrics, r.step_time_s))
        .collect()
}

fn run(
    obj: &Synthetic,
    space: &Space,
    k: usize,
    exhaustive: bool,
    threads: usize,
) -> Outcome<(f64, f64)> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    pool.install(|| {
        search(
            obj,
            space,
            &SearchOptions {
                top_k: k,
                exhaustive,
            },
            &(),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn bnb_equals_exhaustive_for_any_thread_count(obj in objective(), space in space(), k in 1usize..6) {
        let exact = run(&obj, &space, k, true, 1);
        let bnb1 = run(&obj, &space, k, false, 1);
        let bnb3 = run(&obj, &space, k, false, 3);
        prop_assert_eq!(ranking(&exact), ranking(&bnb1));
        prop_assert_eq!(ranking(&bnb1), ranking(&bnb3));
        // Accounting: every plan of the space is either evaluated or under a cut subtree.
        prop_assert_eq!(exact.stats.evaluated, exact.stats.space_plans);
        prop_assert_eq!(bnb1.stats.evaluated + bnb1.stats.pruned_plans, bnb1.stats.space_plans);
        prop_assert_eq!(bnb3.stats.evaluated + bnb3.stats.pruned_plans, bnb3.stats.space_plans);
        // Sorted by (time, key), no duplicates.
        for w in exact.plans.windows(2) {
            prop_assert!((w[0].step_time_s, w[0].key) < (w[1].step_time_s, w[1].key));
        }
        // Nothing found exactly when no fitting plan exists.
        prop_assert_eq!(exact.plans.is_empty(), exact.stats.feasible == 0);
        if exact.plans.is_empty() && exact.stats.out_of_memory > 0 {
            let nf = bnb1.no_fit.expect("no-fit reason");
            prop_assert!(nf.min_memory_bytes > nf.hbm_bytes);
        }
    }

    #[test]
    fn returned_plans_reevaluate_and_fit(obj in objective(), space in space()) {
        let out = run(&obj, &space, 5, false, 2);
        for r in &out.plans {
            let m = obj.evaluate(&r.plan).expect("a returned plan is feasible");
            prop_assert_eq!(m, r.metrics);
            prop_assert!(m.1 <= obj.shape.hbm_bytes);
            prop_assert_eq!(r.plan.gpus(), obj.shape.gpus as u64);
        }
    }

    #[test]
    fn more_memory_or_looser_constraints_never_hurt(obj in objective(), space in space(), extra in 1.0f64..3.0) {
        let base = run(&obj, &space, 1, false, 2);
        let mut bigger = obj;
        bigger.shape.hbm_bytes *= extra;
        let more_mem = run(&bigger, &space, 1, false, 2);
        let mut loose = space.clone();
        loose.constraints = Constraints::default();
        let looser = run(&obj, &loose, 1, false, 2);
        if let Some(b) = base.plans.first() {
            prop_assert!(more_mem.plans[0].step_time_s <= b.step_time_s);
            prop_assert!(looser.plans[0].step_time_s <= b.step_time_s);
        }
    }
}
