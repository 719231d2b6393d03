//! `autoplan collective --fit` end to end (issue 22 item 4): measured timings in, the cluster
//! parameters that reproduce them out.

mod common;

use autoplan_cluster::{resolve_cluster, GroupPlacement};
use autoplan_cost::{AlgoMode, Collective, CostModel};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/collectives_measured.csv");

/// The value after `key` on its output line.
fn value(out: &str, key: &str) -> f64 {
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with(key))
        .unwrap_or_else(|| panic!("no {key} in:\n{out}"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn fits_the_measured_h100_rows_within_their_tolerance() {
    let (code, out, err) = common::autoplan(&[
        "collective",
        "--fit",
        DATA,
        "--cluster",
        "dgx-h100",
        "--hardware",
        "8xH100-SXM5 NVSwitch",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("inter_bw") && out.contains("undetermined"),
        "{out}"
    );
    // The rows are nccl-tests bus bandwidths validated at 20% (calibration.md).
    let worst: f64 = out
        .lines()
        .find(|l| l.starts_with("residual"))
        .and_then(|l| l.split("worst ").nth(1))
        .and_then(|w| w.trim_end_matches('%').parse().ok())
        .unwrap();
    assert!(worst < 20.0, "{out}");
    // Mixed machines are refused, naming the way out.
    let (code, _, err) = common::autoplan(&["collective", "--fit", DATA, "--cluster", "dgx-h100"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--hardware"), "{err}");
}

#[test]
fn recovers_known_link_parameters_from_pair_timings() {
    // Synthetic send/recv timings of every ordered pair of thesis-4node (2 GPUs per node) with
    // known bandwidths, written as the pair CSV.
    let mut truth = resolve_cluster("thesis-4node").unwrap();
    truth.node.intra_bw = 9e9;
    truth.network.inter_bw = 0.5e9;
    let m = CostModel::new(&truth);
    let mut csv = String::from("src,dst,bytes,time_us\n");
    for s in 0..8u32 {
        for d in 0..8u32 {
            if s == d {
                continue;
            }
            let g = if s / 2 == d / 2 {
                GroupPlacement {
                    size: 2,
                    ranks_per_node: 2,
                    nodes: 1,
                }
            } else {
                GroupPlacement {
                    size: 2,
                    ranks_per_node: 1,
                    nodes: 2,
                }
            };
            for b in [1e3, 1e5, 1e7, 1e9] {
                let t = m
                    .collective(Collective::SendRecv, g, b, AlgoMode::NcclTuner)
                    .time;
                csv.push_str(&format!("{s},{d},{b},{}\n", t * 1e6));
            }
        }
    }
    let dir = std::env::temp_dir().join(format!("autoplan-fit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("pairs.csv");
    std::fs::write(&input, csv).unwrap();
    let out_toml = dir.join("fitted.toml");
    let (code, out, err) = common::autoplan(&[
        "collective",
        "--fit",
        input.to_str().unwrap(),
        "--cluster",
        "thesis-4node",
        "--write",
        out_toml.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    for (key, want) in [("intra_bw", 9.0), ("inter_bw", 0.5)] {
        let got = value(&out, key);
        assert!(
            (got / want - 1.0).abs() < 0.02,
            "{key}: {got} vs {want}\n{out}"
        );
    }
    // The per-pair matrix: 56 ordered pairs, in place-experts' --alpha-beta format.
    assert!(out.contains("src,dst,alpha_us,bw_gbps"));
    assert_eq!(out.lines().filter(|l| l.starts_with("0,1,")).count(), 1);
    // The written TOML is a valid cluster with the fitted bandwidths.
    let c = resolve_cluster(out_toml.to_str().unwrap()).unwrap();
    assert!((c.node.intra_bw / 9e9 - 1.0).abs() < 0.02);
    assert!((c.network.inter_bw / 0.5e9 - 1.0).abs() < 0.02);
    std::fs::remove_dir_all(&dir).ok();
}
