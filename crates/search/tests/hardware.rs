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
