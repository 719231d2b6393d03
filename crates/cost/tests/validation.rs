//! The model against every row of `data/collectives_measured.csv`: busbw within 20%,
//! small-message time (rows with only `time_us`) within 30%; rows it cannot express are listed
//! with the reason.

use std::path::PathBuf;

use autoplan_cost::validation::{predict, MeasuredRow};

fn data_file() -> PathBuf {
    // crates/cost → workspace root → its vendored `data/`.
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.join("data/collectives_measured.csv")
}

fn rows() -> Vec<MeasuredRow> {
    let path = data_file();
    let mut rd = csv::Reader::from_path(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    rd.deserialize::<MeasuredRow>()
        .map(|r| r.expect("well-formed row"))
        .collect()
}

#[test]
fn every_expressible_row_within_tolerance() {
    let rows = rows();
    assert!(rows.len() >= 20, "expected the 20 rows of the file");
    let mut failures = Vec::new();
    let mut expressed = 0;
    for row in &rows {
        match predict(row) {
            Ok(p) => {
                expressed += 1;
                println!(
                    "{:4} {:?} {:?}/{:?} n={} measured {:.1} predicted {:.1} ({:+.1}%)",
                    p.id,
                    p.collective,
                    p.algorithm,
                    p.protocol,
                    p.group.size,
                    p.measured,
                    p.predicted,
                    100.0 * p.error()
                );
                if !p.passes() {
                    failures.push(format!("{} {:+.1}%", p.id, 100.0 * p.error()));
                }
            }
            Err(u) => println!("{:4} not expressible: {}", u.id, u.reason),
        }
    }
    assert!(failures.is_empty(), "rows out of tolerance: {failures:?}");
    assert!(expressed >= 18, "only {expressed} rows expressed");
}

#[test]
fn latency_constants_follow_from_rows_c15_c17() {
    // START_LAT and HOP_NVLINK are the intercept and slope of c15 (2 steps) and c17 (14 steps).
    let rows = rows();
    let t = |id: &str| {
        rows.iter()
            .find(|r| r.id == id)
            .and_then(|r| r.time_us)
            .expect("row with a time")
    };
    let slope = (t("c17") - t("c15")) / 12.0;
    let intercept = t("c15") - 2.0 * slope;
    assert!((slope * 1e-6 - autoplan_cost::calibration::HOP_NVLINK).abs() < 0.1e-6);
    assert!((intercept * 1e-6 - autoplan_cost::calibration::START_LAT).abs() < 0.2e-6);
}

/// The bundled clusters that describe the same hardware (cluster files carry the calibrated
/// constants) predict every row within tolerance too.
#[test]
fn bundled_clusters_reproduce_the_rows() {
    let machine = |hardware: &str, _nodes: u32| {
        let h = hardware.to_ascii_uppercase();
        let name = if h.contains("H800") {
            "h800x2048"
        } else if h.contains("H100") {
            "h100x256"
        } else if h.contains("A100") {
            "a100x64"
        } else {
            return None;
        };
        Some(autoplan_cluster::resolve_cluster(name).expect("bundled cluster"))
    };
    let mut expressed = 0;
    for row in rows() {
        if let Ok(p) = autoplan_cost::validation::predict_on(&row, machine) {
            expressed += 1;
            assert!(
                p.passes(),
                "{} on {}: {:+.1}%",
                p.id,
                p.cluster,
                100.0 * p.error()
            );
        }
    }
    assert!(expressed >= 18);
}

/// The bounds above hold with collectives as NCCL runs them: the reference machines use the
/// default library, and every row measured with NCCL (not DeepEP's kernels) is predicted with
/// an algorithm NCCL has.
#[test]
fn nccl_rows_are_predicted_with_nccl_algorithms() {
    use autoplan_cost::{nccl_algorithms_of, AlgoMode, CollectiveLibrary};
    let mut nccl_rows = 0;
    for row in &rows() {
        let Ok(p) = predict(row) else { continue };
        let machine = autoplan_cost::validation::hardware_cluster(&row.hardware, 1).unwrap();
        assert_eq!(machine.library, CollectiveLibrary::Nccl);
        if p.mode != AlgoMode::Any {
            nccl_rows += 1;
            assert!(
                nccl_algorithms_of(p.collective).contains(&p.algorithm),
                "{}: {} is not an NCCL algorithm",
                p.id,
                p.algorithm
            );
        }
    }
    assert!(nccl_rows >= 15, "only {nccl_rows} NCCL rows");
}
