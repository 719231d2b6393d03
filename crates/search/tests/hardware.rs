//! The search ranks no plan the cluster's hardware cannot run (`check_hardware`): DeepEP's
//! dispatcher on a PCIe cluster is neither ranked nor listed as a variant, and on an NVLink
//! cluster of the same GPUs' generation it stays in the running.

use autoplan_cluster::resolve_cluster;
use autoplan_evaluate::EvalOptions;
use autoplan_graph::resolve_model;
use autoplan_plan::Dispatcher;
use autoplan_search::{resolve_space, search, Scorer, SearchOptions};

fn ranked_dispatchers(model: &str, cluster: &str) -> Vec<(u32, Dispatcher)> {
    let m = resolve_model(model).unwrap();
    let c = resolve_cluster(cluster).unwrap();
    let space = resolve_space("default").unwrap();
    let scorer = Scorer::new(&m, &c, EvalOptions::default());
    let opts = SearchOptions {
        top_k: 200,
        exhaustive: false,
    };
    let out = search(&scorer, &space, &opts, &());
    assert!(
        !out.plans.is_empty(),
        "{model} on {cluster}: nothing ranked"
    );
    out.plans
        .iter()
        .map(|r| (r.plan.ep, r.plan.dispatcher))
        .collect()
}

#[test]
fn no_deepep_plan_on_pcie_nodes() {
    let ranked = ranked_dispatchers("qwen3-30b-a3b", "l40sx64");
    assert!(
        ranked
            .iter()
            .all(|&(ep, d)| ep == 1 || d != Dispatcher::DeepEp),
        "a DeepEP plan ranked on PCIe nodes: {ranked:?}"
    );
    assert!(ranked.iter().any(|&(ep, _)| ep > 1), "no EP plan ranked");
}

#[test]
fn deepep_plans_rank_on_nvlink_nodes() {
    let ranked = ranked_dispatchers("qwen3-30b-a3b", "h200x128");
    assert!(
        ranked
            .iter()
            .any(|&(ep, d)| ep > 1 && d == Dispatcher::DeepEp),
        "no DeepEP plan among the first 200 on H200 nodes: {ranked:?}"
    );
}

/// On an NVL72 rack (multi-node NVLink) the flex dispatcher is HybridEP's from Megatron-Core
/// 0.16 (`Framework::check_on`): ranked under 0.19, never under 0.15 nor torchtitan.
#[test]
fn flex_dispatch_on_an_nvl72_rack_needs_megatron_core_0_16() {
    use autoplan_plan::Framework;
    use autoplan_search::{search_case_for, Target};
    let m = resolve_model("qwen3-235b-a22b").unwrap();
    let c = resolve_cluster("gb200-nvl72x4")
        .unwrap()
        .with_gpus(128)
        .unwrap();
    assert!(c.multi_node_nvlink());
    let space = resolve_space("default").unwrap();
    let ranked = |framework| {
        let target = Target {
            framework,
            min_headroom_bytes: 0.0,
        };
        let opts = SearchOptions {
            top_k: 100,
            exhaustive: false,
        };
        search_case_for(&m, &c, EvalOptions::default(), target, &space, &opts, &())
            .unwrap()
            .outcome
            .plans
            .iter()
            .map(|r| (r.plan.ep, r.plan.dispatcher))
            .collect::<Vec<_>>()
    };
    let flex = |v: &[(u32, Dispatcher)]| v.iter().any(|&(ep, d)| ep > 1 && d == Dispatcher::DeepEp);
    let new = ranked(Framework::MegatronCore { minor: 19 });
    assert!(flex(&new), "no flex plan under 0.19: {new:?}");
    let old = ranked(Framework::MegatronCore { minor: 15 });
    assert!(
        !old.is_empty() && !flex(&old),
        "a flex plan under 0.15: {old:?}"
    );
    // torchtitan's EP backends are `standard` and DeepEP's: none for the rack's NVLink.
    let tt = ranked(Framework::TorchTitan);
    assert!(
        !tt.is_empty() && !flex(&tt),
        "a DeepEP plan under torchtitan: {tt:?}"
    );
}
