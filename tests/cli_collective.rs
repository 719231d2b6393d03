//! `autoplan collective` end to end (issue 3, item 5): every valid algorithm with its time and
//! bandwidths, the chosen one marked; `--validate` against `collectives_measured.csv`.

mod common;
use common::autoplan;

fn json_rows(args: &[&str]) -> Vec<serde_json::Value> {
    let mut all = vec!["collective"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--format", "json"]);
    let (code, out, err) = autoplan(&all);
    assert_eq!(code, Some(0), "{err}");
    serde_json::from_str::<Vec<serde_json::Value>>(&out).expect("a JSON list")
}

fn chosen_time(rows: &[serde_json::Value]) -> f64 {
    let chosen: Vec<_> = rows.iter().filter(|r| r["chosen"] == true).collect();
    assert_eq!(chosen.len(), 1, "exactly one chosen: {rows:?}");
    chosen[0]["time_s"].as_f64().unwrap()
}

#[test]
fn json_lists_every_algorithm_and_marks_the_cheapest() {
    let args = [
        "--cluster",
        "a100x64",
        "--op",
        "allreduce",
        "--ranks",
        "64",
        "--bytes",
        "1GiB",
    ];
    // Under NCCL (the default library), across nodes without NVLink SHARP: ring and tree.
    let nccl = json_rows(&args);
    let names: Vec<&str> = nccl
        .iter()
        .map(|r| r["algorithm"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ring", "double-binary-tree"], "{nccl:?}");
    let mut any_args = args.to_vec();
    any_args.extend(["--library", "any"]);
    let rows = json_rows(&any_args);
    // The seeds' full menu, no in-switch reduction on A100: six all-reduce algorithms.
    assert_eq!(rows.len(), 6, "{rows:?}");
    for r in &rows {
        for key in [
            "algorithm",
            "protocol",
            "time_s",
            "algbw_gbps",
            "busbw_gbps",
            "chosen",
        ] {
            assert!(r.get(key).is_some(), "{key} missing in {r}");
        }
        // busbw = algbw × 2(n−1)/n (nccl-tests).
        let (alg, bus) = (
            r["algbw_gbps"].as_f64().unwrap(),
            r["busbw_gbps"].as_f64().unwrap(),
        );
        assert!((bus - alg * 2.0 * 63.0 / 64.0).abs() < 1e-9 * bus);
    }
    let min = rows
        .iter()
        .map(|r| r["time_s"].as_f64().unwrap())
        .fold(f64::INFINITY, f64::min);
    assert_eq!(chosen_time(&rows), min);
}

#[test]
fn the_same_tp8_allreduce_costs_more_across_nodes() {
    let intra = json_rows(&[
        "--cluster",
        "dgx-h100",
        "--op",
        "allreduce",
        "--ranks",
        "8",
        "--bytes",
        "64MiB",
    ]);
    let inter = json_rows(&[
        "--cluster",
        "dgx-h100",
        "--op",
        "allreduce",
        "--ranks",
        "8",
        "--ranks-per-node",
        "1",
        "--bytes",
        "64MiB",
    ]);
    // In-switch reduction is offered only inside the node.
    assert!(intra.iter().any(|r| r["algorithm"] == "in-switch"));
    assert!(inter.iter().all(|r| r["algorithm"] != "in-switch"));
    assert!(chosen_time(&inter) > 5.0 * chosen_time(&intra));
}

#[test]
fn fixed_algorithm_is_chosen() {
    let rows = json_rows(&[
        "--cluster",
        "a100x64",
        "--op",
        "alltoall",
        "--ranks",
        "32",
        "--bytes",
        "256MB",
        "--algo",
        "bruck",
    ]);
    let chosen: Vec<_> = rows.iter().filter(|r| r["chosen"] == true).collect();
    assert_eq!(chosen[0]["algorithm"], "bruck");
}

#[test]
fn table_marks_the_chosen_algorithm() {
    let (code, out, err) = autoplan(&[
        "collective",
        "--cluster",
        "a100x64",
        "--op",
        "allgather",
        "--ranks",
        "8",
        "--bytes",
        "4096",
        "--mode",
        "nccl-like",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out.lines().filter(|l| l.starts_with('*')).count(),
        1,
        "{out}"
    );
    assert!(out.contains("busbw"));
}

#[test]
fn validate_expresses_every_row_within_tolerance() {
    let csv = concat!(env!("CARGO_MANIFEST_DIR"), "/data/collectives_measured.csv");
    let (code, out, err) = autoplan(&["collective", "--validate", csv]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("20 rows predicted (0 out of tolerance"),
        "{out}"
    );
}

#[test]
fn bad_input_is_a_clear_error() {
    let (code, _, err) = autoplan(&[
        "collective",
        "--cluster",
        "no-such",
        "--op",
        "allreduce",
        "--ranks",
        "8",
        "--bytes",
        "1MB",
    ]);
    assert_eq!(code, Some(2));
    assert!(err.contains("no-such") && err.contains("a100x64"), "{err}");
    let (code, _, err) = autoplan(&[
        "collective",
        "--cluster",
        "a100x64",
        "--op",
        "allreduce",
        "--ranks",
        "8",
        "--bytes",
        "1XB",
    ]);
    assert_ne!(code, Some(0));
    assert!(err.contains("1XB"), "{err}");
    let (code, _, err) = autoplan(&[
        "collective",
        "--cluster",
        "a100x64",
        "--op",
        "allreduce",
        "--ranks",
        "12",
        "--ranks-per-node",
        "8",
        "--bytes",
        "1MB",
    ]);
    assert_eq!(code, Some(2));
    assert!(err.contains("multiple"), "{err}");
    // A file that cannot be read is an I/O error: exit 4 (issue 21's scheme).
    let (code, _, err) = autoplan(&["collective", "--validate", "/no/such/file.csv"]);
    assert_eq!(code, Some(4));
    assert!(err.contains("/no/such/file.csv"), "{err}");
}
