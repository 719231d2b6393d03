//! Seed 004 §4.1.3's worked example: 4 nodes × 2 GPUs, experts 1-8 with loads
//! 210 312 200 198 415 150 189 250 (tokens from each GPU), one expert per GPU initially.

use autoplan_placement::*;

/// Cost = cross-server tokens, as the thesis counts them: α = 0, free inside a server,
/// 1 (second per byte, 1 byte per token) across servers.
fn instance(slots: usize) -> Instance {
    let topo = Topology::two_level(4, 2, (0.0, 0.0), (0.0, 1.0)).unwrap();
    let demand = loads::thesis_example().demand(8, 8, "thesis").unwrap();
    let opts = InstanceOptions {
        objective: Objective::Thesis,
        ..Default::default()
    };
    Instance::new(topo, 8, slots, demand, opts).unwrap()
}

#[test]
fn baseline_reproduces_11544() {
    let inst = instance(1);
    let m = evaluate_nearest(&inst, &baseline::contiguous(&inst));
    // (210 + 312 + 200 + 198 + 415 + 150 + 189 + 250) × 6 = 1924 × 6.
    assert_eq!(m.cross_node_bytes, 11544.0);
    // The thesis objective counts dispatch and combine: twice the cross-server volume.
    assert_eq!(m.thesis_s, 2.0 * 11544.0);
}

#[test]
fn exact_with_one_virtual_expert_per_gpu() {
    let inst = instance(2);
    let x = exact::solve_exact(&inst, &ExactOptions::default()).unwrap();
    assert_eq!(x.status, ExactStatus::Optimal);
    x.placement.validate(&inst).unwrap();
    let m = evaluate(&inst, &x.placement, &x.routing);
    // Hand derivation: a server's 2 GPUs send every token for an expert the server does not
    // hold, 2·(1924 − held load). Each server holds at most 4 distinct experts (16 slots in
    // all). One copy of each expert is forced (1924 held); the 8 spare slots go to the
    // largest loads with at most one copy per server, i.e. 3 more of 415 and 312 and 2 more
    // of 250: held = 1924 + 3·415 + 3·312 + 2·250 = 4605, so the minimum is
    // 2·(4·1924 − 4605) = 6182 — a 46% cut, where the thesis's hand-made strategy reaches
    // 6884 (40%; it prints the sum 1474 + 1772 + 1798 + 1840 as 6834).
    assert!(
        (m.cross_node_bytes - 6182.0).abs() < 1e-6,
        "{} {:?}",
        m.cross_node_bytes,
        x.placement
    );
    assert!(
        (x.objective_s - 2.0 * 6182.0).abs() < 1e-6,
        "{}",
        x.objective_s
    );
    // The heuristic finds it too.
    let h = heuristic::heuristic(&inst, &HeuristicOptions::default());
    let hm = evaluate(&inst, &h.placement, &h.routing);
    assert!(
        (hm.cross_node_bytes - 6182.0).abs() < 1e-6,
        "{}",
        hm.cross_node_bytes
    );
}
