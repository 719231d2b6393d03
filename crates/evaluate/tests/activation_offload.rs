//! Activation offload to host memory (`offload_activations`): it moves the offloaded layers'
//! activations out of HBM, never shortens a step (overlapped as Megatron-Core/Transformer
//! Engine runs it or exposed as DeepSpeed does), needs host memory, and is what makes a
//! long-sequence plan fit on few GPUs.

use autoplan_cluster::{resolve_cluster, Cluster};
use autoplan_evaluate::{EvalOptions, Evaluator, Infeasible};
use autoplan_graph::{resolve_model, ModelSpec};
use autoplan_plan::offload_activations::ALL;
use autoplan_plan::{Plan, Recompute, Schedule, Zero};
use proptest::prelude::*;

/// Random plans of a 64-GPU cluster offloading some layers' activations (invalid ones are
/// skipped by the properties).
fn plans() -> impl Strategy<Value = Plan> {
    (
        prop::sample::select(vec![1u32, 2, 4, 8]),
        prop::sample::select(vec![1u32, 2, 4]),
        prop::sample::select(vec![Recompute::None, Recompute::Selective, Recompute::Full]),
        prop::sample::select(vec![0u8, 1, 3]),
        prop::sample::select(vec![1u32, 2]),
        prop::sample::select(vec![1u32, 2, 4, 8]),
        prop::sample::select(vec![
            Schedule::OneF1B,
            Schedule::Interleaved,
            Schedule::DualPipe,
        ]),
        prop::sample::select(vec![1u32, 2, 3, 7, ALL]),
    )
        .prop_map(|(tp, pp, recompute, zero, mbs, ep, schedule, n)| Plan {
            tp,
            pp,
            sp: tp > 1,
            dp: 64 / (tp * pp),
            ep,
            recompute,
            zero: Zero::stage(zero),
            mbs,
            schedule,
            vpp: if schedule == Schedule::Interleaved {
                2
            } else {
                1
            },
            offload_activations: n,
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

/// Copied on the compute stream (DeepSpeed's profile) instead of beside it.
fn exposed() -> EvalOptions {
    EvalOptions {
        activation_offload_overlap: false,
        ..EvalOptions::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Activation offload never makes a plan faster than the same plan without it when both
    /// fit, overlapped or not, never needs more HBM, and puts the layers in host memory;
    /// overlapped copies never cost more than exposed ones.
    #[test]
    fn activation_offload_never_speeds_a_plan(plan in plans(), moe in prop::bool::ANY) {
        let m = resolve_model(if moe { "mixtral-8x7b" } else { "llama3-8b" }).unwrap();
        let c = resolve_cluster("a100x64").unwrap();
        let ev = Evaluator::new(&m, &c, EvalOptions::default());
        let ev_exposed = Evaluator::new(&m, &c, exposed());
        let none = Plan { offload_activations: 0, ..plan };
        if let (Ok(a), Ok(b)) = (ev.memory_breakdown(&plan), ev.memory_breakdown(&none)) {
            prop_assert!(a.total <= b.total * (1.0 + 1e-12), "{plan}: {} > {}", a.total, b.total);
            prop_assert!(a.activations <= b.activations * (1.0 + 1e-12), "{plan}");
            prop_assert!(a.host > b.host, "{plan}: host {} vs {}", a.host, b.host);
        }
        if let (Ok(off), Ok(on_gpu)) = (ev.evaluate(&plan), ev.evaluate(&none)) {
            prop_assert!(
                off.step_time_s >= on_gpu.step_time_s * (1.0 - 1e-12),
                "{plan}: {} < {}", off.step_time_s, on_gpu.step_time_s
            );
            let x = ev_exposed.evaluate(&plan).unwrap();
            let x0 = ev_exposed.evaluate(&none).unwrap();
            prop_assert!(x.step_time_s >= x0.step_time_s * (1.0 - 1e-12), "{plan}");
            prop_assert!(x.step_time_s >= off.step_time_s * (1.0 - 1e-12), "{plan}");
        }
    }

    /// More host memory never removes a plan that offloads activations.
    #[test]
    fn more_host_memory_never_removes_an_activation_offload_plan(
        plan in plans(), shrink in 0.0001f64..1.0, k in 1.0f64..16.0
    ) {
        let m = resolve_model("llama3-8b").unwrap();
        let c = with_host_memory(&resolve_cluster("a100x64").unwrap(), shrink);
        let small = Evaluator::new(&m, &c, EvalOptions::default()).evaluate(&plan);
        let big = Evaluator::new(&m, &with_host_memory(&c, k), EvalOptions::default())
            .evaluate(&plan);
        if let Ok(s) = small {
            let b = big.unwrap();
            prop_assert_eq!(s.step_time_s, b.step_time_s);
        }
    }
}

/// Llama-3 8B at a 1M-token sequence on one 8-GPU H100 node (`autoplan search --model
/// llama3-8b --cluster dgx-h100 --gpus 8 --seq-len 1048576 --global-batch 8 --framework any`).
fn long_sequence() -> (ModelSpec, Cluster) {
    let mut m = resolve_model("llama3-8b").unwrap();
    m.training.seq_len = 1 << 20;
    m.training.global_batch = 8;
    let c = resolve_cluster("dgx-h100").unwrap().with_gpus(8).unwrap();
    (m, c)
}

/// The search's answer for the long sequence fits only with its activations in host memory:
/// the same plan keeping them in HBM is out of memory.
#[test]
fn activation_offload_makes_a_long_sequence_fit() {
    let (m, c) = long_sequence();
    let ev = Evaluator::new(&m, &c, EvalOptions::default());
    let p: Plan = "tp=1,cp=8,dp=1,pp=1,mbs=1,recompute=selective:mlp,zero=3,\
                   offload_optimizer=1,offload_params=on,offload_activations=all"
        .parse()
        .unwrap();
    let r = ev.report(&p).unwrap();
    assert!(r.breakdown.offload_s > 0.0);
    let kept = Plan {
        offload_activations: 0,
        ..p
    };
    match ev.evaluate(&kept) {
        Err(Infeasible::OutOfMemory { peak_bytes, .. }) => {
            assert!(peak_bytes > r.metrics.memory_peak_bytes + 10.0 * 1024f64.powi(3));
        }
        other => panic!("expected out of memory, got {other:?}"),
    }
    // Fewer layers offloaded keep more in HBM.
    let half = ev
        .memory_breakdown(&Plan {
            offload_activations: 16,
            ..p
        })
        .unwrap();
    assert!(half.total > r.metrics.memory_peak_bytes);
}

/// The exposed copy time: grows with a slower host link; overlapped copies of fewer layers
/// than the stage hide behind the other layers' compute, while copies on the compute stream
/// are all exposed; and a host too small refuses the plan with its own reason.
#[test]
fn activation_copies_follow_the_link_the_overlap_and_the_host() {
    let (mut m, c) = long_sequence();
    m.training.seq_len = 1 << 18;
    let p: Plan = "tp=1,cp=8,dp=1,pp=1,mbs=1,recompute=full,zero=3,offload_activations=16"
        .parse()
        .unwrap();
    let off = |c: &Cluster, o: EvalOptions| {
        Evaluator::new(&m, c, o)
            .report(&p)
            .unwrap()
            .breakdown
            .offload_s
    };
    let hidden = off(&c, EvalOptions::default());
    let shown = off(&c, exposed());
    assert!(shown > 0.0 && hidden < shown, "{hidden} vs {shown}");
    let mut slow = c.clone();
    slow.host.as_mut().unwrap().link_bw /= 1000.0;
    assert!(off(&slow, EvalOptions::default()) > hidden);
    assert!(off(&slow, exposed()) > 100.0 * shown);
    let tiny = with_host_memory(&c, 1e-6);
    match Evaluator::new(&m, &tiny, EvalOptions::default()).evaluate(&p) {
        Err(e @ Infeasible::OutOfHostMemory { .. }) => {
            assert!(e.to_string().contains("out of host memory"), "{e}")
        }
        other => panic!("expected out of host memory, got {other:?}"),
    }
}
