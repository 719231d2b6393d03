//! Issue 22 item 1: a placement that replicates pays its copies' gradient all-reduce
//! (`InstanceOptions::replica_sync_bytes`), so replicas are placed only where they save more
//! all-to-all and compute time than their sync costs.

use autoplan_placement::*;

/// 2 nodes × 4 GPUs, 8 experts, 2 slots per GPU (8 redundant slots), skewed loads.
fn instance(sync_bytes: f64) -> Instance {
    let topo = Topology::two_level(2, 4, (2e-6, 1.0 / 100e9), (10e-6, 1.0 / 10e9)).unwrap();
    let demand = loads::zipf(8, 1.2, 4096.0 * 8.0, 7)
        .demand(8, 8, "zipf")
        .unwrap();
    let opts = InstanceOptions {
        bytes_per_token: 4096.0,
        compute_s_per_token: 2e-8,
        replica_sync_bytes: sync_bytes,
        ..InstanceOptions::default()
    };
    Instance::new(topo, 8, 2, demand, opts).unwrap()
}

#[test]
fn replicas_pay_their_gradient_sync() {
    let free = solve(&instance(0.0), &SolveOptions::default()).unwrap();
    let best = free.best();
    // Free replicas are used, and cost nothing.
    assert!(best.placement.copies() > 8, "{:?}", best.placement);
    assert_eq!(best.metrics.replica_sync_s, 0.0);
    // The same placement priced with a sync: its objective grows by exactly the sync term.
    let priced = instance(64e6);
    let m = evaluate_nearest(&priced, &best.placement);
    assert!(m.replica_sync_s > 0.0);
    let base = evaluate_nearest(&instance(0.0), &best.placement);
    assert!((m.objective_s - base.objective_s - m.replica_sync_s).abs() < 1e-12);
    // A sync far dearer than any all-to-all saving: the solver keeps one copy per expert.
    let r = solve(&instance(1e12), &SolveOptions::default()).unwrap();
    assert_eq!(r.best().placement.copies(), 8, "{:?}", r.best().placement);
    assert_eq!(r.best().metrics.replica_sync_s, 0.0);
    // The bound stays below the answer.
    assert!(r.lower_bound_s <= r.best().metrics.objective_s * (1.0 + 1e-9));
}
