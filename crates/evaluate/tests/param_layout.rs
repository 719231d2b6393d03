//! Where a framework keeps its parameters between uses (`CostProfile::fp32_params`): PyTorch's
//! mixed precision (torchtitan's FSDP2, llm-foundry's FSDP1) keeps them in fp32 as the
//! optimizer's own, 16 bytes a parameter under Adam; Megatron-Core keeps 16-bit parameters and
//! an fp32 master in the optimizer, 18. Memory only: the step time does not move.

use autoplan_evaluate::{EvalOptions, Evaluator, Report};
use autoplan_graph::{resolve_model, ModelSpec};
use autoplan_plan::framework::CostProfile;
use autoplan_plan::{Plan, Recompute, Zero};

fn llama3_8b() -> ModelSpec {
    let mut m = resolve_model("llama3-8b").unwrap();
    m.training.global_batch = 64;
    m
}

fn report(model: &ModelSpec, plan: &Plan, profile: &CostProfile) -> Report {
    let mut cluster = autoplan_cluster::resolve_cluster("dgx-h100")
        .unwrap()
        .with_gpus(8)
        .unwrap();
    // Room for DDP's whole replica: the layouts compared, not whether they fit.
    cluster.gpu.hbm_bytes = 1e15;
    let opts = EvalOptions::default().with_profile(profile, model.training.precision);
    Evaluator::new(model, &cluster, opts).report(plan).unwrap()
}

#[test]
fn pytorch_frameworks_hold_fp32_parameters_and_no_master_copy() {
    let model = llama3_8b();
    let n = model.total_params();
    for zero in [0, 1, 3] {
        let plan = Plan {
            dp: 8,
            zero: Zero::stage(zero),
            recompute: Recompute::Full,
            ..Plan::default()
        };
        let state = |p: &CostProfile| {
            let m = report(&model, &plan, p).memory;
            m.weights + m.grads + m.optimizer
        };
        let megatron = state(&CostProfile::MEGATRON_CORE);
        for p in [
            CostProfile::TORCHTITAN,
            CostProfile::TORCHTITAN_EAGER,
            CostProfile::LLM_FOUNDRY,
            CostProfile::MAXTEXT,
        ] {
            assert!(p.fp32_params, "{}", p.name);
            let torch = state(&p);
            // 16 against 18 bytes a parameter, sharded as the stage says: stage 0 holds all 18
            // against 16; stage 1 shards Megatron's optimizer (2 + 4 + 12/8) and is PyTorch's
            // FSDP gathering once per step (the fp32 shard 4/8, the 16-bit copy kept for the
            // step 2, unsharded fp32 gradients 4, the states' shard 8/8); stage 3 everything.
            let (t, g) = match zero {
                0 => (16.0, 18.0),
                1 => (0.5 + 2.0 + 4.0 + 1.0, 6.0 + 1.5),
                _ => (2.0, 2.25),
            };
            let rel = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b;
            assert!(rel(torch, t * n), "{} zero {zero}: {}", p.name, torch / n);
            assert!(rel(megatron, g * n), "zero {zero}: {}", megatron / n);
        }
    }
    // Megatron-Core and DeepSpeed keep the 16-bit layout.
    for p in [
        CostProfile::MEGATRON_CORE,
        CostProfile::DEEPSPEED,
        CostProfile::MEGATRON_LM_2021,
    ] {
        assert!(!p.fp32_params, "{}", p.name);
    }
}

#[test]
fn the_layout_moves_memory_not_time() {
    let model = llama3_8b();
    let plan = Plan {
        dp: 8,
        zero: Zero::stage(3),
        recompute: Recompute::Full,
        ..Plan::default()
    };
    let fp32 = report(&model, &plan, &CostProfile::TORCHTITAN);
    let sixteen = report(
        &model,
        &plan,
        &CostProfile {
            fp32_params: false,
            ..CostProfile::TORCHTITAN
        },
    );
    assert_eq!(fp32.metrics.step_time_s, sixteen.metrics.step_time_s);
    assert!(fp32.memory.total < sixteen.memory.total);
    // The gathered block is the 16-bit copy either way.
    assert_eq!(fp32.memory.transient, sixteen.memory.transient);
}
