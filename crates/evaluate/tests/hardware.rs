//! The hardware rules (`autoplan_evaluate::check_hardware`): a plan valid for the model and
//! GPU count is refused where the cluster cannot run one of its knobs, and only there.

use autoplan_cluster::{resolve_cluster, Cluster};
use autoplan_evaluate::{EvalOptions, Evaluator, Infeasible};
use autoplan_graph::resolve_model;
use autoplan_plan::{Dispatcher, Invalid, Plan};

fn plan(ep: u32, dispatcher: Dispatcher, gpus: u32) -> Plan {
    Plan {
        dp: gpus,
        ep,
        dispatcher,
        ..Plan::default()
    }
}

fn cluster(name: &str, gpus: u32) -> Cluster {
    resolve_cluster(name).unwrap().with_gpus(gpus).unwrap()
}

/// The refusal of `plan` on `cluster` for `model`, if it is a hardware one.
fn hardware_refusal(model: &str, c: &Cluster, p: &Plan) -> Option<String> {
    let m = resolve_model(model).unwrap();
    match Evaluator::new(&m, c, EvalOptions::default()).evaluate(p) {
        Err(Infeasible::Invalid(e @ Invalid::Hardware { .. })) => Some(e.to_string()),
        _ => None,
    }
}

#[test]
fn deepep_needs_nvlink_inside_the_node() {
    let c = cluster("l40sx64", 8);
    let e = hardware_refusal("mixtral-8x7b", &c, &plan(8, Dispatcher::DeepEp, 8))
        .expect("DeepEP on a PCIe node is refused");
    assert!(e.contains("dispatcher=deepep") && e.contains("PCIe"), "{e}");
    assert!(
        e.contains("DeepEP README"),
        "the rule cites its source: {e}"
    );
    // The all-to-all dispatcher runs there; so does DeepEP where no tokens are dispatched
    // (ep = 1: the knob does not matter) or the model has no experts.
    assert_eq!(
        hardware_refusal("mixtral-8x7b", &c, &plan(8, Dispatcher::AllToAll, 8)),
        None
    );
    assert_eq!(
        hardware_refusal("mixtral-8x7b", &c, &plan(1, Dispatcher::DeepEp, 8)),
        None
    );
    assert_eq!(
        hardware_refusal("llama3-8b", &c, &plan(1, Dispatcher::DeepEp, 8)),
        None
    );
}

#[test]
fn deepep_needs_ampere_or_newer() {
    let v100 = cluster("dgx2-v100", 16);
    let e = hardware_refusal("mixtral-8x7b", &v100, &plan(8, Dispatcher::DeepEp, 16))
        .expect("DeepEP on V100 is refused");
    assert!(e.contains("Ampere") && e.contains("V100"), "{e}");
    let thesis = resolve_cluster("thesis-4node").unwrap();
    assert!(hardware_refusal(
        "thesis-txl-24l-4e",
        &thesis,
        &plan(4, Dispatcher::DeepEp, thesis.gpus())
    )
    .is_some());
}

/// On A100 DeepEP builds its intranode kernels only (its SM80 build disables NVSHMEM): an EP
/// group inside one node runs, one across nodes is refused — also a group of 8 strided over
/// two nodes by `moe_tp` 2.
#[test]
fn deepep_on_ampere_stays_inside_the_node() {
    let c = cluster("a100x64", 64);
    assert_eq!(
        hardware_refusal("mixtral-8x7b", &c, &plan(8, Dispatcher::DeepEp, 64)),
        None
    );
    let e = hardware_refusal("deepseek-v3", &c, &plan(16, Dispatcher::DeepEp, 64))
        .expect("DeepEP across two A100 nodes is refused");
    assert!(e.contains("internode") && e.contains("setup.py"), "{e}");
    let strided = Plan {
        moe_tp: 2,
        tp: 2,
        dp: 32,
        sp: true,
        ..plan(8, Dispatcher::DeepEp, 64)
    };
    assert!(hardware_refusal("mixtral-8x22b", &c, &strided).is_some());
    assert_eq!(
        hardware_refusal("deepseek-v3", &c, &plan(16, Dispatcher::AllToAll, 64)),
        None
    );
}

#[test]
fn deepep_runs_on_nvlink_nodes_of_hopper_and_newer() {
    for name in ["dgx-h100", "h800x2048", "b200x256", "gb200-nvl72x4"] {
        let c = cluster(name, 64);
        for (model, ep) in [("mixtral-8x7b", 8), ("deepseek-v3", 64)] {
            assert_eq!(
                hardware_refusal(model, &c, &plan(ep, Dispatcher::DeepEp, 64)),
                None,
                "{model} on {name}"
            );
        }
    }
}

/// Context parallelism needs a fused attention kernel (Transformer Engine runs CP in no other):
/// refused on V100s, run on A100s; a plan without CP runs on both.
#[test]
fn context_parallelism_needs_fused_attention() {
    let cp2 = Plan {
        cp: 2,
        dp: 8,
        ..Plan::default()
    };
    let e = hardware_refusal("gpt-1.7b", &cluster("dgx2-v100", 16), &cp2)
        .expect("CP on V100s is refused");
    assert!(
        e.contains("cp=2") && e.contains("V100") && e.contains("transformer-engine"),
        "{e}"
    );
    assert_eq!(
        hardware_refusal("gpt-1.7b", &cluster("a100x64", 16), &cp2),
        None
    );
    let dp = Plan {
        dp: 16,
        ..Plan::default()
    };
    assert_eq!(
        hardware_refusal("gpt-1.7b", &cluster("dgx2-v100", 16), &dp),
        None
    );
}

/// What the GPU decides whatever the options say: a V100 runs the attention unfused (its `s×s`
/// scores kept: more memory than the same GPU taken as an Ampere). And what the training
/// precision decides under a profile: FP16 training reduces FP16 gradients, BF16 FP32 ones.
#[test]
fn the_gpu_sets_the_attention_kernel_and_the_precision_the_gradient_dtype() {
    use autoplan_cluster::{GpuArch, Precision};
    use autoplan_evaluate::AttentionKernel;
    use autoplan_plan::framework::CostProfile;
    let m = resolve_model("gpt-1.7b").unwrap();
    let v100 = cluster("dgx2-v100", 16);
    let mut ampere = v100.clone();
    ampere.gpu.arch = GpuArch::A100;
    let on = |c: &Cluster| Evaluator::new(&m, c, EvalOptions::default());
    assert_eq!(on(&v100).options().attention, AttentionKernel::Unfused);
    assert_eq!(on(&ampere).options().attention, AttentionKernel::Flash);
    let p = Plan {
        dp: 16,
        ..Plan::default()
    };
    let peak = |c: &Cluster| on(c).memory_peak_bytes(&p).unwrap();
    assert!(
        peak(&v100) > peak(&ampere) + 1e9,
        "{} {}",
        peak(&v100),
        peak(&ampere)
    );
    let grads = |p: Precision| {
        EvalOptions::default()
            .with_profile(&CostProfile::MEGATRON_CORE, p)
            .grad_bytes
    };
    assert_eq!(grads(Precision::Fp16), 2.0);
    assert_eq!(grads(Precision::Bf16), 4.0);
    assert_eq!(grads(Precision::Fp8Current), 4.0);
}
