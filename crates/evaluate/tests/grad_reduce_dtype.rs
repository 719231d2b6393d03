//! The dtype of the DP reduction on the wire, apart from the gradient buffer's: DeepSpeed
//! casts its gradients to `communication_data_type`, by default the 16-bit training dtype
//! (`CostProfile::reduce_in_training_dtype`), where Megatron reduces its FP32 main gradients
//! under BF16.

use autoplan_cluster::Precision;
use autoplan_evaluate::{CommKind, EvalOptions, Evaluator, Report};
use autoplan_graph::{resolve_model, ModelSpec};
use autoplan_plan::framework::CostProfile;
use autoplan_plan::{Plan, Recompute, Zero};

/// BLOOM-176B (BF16, tied embeddings) on 64 A100s, tp 4 × pp 4 × dp 4 under ZeRO-1.
fn bloom(precision: Precision) -> (ModelSpec, Plan) {
    let mut model = resolve_model("bloom-176b").unwrap();
    model.training.precision = precision;
    model.training.global_batch = 64;
    let plan = Plan {
        tp: 4,
        pp: 4,
        dp: 4,
        zero: Zero::stage(1),
        recompute: Recompute::Full,
        ..Plan::default()
    };
    (model, plan)
}

fn report(model: &ModelSpec, plan: &Plan, profile: &CostProfile) -> Report {
    let mut cluster = autoplan_cluster::resolve_cluster("a100x64").unwrap();
    cluster.gpu.hbm_bytes = 1e15;
    let opts = EvalOptions::default().with_profile(profile, model.training.precision);
    Evaluator::new(model, &cluster, opts).report(plan).unwrap()
}

/// Bytes per call of the first row whose description contains `what`.
fn bytes(r: &Report, kind: CommKind, what: &str) -> f64 {
    r.comm
        .iter()
        .find(|c| c.kind == kind && c.what.contains(what))
        .unwrap_or_else(|| panic!("no {what} row"))
        .bytes
}

/// DeepSpeed without its cast: the gradients reduced in their buffer's dtype.
const UNCAST: CostProfile = CostProfile {
    reduce_in_training_dtype: false,
    ..CostProfile::DEEPSPEED
};

#[test]
fn deepspeed_reduces_bf16_gradients_in_bf16() {
    let (model, plan) = bloom(Precision::Bf16);
    let cast = report(&model, &plan, &CostProfile::DEEPSPEED);
    let uncast = report(&model, &plan, &UNCAST);
    let grads = |r: &Report| bytes(r, CommKind::Dp, "DP gradient");
    assert!((grads(&cast) * 2.0 - grads(&uncast)).abs() <= 1e-6 * grads(&uncast));
    // The tied embedding's all-reduce is not cast (`weight._hp_grad`).
    let tied = |r: &Report| bytes(r, CommKind::Dp, "tied embedding");
    assert_eq!(tied(&cast), tied(&uncast));
    assert!(cast.metrics.step_time_s < uncast.metrics.step_time_s);
    // Only the wire changes: the gradient buffer holds what it held.
    assert_eq!(cast.memory.total, uncast.memory.total);
}

#[test]
fn fp32_training_and_megatron_reduce_in_the_buffers_dtype() {
    // FP32 training: `communication_data_type` is FP32, nothing to cast.
    let (model, plan) = bloom(Precision::Fp32);
    let grads = |p: &CostProfile| bytes(&report(&model, &plan, p), CommKind::Dp, "DP gradient");
    assert_eq!(grads(&CostProfile::DEEPSPEED), grads(&UNCAST));
    // Megatron under BF16 reduces its FP32 main gradients: twice DeepSpeed's bytes per call
    // (a reduce-scatter of the whole buffer against an all-reduce of it).
    let (model, plan) = bloom(Precision::Bf16);
    let grads = |p: &CostProfile| bytes(&report(&model, &plan, p), CommKind::Dp, "DP gradient");
    let ratio = grads(&CostProfile::MEGATRON_CORE) / grads(&CostProfile::DEEPSPEED);
    assert!((ratio - 2.0).abs() < 1e-9, "{ratio}");
}

#[test]
fn deepspeed_zero12_reduces_in_fp32_under_ulysses() {
    // ZeRO-1/2's bucketed all-reduce casts to FP32 where sequence parallelism (CP) is on.
    let model = resolve_model("llama2-7b").unwrap();
    let plan = |cp: u32| Plan {
        cp,
        dp: 64 / cp,
        zero: Zero::stage(1),
        ..Plan::default()
    };
    let grads = |p: &CostProfile, cp: u32| {
        let r = report(&model, &plan(cp), p);
        bytes(&r, CommKind::Dp, "DP gradient")
    };
    assert_eq!(grads(&CostProfile::DEEPSPEED, 2), grads(&UNCAST, 2));
    assert_eq!(grads(&CostProfile::DEEPSPEED, 1) * 2.0, grads(&UNCAST, 1));
}
