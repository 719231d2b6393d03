//! What the published-run tests share: reading the vendored runs files and the cluster a row
//! ran on.
#![allow(dead_code)]

/// The bundled cluster a row names, resized to its GPU count.
#[allow(unused_imports)]
pub use autoplan_evaluate::validate::bundled_cluster as cluster_for;
use autoplan_evaluate::validate::{case_of, Case, PublishedRun, Skipped};

/// The rows of `data/FILE` a reader of this schema can type (a row with a blank GPU count is
/// not these tests').
pub fn rows(file: &str) -> Vec<PublishedRun> {
    let path = format!("{}/../../data/{file}", env!("CARGO_MANIFEST_DIR"));
    let mut rdr = csv::Reader::from_path(&path).expect(file);
    rdr.deserialize().filter_map(Result::ok).collect()
}

/// The row `id` of either public runs file.
pub fn row(id: &str) -> PublishedRun {
    let mut all = rows("published_runs.csv");
    all.extend(rows("published_runs_2.csv"));
    all.into_iter().find(|r| r.id == id).expect(id)
}

/// Row `r` as `validate` expresses it (the bundled models and clusters), or why it is skipped.
pub fn case(r: &PublishedRun) -> Result<Case, Skipped> {
    case_of(r, &|n| autoplan_graph::resolve_model(n).ok(), &cluster_for)
}
