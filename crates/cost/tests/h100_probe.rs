//! Hopper's GEMM constants against what they were measured from: `results/h100/` (made by
//! `tools/gpu/probe.py` on one H100; its README says how). The measurements are data, not a
//! fit: `fp8_rate`, `attn_rate` and `attn_bwd` must be their medians, and the GEMM form with
//! u = 1 (no wave loss) must reproduce the isolated timings, which the tile-wave form does not.

use std::collections::HashMap;
use std::path::PathBuf;

use autoplan_cluster::{GpuArch, Precision};
use autoplan_cost::calibration::gpu_h100;
use autoplan_cost::compute::{arch_efficiency, ArchEfficiency, GemmPricer};

fn read(name: &str) -> Vec<HashMap<String, String>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../results/h100")
        .join(name);
    let mut r = csv::Reader::from_path(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let head = r.headers().unwrap().clone();
    r.records()
        .map(|rec| {
            let rec = rec.unwrap();
            head.iter()
                .zip(rec.iter())
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

fn f(row: &HashMap<String, String>, k: &str) -> f64 {
    row[k]
        .parse()
        .unwrap_or_else(|e| panic!("{k} = {:?}: {e}", row[k]))
}

fn median(mut v: Vec<f64>) -> f64 {
    assert!(!v.is_empty());
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// Per large shape of `ratio.csv`: (median BF16 TFLOP/s, median FP8 TFLOP/s).
fn rates() -> Vec<(String, f64, f64)> {
    let rows = read("ratio.csv");
    let mut labels: Vec<String> = rows.iter().map(|r| r["label"].clone()).collect();
    labels.sort();
    labels.dedup();
    labels
        .into_iter()
        .map(|l| {
            let of = |d: &str| {
                median(
                    rows.iter()
                        .filter(|r| r["label"] == l && r["dtype"] == d)
                        .map(|r| f(r, "tflops"))
                        .collect(),
                )
            };
            let (b, e) = (of("bf16"), of("fp8"));
            (l, b, e)
        })
        .collect()
}

#[test]
fn hopper_fp8_rate_is_the_measured_median() {
    let r: Vec<f64> = rates().iter().map(|(_, b, e)| e / (2.0 * b)).collect();
    assert_eq!(r.len(), 5);
    for x in &r {
        assert!((0.8..1.0).contains(x), "FP8 : 2×BF16 = {x}");
    }
    let m = median(r);
    let table = arch_efficiency(GpuArch::H100).fp8_rate;
    assert!(
        (table - m).abs() <= 0.01,
        "ARCH_TABLE {table}, measured median {m:.3}"
    );
}

/// (mean |error|, worst error, label) of `e`'s GEMM times against `gemm.csv`'s graph-timed
/// (GPU-only) ones, over the shapes whose bytes at the full HBM bandwidth take under half the
/// measured time (compute-bound: the math form, not the HBM constants, decides them).
fn against_measured(e: &ArchEfficiency) -> (f64, f64, String, usize) {
    let gpu = gpu_h100("H100", GpuArch::H100);
    let (mut sum, mut worst, mut which, mut n) = (0.0, 0.0f64, String::new(), 0);
    for row in read("gemm.csv") {
        let (m, nn, k, t) = (f(&row, "m"), f(&row, "n"), f(&row, "k"), f(&row, "time_s"));
        let (p, bytes) = match row["dtype"].as_str() {
            "bf16" => (Precision::Bf16, 2.0),
            "fp8" => (Precision::Fp8, 1.0),
            d => panic!("dtype {d}"),
        };
        if (m * k + k * nn + m * nn) * bytes / gpu.hbm_bw > 0.5 * t {
            continue;
        }
        let pred = GemmPricer::new(&gpu, e, p).time(2.0 * m * nn * k, m, nn, k);
        let err = pred / t - 1.0;
        sum += err.abs();
        n += 1;
        if err.abs() > worst.abs() {
            worst = err;
            which = format!("{} {}", row["label"], row["dtype"]);
        }
    }
    (sum / n as f64, worst, which, n)
}

#[test]
fn hopper_gemm_form_reproduces_isolated_cublas_timings() {
    // Isolated-kernel constants from the same files: BF16 efficiency of the large shapes,
    // latency the fastest kernel measured (the floor of a launch with nothing to compute).
    let eff = median(rates().iter().map(|(_, b, _)| b / 989.0).collect());
    let floor = read("gemm.csv")
        .iter()
        .map(|r| f(r, "time_s"))
        .fold(f64::INFINITY, f64::min);
    assert!((0.65..0.8).contains(&eff) && floor < 5e-6, "{eff} {floor}");
    let hopper = ArchEfficiency {
        gemm_eff_max: eff,
        gemm_latency: floor,
        ..*arch_efficiency(GpuArch::H100)
    };
    let (mean, worst, which, n) = against_measured(&hopper);
    eprintln!(
        "u = 1: {n} shapes, mean |error| {:.1}%, worst {which} {:+.1}%",
        mean * 100.0,
        worst * 100.0
    );
    assert!(n >= 60, "{n} compute-bound shapes");
    assert!(
        mean <= 0.10 && worst.abs() <= 0.25,
        "mean {mean}, worst {which} {worst}"
    );
    // The tile-wave form at the same constants does not: it is why Hopper dropped it.
    let waves = ArchEfficiency {
        wave_quantization: true,
        ..hopper
    };
    let (mean_w, worst_w, which_w, _) = against_measured(&waves);
    eprintln!(
        "tile waves: mean |error| {:.1}%, worst {which_w} {:+.1}%",
        mean_w * 100.0,
        worst_w * 100.0
    );
    assert!(mean_w > 0.2, "tile waves fit too: {mean_w}");
}

#[test]
fn hopper_attention_constants_are_the_measured_medians() {
    // FlashAttention (PyTorch SDPA, causal, BF16) at training shapes: head dim 128, 4K tokens
    // or more (`attention.csv`); its forward rate over the large BF16 GEMMs' (`ratio.csv`).
    let gemm = median(rates().iter().map(|(_, b, _)| *b).collect());
    let (mut rate, mut bwd) = (Vec::new(), Vec::new());
    for r in read("attention.csv") {
        let (b, s, h, d) = (
            f(&r, "batch"),
            f(&r, "seq"),
            f(&r, "heads"),
            f(&r, "head_dim"),
        );
        if d != 128.0 || s < 4096.0 {
            continue;
        }
        let fwd = f(&r, "fwd_s");
        rate.push(4.0 * b * h * d * s * s / 2.0 / fwd / 1e12 / gemm);
        bwd.push(f(&r, "bwd_s") / fwd);
    }
    assert_eq!(rate.len(), 4);
    let (rate, bwd) = (median(rate), median(bwd));
    let e = arch_efficiency(GpuArch::H100);
    assert!(
        (e.attn_rate - rate).abs() <= 0.01,
        "ARCH_TABLE {} vs {rate:.3}",
        e.attn_rate
    );
    assert!(
        (e.attn_bwd - bwd).abs() <= 0.05,
        "ARCH_TABLE {} vs {bwd:.3}",
        e.attn_bwd
    );
}
