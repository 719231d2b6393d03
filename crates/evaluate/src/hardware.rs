//! What a plan's knobs need of the hardware: a plan valid for the model and GPU count
//! ([`Plan::check`]) may still name an implementation the cluster's GPUs or nodes cannot run.
//! One home for those rules; the evaluator applies them to every plan it prices, so `search`,
//! `evaluate`, `sweep` and `validate` refuse the same plans.

use autoplan_cluster::{Cluster, GpuArch, GroupPlacement, IntraFabric};
use autoplan_graph::ModelSpec;
use autoplan_plan::knob::{Context, Knob};
use autoplan_plan::{Dim, Dispatcher, Invalid, Plan};

/// DeepEP's requirements (deepseek-ai/DeepEP `README.md`, "Requirements": "Ampere (SM80),
/// Hopper (SM90) GPUs, or other architectures with SM90 PTX ISA support", "NVLink for
/// intranode communication", "RDMA network for internode communication"). Not in the
/// reference notes, which measure DeepEP only on NVLink nodes of SM90 and SM100 GPUs
/// (collectives.md §4.5); Megatron-Core's `flex` dispatcher runs DeepEP's kernels
/// (frameworks.md §1.6, `--moe-flex-dispatcher-backend deepep`).
const DEEPEP_SOURCE: &str = "DeepEP README, Requirements; collectives.md §4.5";

/// DeepEP on Ampere: its SM80 build (`DISABLE_SM90_FEATURES`, "Disable some SM90 features:
/// FP8, launch methods, and TMA") asserts NVSHMEM is disabled, "Disable internode and
/// low-latency kernels" (deepseek-ai/DeepEP `setup.py`; not in the reference notes): on an
/// A100 only the intranode kernels run.
const DEEPEP_SM80_SOURCE: &str = "DeepEP setup.py, DISABLE_SM90_FEATURES";

/// Context parallelism needs a fused attention kernel: Transformer Engine runs CP in its
/// FlashAttention and FusedAttention backends only ("Disabling UnfusedDotProductAttention as it
/// does not support context parallelism"), neither of which runs below sm80, and Megatron-Core's
/// local attention refuses CP ("Context parallelism is only supported by
/// TEDotProductAttention!").
const CP_SOURCE: &str = "transformer-engine 2.9.0 pytorch/attention/dot_product_attention/\
                         utils.py L414-421, L743-746; megatron-core 0.19.2 \
                         transformer/dot_product_attention.py L56-59";

/// Whether `cluster` can run `plan` for `model`; the first knob it cannot run otherwise.
/// Allocation-free where it accepts (the search calls it for every plan it scores).
///
/// - `cp > 1` on a GPU no fused attention kernel runs on (`GpuArch::runs_fused_attention`:
///   V100, Pascal): no framework autoplan exports runs context parallelism with unfused
///   attention (Transformer Engine runs CP in its fused kernels only; sources in `CP_SOURCE`).
/// - `dispatcher=deepep` where the dispatcher matters (MoE, `ep·moe_tp > 1`): DeepEP's
///   intranode kernels move tokens over NVLink between every pair of a node's GPUs (a PCIe
///   node or a ring of GPUs has none; a node of one GPU has no intranode traffic), and its
///   kernels are built for Ampere and newer (V100 and Pascal are refused; a GPU of arch
///   `other` is not judged); on Ampere without its internode kernels, so an EP group that
///   spans nodes (placed as the evaluator places it, on the physical nodes) is refused there.
pub fn check_hardware(plan: &Plan, model: &ModelSpec, cluster: &Cluster) -> Result<(), Invalid> {
    let older = older_than_ampere(cluster.gpu.arch);
    if let (true, Some(gpus)) = (plan.cp > 1, older) {
        return Err(Invalid::Hardware {
            knob: "cp",
            value: plan.cp.to_string(),
            needs: "a fused attention kernel (FlashAttention or cuDNN's: compute capability \
                    8.0, Ampere or newer; below it only unfused attention runs), in which \
                    alone Transformer Engine runs context parallelism",
            found: gpus,
            cite: CP_SOURCE,
        });
    }
    // The other rules are DeepEP's: every other plan returns before building anything.
    if plan.dispatcher != Dispatcher::DeepEp
        || !Knob::Dispatcher.matters(&Context::new(plan, model.moe.is_some()))
    {
        return Ok(());
    }
    let refuse = |needs, found, cite| {
        Err(Invalid::Hardware {
            knob: "dispatcher",
            value: "deepep".into(),
            needs,
            found,
            cite,
        })
    };
    let nvlink = "NVLink between every pair of a node's GPUs";
    if cluster.node.gpus_per_node > 1 {
        match cluster.node.fabric {
            IntraFabric::Pcie => return refuse(nvlink, "PCIe nodes", DEEPEP_SOURCE),
            IntraFabric::Ring => {
                return refuse(nvlink, "nodes whose GPUs form a ring", DEEPEP_SOURCE)
            }
            IntraFabric::Nvswitch | IntraFabric::FullMesh => {}
        }
    }
    if let Some(gpus) = older {
        return refuse("an Ampere (SM80) or newer GPU", gpus, DEEPEP_SOURCE);
    }
    if cluster.gpu.arch == GpuArch::A100 && ep_group(plan, cluster).nodes > 1 {
        return refuse(
            "Hopper or newer GPUs for an EP group across nodes (its internode kernels)",
            "A100s, on which DeepEP builds its intranode kernels only",
            DEEPEP_SM80_SOURCE,
        );
    }
    Ok(())
}

/// The cluster's GPUs as a refusal names them where they are older than Ampere (compute
/// capability below 8.0: `GpuArch::runs_fused_attention` is false), which both rules refuse.
fn older_than_ampere(arch: GpuArch) -> Option<&'static str> {
    match arch {
        _ if arch.runs_fused_attention() => None,
        GpuArch::V100 => Some("V100s (SM70)"),
        GpuArch::Pascal => Some("Pascal GPUs (SM60/61)"),
        _ => Some("GPUs older than Ampere"),
    }
}

/// Where `plan`'s EP group lies on the cluster's physical nodes: the folded MoE grid
/// (`Plan::moe_degree`, as the evaluator's `ctx` places it) in the plan's rank order.
fn ep_group(plan: &Plan, cluster: &Cluster) -> GroupPlacement {
    let order = plan.order.0;
    let degrees = order.map(|d| plan.moe_degree(d));
    GroupPlacement::of(
        cluster.node.gpus_per_node,
        &degrees,
        &order.map(|d| d == Dim::Cp),
    )
}
