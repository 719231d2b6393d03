//! The optimizer step's bytes per parameter (`ADAM_STEP_BYTES`) against its kernels as an H200
//! ran them (`results/h200/adam.csv`, `tools/gpu/kernels_probe.py adam`: PyTorch's fused
//! AdamW, `_foreach_norm`, `_foreach_copy_` into BF16, over 64M–1G fp32 parameters). A count
//! is right when the kernel streams its counted bytes at about the HBM bandwidth that a plain
//! add reaches on the same GPU (`results/h200/hbm.csv`): a count too low shows as a bandwidth
//! far below it (the copy at its 2-byte write alone: a quarter of it), one too high as a bandwidth
//! above it.

use std::collections::HashMap;
use std::path::PathBuf;

use autoplan_evaluate::{ADAM_BYTES_PER_PARAM, ADAM_STEP_BYTES};

fn rows(name: &str) -> Vec<HashMap<String, String>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../results/h200")
        .join(name);
    let mut r = csv::Reader::from_path(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let head = r.headers().unwrap().clone();
    r.records()
        .map(|rec| {
            head.iter()
                .zip(rec.unwrap().iter())
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

fn f(r: &HashMap<String, String>, k: &str) -> f64 {
    r[k].parse()
        .unwrap_or_else(|e| panic!("{k} = {:?}: {e}", r[k]))
}

#[test]
fn adam_step_bytes_are_what_its_kernels_stream() {
    // The add's bandwidth past the caches (≥ 100 MB moved: 4.3–4.4 TB/s).
    let add = rows("hbm.csv")
        .iter()
        .filter(|r| r["op"] == "add" && f(r, "bytes") >= 1e8)
        .map(|r| f(r, "bytes") / f(r, "time_s"))
        .fold(0.0, f64::max);
    assert!(add > 3.0e12, "add {add}");
    let measured = rows("adam.csv");
    assert_eq!(ADAM_BYTES_PER_PARAM, 38.0);
    for (op, bytes) in ADAM_STEP_BYTES {
        let at: Vec<_> = measured
            .iter()
            .filter(|r| r["op"] == op && f(r, "params") >= 2.5e8)
            .collect();
        assert_eq!(at.len(), 2, "{op}: 256M and 1G parameters");
        for r in at {
            // The probe counted what the model counts.
            assert_eq!(f(r, "bytes_per_param"), bytes, "{op}");
            let share = bytes * f(r, "params") / f(r, "time_s") / add;
            eprintln!(
                "{op:12} {:6.0}M params: {share:.2} of the add's bandwidth",
                f(r, "params") / 1e6
            );
            assert!(
                (0.6..=1.05).contains(&share),
                "{op}: {share:.2} of the add's bandwidth"
            );
        }
    }
}
