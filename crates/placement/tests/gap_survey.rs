//! The heuristic's gap to the proven optimum over a fixed grid of small instances (the numbers
//! quoted in docs/placement.md). Run with
//! `cargo test -p autoplan-placement --test gap_survey -- --nocapture` to see them.

use autoplan_placement::*;

#[test]
fn heuristic_gap_over_small_grid() {
    let (mut worst, mut sum, mut n) = (0.0f64, 0.0, 0usize);
    let (mut worst_lp, mut worst_comb) = (0.0f64, 0.0f64);
    let mut seed = 0u64;
    for nodes in 1..=2usize {
        for per_node in 1..=2usize {
            for experts in 2..=5usize {
                for slots in 1..=2usize {
                    for alpha_us in [0.0, 10.0] {
                        for compute in [false, true] {
                            for objective in [Objective::Synchronous, Objective::Thesis] {
                                for skew in [0.5, 1.5] {
                                    let p = nodes * per_node;
                                    if p * slots < experts || p < 2 {
                                        continue;
                                    }
                                    seed += 1;
                                    let topo = Topology::two_level(
                                        nodes,
                                        per_node,
                                        (2e-6, 1.0 / 100e9),
                                        (alpha_us * 1e-6, 1.0 / 10e9),
                                    )
                                    .unwrap();
                                    let demand =
                                        loads::zipf(experts, skew, 4096.0 * p as f64, seed)
                                            .demand(p, experts, "zipf")
                                            .unwrap();
                                    let opts = InstanceOptions {
                                        bytes_per_token: 4096.0,
                                        expert_bytes: 0.0,
                                        compute_s_per_token: if compute { 2e-8 } else { 0.0 },
                                        replica_sync_bytes: 0.0,
                                        objective,
                                    };
                                    let inst =
                                        Instance::new(topo, experts, slots, demand, opts).unwrap();
                                    let x = exact::solve_exact(&inst, &ExactOptions::default())
                                        .unwrap();
                                    assert_eq!(x.status, ExactStatus::Optimal);
                                    let opt = evaluate(&inst, &x.placement, &x.routing).objective_s;
                                    let h =
                                        heuristic::heuristic(&inst, &HeuristicOptions::default());
                                    let hv = evaluate(&inst, &h.placement, &h.routing).objective_s;
                                    let lp = exact::lp_lower_bound(&inst).unwrap();
                                    let cb = bound::combinatorial_bound(&inst);
                                    assert!(hv >= opt * (1.0 - 1e-6) && lp <= opt * (1.0 + 1e-6));
                                    assert!(cb <= opt * (1.0 + 1e-6));
                                    let g = gap(hv, opt);
                                    worst = worst.max(g);
                                    sum += g;
                                    n += 1;
                                    worst_lp = worst_lp.max(gap(opt, lp));
                                    worst_comb = worst_comb.max(gap(opt, cb));
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    println!(
        "{n} instances: heuristic gap to optimum worst {:.2}%, mean {:.3}%; optimum above LP bound by at most {:.0}%, above combinatorial bound by at most {:.0}%",
        worst * 100.0,
        sum / n as f64 * 100.0,
        worst_lp * 100.0,
        worst_comb * 100.0
    );
    assert_eq!(n, 240);
    assert!(worst <= 0.10, "worst gap {worst}");
    assert!(sum / n as f64 <= 0.01, "mean gap {}", sum / n as f64);
}
