//! What the published-run tests share: reading the vendored runs files and the cluster a row
//! ran on.
#![allow(dead_code)]

use autoplan_cluster::Cluster;
use autoplan_evaluate::validate::{cluster_name_for, PublishedRun};

/// The rows of `data/FILE` a reader of this schema can type (a row with a blank GPU count is
/// not these tests').
pub fn rows(file: &str) -> Vec<PublishedRun> {
    let path = format!("{}/../../data/{file}", env!("CARGO_MANIFEST_DIR"));
    let mut rdr = csv::Reader::from_path(&path).expect(file);
    rdr.deserialize().filter_map(Result::ok).collect()
}

/// The bundled cluster of a row's GPU, resized to its GPU count.
pub fn cluster_for(gpu: &str, n: u32, _gpn: u32) -> Option<Cluster> {
    autoplan_cluster::resolve_cluster(cluster_name_for(gpu)?)
        .ok()?
        .with_gpus(n)
        .ok()
}

/// The row `id` of either public runs file.
pub fn row(id: &str) -> PublishedRun {
    let mut all = rows("published_runs.csv");
    all.extend(rows("published_runs_2.csv"));
    all.into_iter().find(|r| r.id == id).expect(id)
}
