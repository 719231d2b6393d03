//! Megatron-Core's host time per expert GEMM (`CostProfile::expert_gemm_host`, issue 17 item 4):
//! after a dropless dispatch each local expert's GEMM waits that long beside the GPU's own
//! latency, forward and backward (two GEMMs per forward GEMM), and not at all where the
//! dispatch is padded to a capacity, whose splits the host knows before the step.

use autoplan_cluster::resolve_cluster;
use autoplan_evaluate::{EvalOptions, Evaluator, Pass};
use autoplan_graph::resolve_model;
use autoplan_plan::framework::CostProfile;
use autoplan_plan::{Plan, Recompute, Zero};

fn plan() -> Plan {
    Plan {
        tp: 1,
        pp: 1,
        dp: 64,
        ep: 8,
        mbs: 1,
        recompute: Recompute::None,
        zero: Zero::stage(1),
        ..Plan::default()
    }
}

#[test]
fn each_local_expert_gemm_waits_the_host_after_a_dropless_dispatch() {
    let mut model = resolve_model("qwen3-30b-a3b").expect("bundled");
    model.training.global_batch = 128;
    let cluster = resolve_cluster("dgx-h100").unwrap().with_gpus(64).unwrap();
    let with = |model: &autoplan_graph::ModelSpec, host: f64| {
        let opts = EvalOptions {
            expert_gemm_host: host,
            ..EvalOptions::default()
        };
        Evaluator::new(model, &cluster, opts)
            .report(&plan())
            .expect("fits")
    };
    // Megatron-Core's fitted value is the default's.
    assert_eq!(
        EvalOptions::default().expert_gemm_host,
        CostProfile::MEGATRON_CORE.expert_gemm_host
    );
    const { assert!(CostProfile::MEGATRON_CORE.expert_gemm_host > 0.0) };
    let host = 20e-6;
    let (without, with_host) = (with(&model, 0.0), with(&model, host));
    // The launches the MoE work table lists: local experts × expert GEMMs per layer forward,
    // twice that backward, per layer and micro-batch of the bottleneck stage.
    let launches = |r: &autoplan_evaluate::Report, pass: Pass| {
        r.moe
            .iter()
            .filter(|w| w.pass == pass && w.what.starts_with("expert GEMM launches"))
            .map(|w| (w.calls_per_step, w.time_per_call))
            .fold((0.0, 0.0), |(c, _), (n, t)| (c + n, t))
    };
    let (fwd, t0) = launches(&without, Pass::Forward);
    let (bwd, _) = launches(&without, Pass::Backward);
    assert!(fwd > 0.0 && (bwd - 2.0 * fwd).abs() < 1e-9, "{fwd} {bwd}");
    let (_, t1) = launches(&with_host, Pass::Forward);
    assert!((t1 - t0 - host).abs() < 1e-15, "{t0} {t1}");
    // The compute of the step grows by exactly those waits.
    let grown = with_host.breakdown.compute_s - without.breakdown.compute_s;
    let expected = (fwd + bwd) * host;
    assert!(
        (grown - expected).abs() <= 1e-9 * expected.max(1.0),
        "compute grew {grown} s, launches × host = {expected} s"
    );
    // Padded to a capacity: the host knows the splits and runs ahead; nothing is added.
    let mut padded = model.clone();
    padded.moe.as_mut().unwrap().capacity_factor = Some(1.0);
    let (p0, p1) = (with(&padded, 0.0), with(&padded, host));
    assert_eq!(p0.breakdown.compute_s, p1.breakdown.compute_s);
    // A framework whose experts run as one grouped kernel carries none.
    for p in [
        CostProfile::TORCHTITAN,
        CostProfile::MAXTEXT,
        CostProfile::DEEPSPEED,
    ] {
        assert_eq!(p.expert_gemm_host, 0.0, "{}", p.name);
        let o = EvalOptions::default().with_profile(&p, model.training.precision);
        assert_eq!(o.expert_gemm_host, 0.0);
    }
}
