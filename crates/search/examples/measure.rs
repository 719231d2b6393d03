//! Measure the search on a bundled case: `cargo run --release -p autoplan-search --example
//! measure -- MODEL CLUSTER(a100|h100|h800) NODES SPACE [exhaustive]`.
use autoplan_search::{resolve_space, search, SearchOptions};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let model = autoplan_graph::resolve_model(&a[1]).expect("model");
    let nodes: u32 = a[3].parse().expect("nodes");
    let cluster = match a[2].as_str() {
        "a100" => autoplan_cost::calibration::dgx_a100(nodes),
        "h100" => autoplan_cost::calibration::dgx_h100(nodes),
        _ => autoplan_cost::calibration::hgx_h800(nodes),
    };
    let space = resolve_space(&a[4]).expect("space");
    let ev = autoplan_search::Scorer::new(&model, &cluster, Default::default());
    let exhaustive = a.len() > 5;
    let out = search(
        &ev,
        &space,
        &SearchOptions {
            top_k: 5,
            exhaustive,
        },
        &(),
    );
    println!("{:#?}", out.stats);
    println!(
        "prune ratio {:.4}, plans/s {:.0}",
        out.stats.prune_ratio(),
        out.stats.plans_per_s()
    );
    for r in &out.plans {
        println!("{:.3} s  {:?}", r.step_time_s, r.plan);
    }
    if let Some(nf) = out.no_fit {
        println!("no fit: {nf:?}");
    }
}
