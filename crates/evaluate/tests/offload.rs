//! Optimizer offload to host memory (`offload_optimizer`): it frees HBM and never shortens a
//! step; the host memory limit has its own reason; more host memory never removes a plan.

use autoplan_cluster::{resolve_cluster, Cluster};
use autoplan_evaluate::{EvalOptions, Evaluator, Infeasible};
use autoplan_graph::resolve_model;
use autoplan_plan::{Plan, Recompute, Schedule, Zero};
use proptest::prelude::*;

/// Random plans of a 64-GPU cluster (invalid ones are skipped by the properties).
fn plans() -> impl Strategy<Value = Plan> {
    (
        prop::sample::select(vec![1u32, 2, 4, 8]),
        prop::sample::select(vec![1u32, 2, 4, 8]),
        prop::sample::select(vec![1u32, 2]),
        prop::sample::select(vec![Recompute::None, Recompute::Selective, Recompute::Full]),
        prop::sample::select(vec![0u8, 1, 2, 3]),
        prop::sample::select(vec![1u32, 2]),
        prop::sample::select(vec![1u32, 2, 4, 8]),
        prop::sample::select(vec![25u8, 50, 75, 100]),
    )
        .prop_map(|(tp, pp, cp, recompute, zero, mbs, ep, off)| Plan {
            tp,
            pp,
            cp,
            sp: tp > 1,
            dp: 64 / (tp * pp * cp),
            ep,
            recompute,
            zero: Zero::stage(zero),
            mbs,
            schedule: Schedule::OneF1B,
            offload_optimizer: off,
            ..Plan::default()
        })
}

fn with_host_memory(c: &Cluster, k: f64) -> Cluster {
    let mut c = c.clone();
    if let Some(h) = c.host.as_mut() {
        h.memory_bytes *= k;
    }
    c
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Offload never makes a plan faster than the same plan without it when both fit, and
    /// never needs more HBM.
    #[test]
    fn offload_never_speeds_a_plan(plan in plans(), moe in prop::bool::ANY) {
        let m = resolve_model(if moe { "mixtral-8x7b" } else { "llama3-8b" }).unwrap();
        let c = resolve_cluster("a100x64").unwrap();
        let ev = Evaluator::new(&m, &c, EvalOptions::default());
        let none = Plan { offload_optimizer: 0, ..plan };
        if let (Ok(a), Ok(b)) = (ev.memory_breakdown(&plan), ev.memory_breakdown(&none)) {
            prop_assert!(a.total <= b.total * (1.0 + 1e-12), "{} > {}", a.total, b.total);
            prop_assert!(a.host > 0.0);
        }
        if let (Ok(off), Ok(on_gpu)) = (ev.evaluate(&plan), ev.evaluate(&none)) {
            prop_assert!(
                off.step_time_s >= on_gpu.step_time_s * (1.0 - 1e-12),
                "{plan}: {} < {}", off.step_time_s, on_gpu.step_time_s
            );
        }
    }

    /// More host memory never removes a plan.
    #[test]
    fn more_host_memory_never_removes_a_plan(plan in plans(), shrink in 0.001f64..1.0, k in 1.0f64..16.0) {
        let m = resolve_model("llama3-8b").unwrap();
        let c = with_host_memory(&resolve_cluster("a100x64").unwrap(), shrink);
        let small = Evaluator::new(&m, &c, EvalOptions::default()).evaluate(&plan);
        let big = Evaluator::new(&m, &with_host_memory(&c, k), EvalOptions::default()).evaluate(&plan);
        if let Ok(s) = small {
            let b = big.unwrap();
            prop_assert_eq!(s.step_time_s, b.step_time_s);
        }
    }
}

fn dsv3_plan() -> Plan {
    "tp=4,sp=on,pp=4,dp=4,ep=16,mbs=2,recompute=full,zero=1,offload_optimizer=1"
        .parse()
        .unwrap()
}

/// DeepSeek-V3 on 64 A100s: no plan fits without offload (671B parameters × 16 B), this one
/// fits with the optimizer state in host memory, and its breakdown carries the offload.
#[test]
fn deepseek_v3_fits_on_a100x64_with_offload() {
    let m = resolve_model("deepseek-v3").unwrap();
    let c = resolve_cluster("a100x64").unwrap();
    let ev = Evaluator::new(&m, &c, EvalOptions::default());
    let plan = dsv3_plan();
    let without = Plan {
        offload_optimizer: 0,
        ..plan
    };
    assert!(matches!(
        ev.evaluate(&without),
        Err(Infeasible::OutOfMemory { .. })
    ));
    let r = ev.report(&plan).unwrap();
    let b = r.breakdown;
    assert!(b.offload_s > 0.0);
    assert!(((b.total() - r.metrics.step_time_s) / r.metrics.step_time_s).abs() < 1e-9);
    // All of the optimizer state left HBM for the host: 12 B + 4 B gradient copy per
    // parameter of the shard.
    assert_eq!(r.memory.optimizer, 0.0);
    assert!(r.memory.host > 0.0);
    let host = c.host.unwrap();
    assert!(r.memory.host <= host.memory_per_gpu(c.node.gpus_per_node));
    // Half offloaded: half the optimizer state stays on the GPU.
    let half = Plan {
        offload_optimizer: 50,
        ..plan
    };
    let mh = ev.memory_breakdown(&half).unwrap();
    let m0 = ev.memory_breakdown(&without).unwrap();
    assert!((mh.optimizer - m0.optimizer / 2.0).abs() <= 1e-6 * m0.optimizer);
    assert!((mh.host - r.memory.host / 2.0).abs() <= 1e-6 * r.memory.host);
    // JSON: the breakdown's `offload_s` and the memory's `host`.
    let j = serde_json::to_value(&r).unwrap();
    assert!(j["breakdown"]["offload_s"].as_f64().unwrap() > 0.0);
    assert!(j["memory"]["host"].as_f64().unwrap() > 0.0);
}

/// A host too small for the offloaded state: "out of host memory", with both figures; no host
/// tier at all is the same reason.
#[test]
fn host_memory_limit_has_its_own_reason() {
    let m = resolve_model("deepseek-v3").unwrap();
    let c = resolve_cluster("a100x64").unwrap();
    let small = with_host_memory(&c, 0.25);
    let e = Evaluator::new(&m, &small, EvalOptions::default())
        .evaluate(&dsv3_plan())
        .unwrap_err();
    assert!(matches!(e, Infeasible::OutOfHostMemory { .. }), "{e}");
    let msg = e.to_string();
    assert!(msg.starts_with("out of host memory"), "{msg}");
    assert!(msg.contains("64.00 GiB per GPU"), "{msg}");
    let mut bare = c.clone();
    bare.host = None;
    let e = Evaluator::new(&m, &bare, EvalOptions::default())
        .evaluate(&dsv3_plan())
        .unwrap_err();
    assert!(
        matches!(e, Infeasible::OutOfHostMemory { capacity_bytes, .. } if capacity_bytes == 0.0)
    );
}

/// A slower host link or host memory lengthens the offload, nothing else.
#[test]
fn offload_time_follows_the_host_link_and_memory() {
    let m = resolve_model("deepseek-v3").unwrap();
    let c = resolve_cluster("a100x64").unwrap();
    let base = Evaluator::new(&m, &c, EvalOptions::default())
        .report(&dsv3_plan())
        .unwrap()
        .breakdown;
    let mut slow = c.clone();
    let h = slow.host.as_mut().unwrap();
    h.link_bw /= 100.0;
    h.memory_bw /= 100.0;
    let s = Evaluator::new(&m, &slow, EvalOptions::default())
        .report(&dsv3_plan())
        .unwrap()
        .breakdown;
    assert!(
        s.offload_s > 50.0 * base.offload_s,
        "{} vs {}",
        s.offload_s,
        base.offload_s
    );
    // The same work, summed over a bottleneck stage the offload may make another one of the
    // equal stages: equal to rounding.
    let same = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs();
    assert!(
        same(s.compute_s, base.compute_s),
        "{} vs {}",
        s.compute_s,
        base.compute_s
    );
    assert!(same(s.optimizer_s, base.optimizer_s));
}

/// The property above on a whole grid, counting the pairs it compares (so that it cannot hold
/// vacuously): every fraction, ZeRO stage and recompute mode of a few degree splits.
#[test]
fn offload_never_speeds_a_plan_on_a_grid() {
    let c = resolve_cluster("a100x64").unwrap();
    let mut compared = 0;
    for name in ["llama3-8b", "mixtral-8x7b"] {
        let m = resolve_model(name).unwrap();
        let ev = Evaluator::new(&m, &c, EvalOptions::default());
        for (tp, pp, ep) in [(1, 1, 1), (2, 2, 1), (8, 1, 8), (4, 4, 2)] {
            for zero in 0..=3 {
                for recompute in [Recompute::None, Recompute::Full] {
                    let none = Plan {
                        tp,
                        sp: tp > 1,
                        pp,
                        dp: 64 / (tp * pp),
                        ep: if name == "llama3-8b" { 1 } else { ep },
                        zero: Zero::stage(zero),
                        recompute,
                        ..Plan::default()
                    };
                    let Ok(base) = ev.evaluate(&none) else {
                        continue;
                    };
                    for off in [25, 50, 75, 100] {
                        let p = Plan {
                            offload_optimizer: off,
                            ..none
                        };
                        let m = ev.evaluate(&p).unwrap();
                        assert!(m.step_time_s >= base.step_time_s, "{p}");
                        assert!(m.memory_peak_bytes <= base.memory_peak_bytes, "{p}");
                        compared += 1;
                    }
                }
            }
        }
    }
    assert!(compared >= 100, "{compared}");
}

/// Parameter offload (`offload_params`) beside the whole optimizer on the host: random plans of
/// ZeRO-3 (resharding or not).
fn param_plans() -> impl Strategy<Value = Plan> {
    (plans(), prop::bool::ANY).prop_map(|(p, reshard)| Plan {
        zero: if reshard {
            Zero::stage(3)
        } else {
            Zero::NORESHARD
        },
        offload_optimizer: 100,
        offload_params: true,
        ..p
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Parameter offload never makes a plan faster than the same plan without it when both
    /// fit; it moves the parameter and gradient shards to the host.
    #[test]
    fn param_offload_never_speeds_a_plan(plan in param_plans(), moe in prop::bool::ANY) {
        let m = resolve_model(if moe { "mixtral-8x7b" } else { "llama3-8b" }).unwrap();
        let c = resolve_cluster("a100x64").unwrap();
        let ev = Evaluator::new(&m, &c, EvalOptions::default());
        let kept = Plan { offload_params: false, ..plan };
        if let (Ok(a), Ok(b)) = (ev.memory_breakdown(&plan), ev.memory_breakdown(&kept)) {
            prop_assert!(a.host > b.host, "{plan}: host {} vs {}", a.host, b.host);
            prop_assert_eq!(a.grads, 0.0);
            prop_assert!(a.weights < b.weights, "{plan}");
        }
        if let (Ok(off), Ok(on_gpu)) = (ev.evaluate(&plan), ev.evaluate(&kept)) {
            prop_assert!(
                off.step_time_s >= on_gpu.step_time_s * (1.0 - 1e-12),
                "{plan}: {} < {}", off.step_time_s, on_gpu.step_time_s
            );
        }
    }

    /// More host memory never removes a plan that offloads its parameters.
    #[test]
    fn more_host_memory_never_removes_a_param_offload_plan(
        plan in param_plans(), shrink in 0.001f64..1.0, k in 1.0f64..16.0
    ) {
        let m = resolve_model("llama3-8b").unwrap();
        let c = with_host_memory(&resolve_cluster("a100x64").unwrap(), shrink);
        let small = Evaluator::new(&m, &c, EvalOptions::default()).evaluate(&plan);
        let big = Evaluator::new(&m, &with_host_memory(&c, k), EvalOptions::default()).evaluate(&plan);
        if let Ok(s) = small {
            let b = big.unwrap();
            prop_assert_eq!(s.step_time_s, b.step_time_s);
        }
    }
}

/// Parameter offload on a grid, counting the pairs compared: never faster, the exposed
/// transfers in the breakdown's offload item, and a slower host link lengthens it.
#[test]
fn param_offload_never_speeds_a_plan_on_a_grid() {
    let c = resolve_cluster("a100x64").unwrap();
    let mut slow = c.clone();
    slow.host.as_mut().unwrap().link_bw /= 100.0;
    let mut compared = 0;
    for name in ["llama3-8b", "mixtral-8x7b"] {
        let m = resolve_model(name).unwrap();
        let ev = Evaluator::new(&m, &c, EvalOptions::default());
        let ev_slow = Evaluator::new(&m, &slow, EvalOptions::default());
        for (tp, pp, ep) in [(1, 1, 1), (2, 2, 1), (8, 1, 8), (4, 4, 2)] {
            for zero in [Zero::stage(3), Zero::NORESHARD] {
                for recompute in [Recompute::None, Recompute::Full] {
                    let kept = Plan {
                        tp,
                        sp: tp > 1,
                        pp,
                        dp: 64 / (tp * pp),
                        ep: if name == "llama3-8b" { 1 } else { ep },
                        zero,
                        recompute,
                        offload_optimizer: 100,
                        ..Plan::default()
                    };
                    let Ok(base) = ev.report(&kept) else {
                        continue;
                    };
                    let p = Plan {
                        offload_params: true,
                        ..kept
                    };
                    let Ok(r) = ev.report(&p) else {
                        continue;
                    };
                    assert!(r.metrics.step_time_s >= base.metrics.step_time_s, "{p}");
                    assert!(r.breakdown.offload_s > base.breakdown.offload_s, "{p}");
                    let s = ev_slow.report(&p).unwrap();
                    assert!(s.breakdown.offload_s > r.breakdown.offload_s, "{p}");
                    // The rest of the step is the same (up to the rounding of taking the
                    // offload item back out of the step).
                    let (a, b) = (s.breakdown.compute_s, r.breakdown.compute_s);
                    assert!((a - b).abs() <= 1e-9 * b, "{p}: {a} vs {b}");
                    compared += 1;
                }
            }
        }
    }
    assert!(compared >= 20, "{compared}");
}

/// `offload_params` is refused without a parameter shard or without the whole optimizer on
/// the host (`Plan::check`), with the rule named.
#[test]
fn param_offload_needs_zero3_and_the_optimizer_on_the_host() {
    let m = resolve_model("llama3-8b").unwrap();
    let c = resolve_cluster("a100x64").unwrap();
    let ev = Evaluator::new(&m, &c, EvalOptions::default());
    for (plan, needs) in [
        (
            "dp=64,zero=2,offload_optimizer=1,offload_params=on",
            "zero=3",
        ),
        (
            "dp=64,zero=3,offload_optimizer=0.5,offload_params=on",
            "offload_optimizer=1",
        ),
    ] {
        let p: Plan = plan.parse().unwrap();
        let e = ev.evaluate(&p).unwrap_err().to_string();
        assert!(
            e.contains("offload_params=on needs") && e.contains(needs),
            "{e}"
        );
    }
}
