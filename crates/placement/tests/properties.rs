//! Properties on random small instances, with the exact MILP as the oracle.

use autoplan_placement::*;
use proptest::prelude::*;

/// (nodes, GPUs per node, experts, slots, Zipf exponent, seed, inter-node α µs, compute?, thesis?)
type Case = (usize, usize, usize, usize, f64, u64, f64, bool, bool);

fn instance(case: Case) -> Instance {
    let (nodes, per_node, experts, slots, skew, seed, alpha_us, compute, thesis) = case;
    // Intra-node: 2 µs, 100 GB/s; inter-node: alpha_us, 10 GB/s.
    let topo = Topology::two_level(
        nodes,
        per_node,
        (2e-6, 1.0 / 100e9),
        (alpha_us * 1e-6, 1.0 / 10e9),
    )
    .unwrap();
    let p = nodes * per_node;
    let demand = loads::zipf(experts, skew, 4096.0 * p as f64, seed)
        .demand(p, experts, "zipf")
        .unwrap();
    let opts = InstanceOptions {
        bytes_per_token: 4096.0,
        expert_bytes: 0.0,
        // About as long as the all-to-all of a token: compute matters but does not dominate.
        compute_s_per_token: if compute { 2e-8 } else { 0.0 },
        replica_sync_bytes: 0.0,
        objective: if thesis {
            Objective::Thesis
        } else {
            Objective::Synchronous
        },
    };
    Instance::new(topo, experts, slots, demand, opts).unwrap()
}

fn small() -> impl Strategy<Value = Instance> {
    (
        1usize..=2,
        1usize..=2,
        2usize..=5,
        1usize..=2,
        0.0f64..2.0,
        any::<u64>(),
        prop_oneof![Just(0.0), Just(10.0)],
        any::<bool>(),
        any::<bool>(),
    )
        .prop_filter_map("slots", |case: Case| {
            let p = case.0 * case.1;
            (p * case.3 >= case.2 && p > 1).then(|| instance(case))
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// The heuristic is never better than the proven optimum (sanity of both), the LP bound
    /// is never above it, and the heuristic's gap to it stays small.
    #[test]
    fn heuristic_vs_exact(inst in small()) {
        let x = exact::solve_exact(&inst, &ExactOptions::default()).unwrap();
        prop_assert_eq!(x.status, ExactStatus::Optimal);
        x.placement.validate(&inst).unwrap();
        let opt = evaluate(&inst, &x.placement, &x.routing).objective_s;
        prop_assert!((opt - x.objective_s).abs() <= 1e-6 * opt.max(1e-12), "MILP {} vs evaluated {}", x.objective_s, opt);
        let h = heuristic::heuristic(&inst, &HeuristicOptions::default());
        h.placement.validate(&inst).unwrap();
        let hv = evaluate(&inst, &h.placement, &h.routing).objective_s;
        prop_assert!(hv >= opt * (1.0 - 1e-6), "heuristic {} below optimum {}", hv, opt);
        let lp = exact::lp_lower_bound(&inst).unwrap();
        prop_assert!(lp <= opt * (1.0 + 1e-6), "LP bound {} above optimum {}", lp, opt);
        let cb = bound::combinatorial_bound(&inst);
        prop_assert!(cb <= opt * (1.0 + 1e-6), "combinatorial bound {} above optimum {}", cb, opt);
        // Observed worst gap on these instances: see docs/placement.md.
        prop_assert!(gap(hv, opt) <= 0.10, "gap {} (heuristic {}, optimum {})", gap(hv, opt), hv, opt);
    }

    /// Baselines are valid placements and the heuristic never loses to them.
    #[test]
    fn heuristic_beats_baselines(inst in small()) {
        let h = heuristic::heuristic(&inst, &HeuristicOptions::default());
        let hv = evaluate(&inst, &h.placement, &h.routing).objective_s;
        for b in [baseline::contiguous(&inst), baseline::eplb(&inst)] {
            b.validate(&inst).unwrap();
            prop_assert!(hv <= evaluate_nearest(&inst, &b).objective_s * (1.0 + 1e-9));
        }
    }
}
