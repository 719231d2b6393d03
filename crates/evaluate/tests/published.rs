//! Validation against `../shared/data/published_runs.csv` (the bounds of issue 4).

use autoplan_cluster::Cluster;
use autoplan_evaluate::validate::{validate, PublishedRun};

fn runs() -> Vec<PublishedRun> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/data/published_runs.csv"
    );
    let mut rdr = csv::Reader::from_path(path).expect("published_runs.csv");
    rdr.deserialize().map(|r| r.expect("row")).collect()
}

fn cluster_for(gpu: &str, n: u32, gpn: u32) -> Option<Cluster> {
    let g = gpu.to_ascii_lowercase();
    let nodes = n.div_ceil(gpn);
    let mut c = if g.contains("a100") {
        autoplan_cost::calibration::dgx_a100(nodes)
    } else if g.contains("h100") {
        autoplan_cost::calibration::dgx_h100(nodes)
    } else {
        return None;
    };
    if n < c.node.gpus_per_node {
        c.node.gpus_per_node = n;
        c.nodes = 1;
    }
    Some(c)
}

#[test]
fn published_runs() {
    let v = validate(
        &runs(),
        &|n| autoplan_graph::resolve_model(n).ok(),
        &cluster_for,
    );
    for r in &v.rows {
        println!(
            "{:40} {:18} meas {:9.3} pred {:9.3} err {:+6.1}%  step {:7.3}s mem {:6.1} GiB  {}",
            r.id,
            r.figure.name(),
            r.measured,
            r.predicted,
            100.0 * r.error,
            r.step_time_s,
            r.memory_peak_gib,
            r.plan
        );
    }
    for s in &v.skipped {
        println!("SKIP {:40} {}", s.id, s.reason);
    }
    println!(
        "rows {} skipped {} MAPE {:.1}% worst {:?} {:+.1}%",
        v.rows.len(),
        v.skipped.len(),
        100.0 * v.mape,
        v.worst,
        100.0 * v.worst_error
    );
}
