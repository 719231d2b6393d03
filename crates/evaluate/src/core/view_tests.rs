//! The per-thread caches of the class costs and the stage scan key on every knob those read:
//! [`class_view`] and [`scan_view`] set aside only knobs that move no bit of them (priced
//! without the caches), and the cached answers are what pricing gives, in any order of asking.
//! The floors' lean stage scan (`scan_times`) agrees with the full one on the same grid.

use autoplan_plan::{PipelineSplit, Plan, Recompute, RecomputeModules, Schedule, Zero};

use super::costs::class_view;
use super::pipeline::scan_view;

/// Every plan of a grid over the degrees, schedules, recompute modes and overlaps of three
/// bundled models (dense, MoE, MLA + MoE) that passes its checks, each under every value of
/// the knobs the views set aside.
#[test]
fn the_class_and_scan_caches_key_on_everything_they_read() {
    let zeros = [
        Zero::stage(0),
        Zero::stage(1),
        Zero::stage(2),
        Zero::stage(3),
    ];
    let (mut checked, mut lean) = (0, 0);
    for (m, gpus, ev) in super::bundled_evaluators(&[
        ("deepseek-v3", "h800x2048"),
        ("mixtral-8x7b", "h100x256"),
        ("llama3-70b", "h100x256"),
    ]) {
        let moe = m.moe.is_some();
        for (tp, cp, pp) in [(1, 1, 1), (2, 2, 4), (4, 1, 8), (8, 1, 2)] {
            let dp = gpus / (tp * cp * pp);
            for (schedule, vpp) in [
                (Schedule::OneF1B, 1),
                (Schedule::Interleaved, 2),
                (Schedule::ZeroBubble, 1),
                (Schedule::DualPipe, 1),
            ] {
                for recompute in [Recompute::None, Recompute::Selective, Recompute::Full] {
                    for ep_overlap in [false, moe] {
                        let base = Plan {
                            tp,
                            cp,
                            pp,
                            dp,
                            ep: if moe { 8.min(dp * cp * tp) } else { 1 },
                            sp: tp > 1,
                            schedule,
                            vpp,
                            recompute,
                            recompute_modules: RecomputeModules::DEFAULT,
                            ep_overlap,
                            zero: Zero::stage(1),
                            ..Plan::default()
                        };
                        if base.check(&m, gpus).is_err() || ev.layout(&base).is_err() {
                            continue;
                        }
                        let x = ev.ctx(&base);
                        let layout = ev.layout(&base).expect("checked");
                        let priced = ev.class_costs(&base, &x, &mut (), 0.0, 0);
                        let costs = format!("{priced:?}");
                        let (_, pp_t) = ev.pp_hop(&x);
                        let full = ev.scan_stages(&base, &x, &priced, &layout, pp_t);
                        let scan = format!("{full:?}");
                        if recompute == Recompute::None {
                            // The floors' lean scan: the same pace and sum up to rounding.
                            let (tmax, sum) = ev.scan_times(&base, &x, &priced, &layout, pp_t);
                            let close = |a: f64, b: f64| (a - b).abs() <= 1e-14 * b.abs();
                            assert!(close(tmax, full.tmax), "{base}: {tmax} vs {}", full.tmax);
                            assert!(close(sum, full.sum), "{base}: {sum} vs {}", full.sum);
                            lean += 1;
                        }
                        // The scan view's knobs, and (the class view's) the block split and
                        // activation offload, and without EP overlap the schedule.
                        let mut variants: Vec<Plan> = Vec::new();
                        for &zero in &zeros {
                            for (offload_optimizer, offload_params) in [(0, false), (100, true)] {
                                variants.push(Plan {
                                    zero,
                                    offload_optimizer,
                                    offload_params,
                                    ..base
                                });
                            }
                        }
                        let mut class_only = vec![Plan {
                            pipeline_split: PipelineSplit::EmbeddingLoss,
                            offload_activations: 1,
                            ..base
                        }];
                        if !ep_overlap {
                            class_only.push(Plan {
                                schedule: Schedule::OneF1B,
                                vpp: 1,
                                ..base
                            });
                        }
                        for v in &variants {
                            assert_eq!(scan_view(v), scan_view(&base));
                            assert_eq!(class_view(v), class_view(&base));
                            let xv = ev.ctx(v);
                            let pv = ev.class_costs(v, &xv, &mut (), 0.0, 0);
                            assert_eq!(format!("{pv:?}"), costs, "class costs of {v}");
                            let sv = ev.scan_stages(v, &xv, &pv, &layout, pp_t);
                            assert_eq!(format!("{sv:?}"), scan, "scan of {v}");
                            let cached = ev.scan(v, &xv, &layout);
                            assert_eq!(format!("{cached:?}"), scan, "cached scan of {v}");
                            checked += 1;
                        }
                        for v in &class_only {
                            assert_eq!(class_view(v), class_view(&base));
                            let xv = ev.ctx(v);
                            let pv = ev.class_costs(v, &xv, &mut (), 0.0, 0);
                            assert_eq!(format!("{pv:?}"), costs, "class costs of {v}");
                            let cached = ev.class_costs_cached(v, &xv);
                            assert_eq!(format!("{cached:?}"), costs, "cached class costs of {v}");
                            checked += 1;
                        }
                    }
                }
            }
        }
    }
    eprintln!("{checked} plans checked, {lean} lean scans");
    assert!(checked > 300, "{checked} plans checked");
    assert!(lean > 20, "{lean} lean scans");
}

/// The floor's part cache (`floor_parts.rs`) keys on everything its pricing reads: over a grid
/// of plans whose pipeline depths, rank orders and schedules differ (roots that share keys),
/// each cached answer is what pricing afresh gives, bit for bit.
#[test]
fn the_part_cache_keys_on_everything_it_reads() {
    use autoplan_plan::{CpComm, Dispatcher, MoeTpScheme, RankOrder, TpSpTransition};

    use super::floor::OpenKnobs;

    let orders: Vec<RankOrder> = ["tp-cp-dp-pp", "tp-cp-pp-dp", "tp-dp-cp-pp", "tp-pp-cp-dp"]
        .iter()
        .map(|o| o.parse().expect("rank order"))
        .collect();
    let schedules = [
        (Schedule::OneF1B, 1),
        (Schedule::Interleaved, 2),
        (Schedule::DualPipe, 1),
    ];
    let tp_sp = [TpSpTransition::AllReduceSlice, TpSpTransition::AllToAll];
    let cp_comm = [
        CpComm::Ring,
        CpComm::AllToAll,
        CpComm::Hierarchical { a2a: 2 },
    ];
    let dispatchers = [Dispatcher::AllToAll, Dispatcher::DeepEp];
    let schemes = [MoeTpScheme::ScatterGather, MoeTpScheme::GroupAllToAll];
    let mut checked = 0;
    for (m, gpus, ev) in
        super::bundled_evaluators(&[("deepseek-v3", "h800x2048"), ("mixtral-8x7b", "h100x256")])
    {
        for (tp, cp, ep, mt) in [(1, 1, 64, 1), (2, 4, 16, 2), (4, 2, 8, 1), (1, 2, 32, 1)] {
            for pp in [1, 2, 4, 8] {
                let dp = gpus / (tp * cp * pp);
                for &order in &orders {
                    for (ep_overlap, tp_overlap) in [(true, true), (false, false)] {
                        let mut q = Plan {
                            tp,
                            cp,
                            pp,
                            dp,
                            ep: ep.min(dp * cp * tp),
                            moe_tp: mt,
                            sp: tp > 1,
                            order,
                            ep_overlap,
                            tp_overlap,
                            ..Plan::default()
                        };
                        if q.check(&m, gpus).is_err() {
                            continue;
                        }
                        let x = ev.ctx(&q);
                        let cc = ev.class_compute(&x);
                        let knobs = OpenKnobs {
                            schedules: &schedules,
                            tp_sp: &tp_sp,
                            cp_comm: &cp_comm,
                            dispatchers: &dispatchers,
                            schemes: &schemes,
                            exposure_only: false,
                        };
                        let fresh = ev.price_parts(&mut q.clone(), &x, &cc, knobs);
                        let cached = ev.part_floors(&mut q, &x, &cc, knobs);
                        assert_eq!(format!("{cached:?}"), format!("{fresh:?}"), "parts of {q}");
                        checked += 1;
                    }
                }
            }
        }
    }
    eprintln!("{checked} plans checked");
    assert!(checked > 100, "{checked} plans checked");
}
