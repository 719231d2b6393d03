//! Issue 7 items 5 and 7 in plan evaluation: dynamic top-1/top-2 routing (seed 004 §3.2),
//! capacity-padded versus unpadded (unequal) all-to-all, and the plan's expert placement
//! policy (contiguous, or balanced with `R` redundant experts per GPU) in EP time, expert
//! compute and memory.
//!
//! The model is `tests/fixtures/moe-dynamic.toml` (32 experts, dynamic routing with
//! `two_expert_fraction = 0.3`, hottest expert 3× the mean); variants change its `[moe]`.

use autoplan_cost::calibration::{dgx_h100, CPUFETCH};
use autoplan_evaluate::balanced_imbalance;
use autoplan_evaluate::{CommRow, EvalOptions, Evaluator, Report};
use autoplan_graph::{ModelSpec, Routing};
use autoplan_plan::Plan;
use proptest::prelude::*;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/moe-dynamic.toml"
);

/// 32 H100s (4 DGX nodes), EP over 8 GPUs of one node, expert data parallelism 4.
const PLAN: &str = "tp=1,pp=1,dp=32,ep=8,mbs=1,zero=1,recompute=selective,ep_overlap=false";

fn model() -> ModelSpec {
    autoplan_graph::resolve_model(FIXTURE).expect("fixture model parses")
}

fn with_moe(f: impl FnOnce(&mut autoplan_graph::Moe)) -> ModelSpec {
    let mut m = model();
    f(m.moe.as_mut().expect("fixture is MoE"));
    m
}

fn plan(extra: &str) -> Plan {
    format!("{PLAN}{extra}").parse().expect("plan parses")
}

fn report(m: &ModelSpec, p: &Plan) -> Report {
    let ev = Evaluator::new(m, &dgx_h100(4), EvalOptions::default());
    ev.report(p).expect("plan fits")
}

/// The EP dispatch all-to-all row (one per MoE block kind).
fn dispatch(r: &Report) -> &CommRow {
    r.comm
        .iter()
        .find(|c| c.what == "EP dispatch all-to-all")
        .expect("an EP dispatch row")
}

fn ep_a2a_time(r: &Report) -> f64 {
    r.comm
        .iter()
        .filter(|c| c.what.starts_with("EP ") && c.what.ends_with("all-to-all"))
        .map(|c| c.time)
        .sum()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1e-30)
}

#[test]
fn fixture_declares_dynamic_routing() {
    let m = model();
    let moe = m.moe.as_ref().unwrap();
    assert_eq!(
        moe.routing,
        Routing::DynamicTop1Top2 {
            threshold: 0.2,
            two_expert_fraction: 0.3
        }
    );
    assert_eq!(moe.capacity_factor, None);
    assert!(close(moe.expected_experts_per_token(), 1.3));
}

#[test]
fn dynamic_routing_volume_is_one_plus_f_between_top1_and_top2() {
    let p = plan("");
    let top = |k: u32| {
        report(
            &with_moe(|m| {
                m.routing = Routing::TopK;
                m.top_k = k;
            }),
            &p,
        )
    };
    let dynamic = |f: f64| {
        report(
            &with_moe(|m| {
                m.routing = Routing::DynamicTop1Top2 {
                    threshold: 0.2,
                    two_expert_fraction: f,
                }
            }),
            &p,
        )
    };
    let (r1, r2) = (top(1), top(2));
    let (b1, b2) = (dispatch(&r1).bytes, dispatch(&r2).bytes);
    // Hand-computed: 2048 tokens per rank, hidden 1024, 2 bytes: one expert per token.
    assert!(close(b1, 2048.0 * 1024.0 * 2.0), "{b1}");
    assert!(close(b2, 2.0 * b1));
    let g1 = r1.flops.gemm_fwd;
    let g2 = r2.flops.gemm_fwd;
    let mut last = (dispatch(&r1).time, r1.breakdown.compute_s, g1);
    for f in [0.0, 0.3, 0.7, 1.0] {
        let r = dynamic(f);
        let d = dispatch(&r);
        // Mean volume ∝ 1 + f (seed 004 §3.2: unequal all-to-all sends no padding).
        assert!(close(d.bytes, b1 * (1.0 + f)), "f={f}: {} vs {b1}", d.bytes);
        // Expert GEMM FLOPs interpolate linearly between top-1 and top-2.
        let g = r.flops.gemm_fwd;
        assert!(close(g - g1, f * (g2 - g1)), "f={f}: {g}");
        // Time and compute grow with f, from top-1's to top-2's.
        let now = (d.time, r.breakdown.compute_s, g);
        assert!(
            now.0 >= last.0 && now.1 >= last.1 && now.2 >= last.2,
            "f={f}"
        );
        last = now;
    }
    assert!(close(last.0, dispatch(&r2).time));
    assert!(close(last.1, r2.breakdown.compute_s));
    assert!(close(last.2, g2));
}

#[test]
fn padded_all_to_all_is_an_equal_one_without_the_host_round_trip() {
    // Top-2, no skew, capacity factor 1: the padded buffers hold exactly the routed tokens, so
    // padded and unpadded move the same bytes; only the unequal one asks the host for the split
    // sizes (seed 000 §7.5 `cpufetch`).
    let base = |cf: Option<f64>| {
        with_moe(|m| {
            m.routing = Routing::TopK;
            m.load_imbalance = 1.0;
            m.capacity_factor = cf;
        })
    };
    let p = plan("");
    let (u, c) = (report(&base(None), &p), report(&base(Some(1.0)), &p));
    let (du, dc) = (dispatch(&u), dispatch(&c));
    assert!(close(du.bytes, dc.bytes));
    assert!(close(du.time_per_call - dc.time_per_call, CPUFETCH));
}

#[test]
fn padded_dispatch_pads_dynamic_routing_to_two_experts() {
    // Seed 004 §3.2: with padding, dynamic routing saves nothing — every token's buffer is
    // sized for two experts, whatever the fraction that takes two.
    let p = plan("");
    let padded = |f: f64| {
        let r = report(
            &with_moe(|m| {
                m.capacity_factor = Some(1.25);
                m.routing = Routing::DynamicTop1Top2 {
                    threshold: 0.2,
                    two_expert_fraction: f,
                };
            }),
            &p,
        );
        dispatch(&r).bytes
    };
    let want = 2048.0 * 2.0 * 1.25 * 1024.0 * 2.0;
    for f in [0.0, 0.5, 1.0] {
        assert!(close(padded(f), want), "f={f}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// Capacity padding with `cf ≥ load_imbalance` sends at least the busiest rank's dropless
    /// volume from every rank, so it is never cheaper than the unequal all-to-all except by the
    /// host round trip the unequal one pays.
    #[test]
    fn padded_at_least_unpadded(imb in 1.0f64..4.0, extra in 0.0f64..2.0, f in 0.0f64..1.0) {
        let cf = imb + extra;
        let m = |cap: Option<f64>| with_moe(|m| {
            m.load_imbalance = imb;
            m.capacity_factor = cap;
            m.routing = Routing::DynamicTop1Top2 { threshold: 0.2, two_expert_fraction: f };
        });
        let p = plan("");
        let (u, c) = (report(&m(None), &p), report(&m(Some(cf)), &p));
        let (du, dc) = (dispatch(&u), dispatch(&c));
        // Unequal rows report the mean; the busiest rank moves `imb` times it.
        prop_assert!(dc.bytes >= du.bytes * imb * (1.0 - 1e-12));
        prop_assert!(dc.time_per_call + CPUFETCH >= du.time_per_call * (1.0 - 1e-12));
        prop_assert!(ep_a2a_time(&c) + 4.0 * CPUFETCH * dc.calls_per_step
            >= ep_a2a_time(&u) * (1.0 - 1e-12));
    }
}

#[test]
fn balanced_placement_lowers_ep_time_and_costs_the_replicas_memory() {
    let m = model();
    let ev = Evaluator::new(&m, &dgx_h100(4), EvalOptions::default());
    let (pc, pb) = (plan(",placement=contiguous"), plan(",placement=balanced:2"));
    // The imbalance each policy implies (issue 7 item 7).
    // Contiguous: the hottest expert (3× the mean) beside 3 average ones on a GPU of 4.
    assert!(close(ev.ep_imbalance(&pc), (3.0 + 3.0) / 4.0));
    let balanced = balanced_imbalance(32, 8, 2, 3.0);
    assert!(close(ev.ep_imbalance(&pb), balanced));
    assert!(balanced < 1.5);
    let (rc, rb) = (ev.report(&pc).unwrap(), ev.report(&pb).unwrap());
    // The unequal all-to-all waits for the busiest rank: mean × imbalance.
    assert!(close(dispatch(&rc).bytes, dispatch(&rb).bytes));
    assert!(ep_a2a_time(&rb) < ep_a2a_time(&rc));
    assert!(rb.breakdown.ep_exposed_s < rc.breakdown.ep_exposed_s);
    // The most loaded GPU's expert GEMMs and token copies shrink too.
    assert!(
        rb.breakdown.compute_s <= rc.breakdown.compute_s * (1.0 + 1e-12),
        "{:?} vs {:?}",
        rb.breakdown,
        rc.breakdown
    );
    // The replicas are trained copies (issue 22): the EDP reduction and the optimizer step
    // cover them, and their ZeRO shards are all-reduced over the copies (a row of its own).
    // Inside one NVLink node that costs less than the all-to-all and expert GEMMs save.
    let sync = |r: &autoplan_evaluate::Report| {
        r.comm
            .iter()
            .filter(|c| c.what.starts_with("EP replica gradient all-reduce"))
            .map(|c| c.exposed)
            .sum::<f64>()
    };
    assert_eq!(sync(&rc), 0.0);
    assert!(sync(&rb) > 0.0);
    assert!(rb.breakdown.dp_exposed_s > rc.breakdown.dp_exposed_s);
    assert!(rb.breakdown.optimizer_s > rc.breakdown.optimizer_s);
    assert!(
        rb.metrics.step_time_s < rc.metrics.step_time_s,
        "{:?} vs {:?}",
        rb.breakdown,
        rc.breakdown
    );
    // Memory: 2 more experts (3·h·f = 3·1024·1024 parameters each) in each of the 7 MoE
    // blocks: bf16 weights (2 B), fp32 grads (4 B), Adam state (12 B) over edp = 32/8 = 4.
    let params = 2.0 * 7.0 * 3.0 * 1024.0 * 1024.0;
    let (mc, mb) = (rc.memory, rb.memory);
    assert!(close(mb.weights - mc.weights, 2.0 * params));
    assert!(close(mb.grads - mc.grads, 4.0 * params));
    assert!(close(mb.optimizer - mc.optimizer, 12.0 * params / 4.0));
    assert!(close(mb.total - mc.total, (2.0 + 4.0 + 3.0) * params));
    assert!(close(mb.activations, mc.activations));
}

#[test]
fn replicas_beyond_what_a_gpu_can_hold_add_nothing() {
    // ep = 8 of 32 experts: 4 per GPU, so at most 28 replicas per GPU are distinct experts.
    let m = model();
    let ev = Evaluator::new(&m, &dgx_h100(4), EvalOptions::default());
    let (p28, p99) = (
        plan(",placement=balanced:28"),
        plan(",placement=balanced:99"),
    );
    assert!(close(ev.ep_imbalance(&p28), ev.ep_imbalance(&p99)));
    assert!(close(
        ev.ep_imbalance(&p28),
        balanced_imbalance(32, 8, 28, 3.0)
    ));
    let (r28, r99) = (ev.report(&p28), ev.report(&p99));
    match (r28, r99) {
        (Ok(a), Ok(b)) => assert!(close(a.memory.total, b.memory.total)),
        (a, b) => assert_eq!(a.err(), b.err()),
    }
    // Beyond the precomputed table (R ≤ 8) the value is computed on the spot, identically.
    let p12 = plan(",placement=balanced:12");
    assert!(close(
        ev.ep_imbalance(&p12),
        balanced_imbalance(32, 8, 12, 3.0)
    ));
}

#[test]
fn placement_does_not_change_capacity_padded_time() {
    // Padded buffers have the capacity's size whatever the placement: replicas only cost.
    let m = with_moe(|m| m.capacity_factor = Some(1.5));
    let ev = Evaluator::new(&m, &dgx_h100(4), EvalOptions::default());
    let (pc, pb) = (plan(",placement=contiguous"), plan(",placement=balanced:2"));
    let (rc, rb) = (ev.report(&pc).unwrap(), ev.report(&pb).unwrap());
    assert!(close(ep_a2a_time(&rb), ep_a2a_time(&rc)));
    assert!(close(rb.breakdown.compute_s, rc.breakdown.compute_s));
    assert!(rb.memory.total > rc.memory.total);
}

#[test]
fn deepep_moves_the_padded_rows_under_a_capacity_and_dedups_across_nodes() {
    let deepep_row = |r: &Report| -> (f64, f64) {
        let c = r
            .comm
            .iter()
            .find(|c| c.what == "EP dispatch (DeepEP)")
            .expect("a DeepEP dispatch row");
        (c.bytes, c.time_per_call)
    };
    // ep = 16 over 2 of the 4 nodes: the network stage carries deduplicated copies.
    let across = plan(",dispatcher=deepep")
        .to_string()
        .replace("ep=8", "ep=16");
    let across: Plan = across.parse().unwrap();
    let a2a: Plan = across
        .to_string()
        .replace(",dispatcher=deepep", "")
        .parse()
        .unwrap();
    // Capacity-padded: every rank sends `cf · top_k` rows of h per token (2048 tokens, h 1024).
    let m = with_moe(|m| m.capacity_factor = Some(1.25));
    let r = report(&m, &across);
    let want = 2048.0 * 1.25 * 2.0 * 1024.0 * 2.0;
    assert!(
        close(deepep_row(&r).0, want),
        "{} vs {want}",
        deepep_row(&r).0
    );
    // Dropless, same plan: DeepEP never takes longer than the all-to-all it replaces.
    let m = model();
    let (d, a) = (report(&m, &across), report(&m, &a2a));
    assert!(deepep_row(&d).1 <= dispatch(&a).time_per_call * (1.0 + 1e-12));
}

#[test]
fn group_limited_routing_shortens_deepeps_network_stage_only_when_groups_nest_in_nodes() {
    // The fixture as a top-2 model of 32 experts (so the groups can hold a token's experts),
    // DeepEP over ep = 32 on all 4 nodes: 8 experts per node.
    let top2 = |groups: u32, group_top_k: u32, cf: Option<f64>| {
        with_moe(|m| {
            m.routing = Routing::TopK;
            m.top_k = 2;
            m.groups = groups;
            m.group_top_k = group_top_k;
            m.capacity_factor = cf;
        })
    };
    let deepep: Plan = plan(",dispatcher=deepep")
        .to_string()
        .replace("ep=8", "ep=32")
        .parse()
        .unwrap();
    let per_call = |m: &ModelSpec, p: &Plan| {
        report(m, p)
            .comm
            .iter()
            .find(|c| c.what == "EP dispatch (DeepEP)")
            .expect("a DeepEP dispatch row")
            .time_per_call
    };
    let free = per_call(&top2(1, 1, None), &deepep);
    // 4 groups of 8, one per node, a token's 2 experts within 1 group: one node, not ~1.8.
    let grouped = per_call(&top2(4, 1, None), &deepep);
    assert!(grouped < free, "{grouped} vs {free}");
    // Every group open is no limit; groups that straddle nodes under balanced placement are
    // priced as uniform routing.
    assert!(close(per_call(&top2(4, 4, None), &deepep), free));
    let balanced: Plan = format!("{deepep},placement=balanced:0").parse().unwrap();
    assert!(close(
        per_call(&top2(4, 1, None), &balanced),
        per_call(&top2(1, 1, None), &balanced)
    ));
    // The NCCL all-to-all sends every copy whatever the groups.
    let a2a: Plan = deepep
        .to_string()
        .replace(",dispatcher=deepep", "")
        .parse()
        .unwrap();
    assert!(close(
        dispatch(&report(&top2(4, 1, None), &a2a)).time_per_call,
        dispatch(&report(&top2(1, 1, None), &a2a)).time_per_call
    ));
}
