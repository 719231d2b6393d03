//! The `autoplan sweep`, `merge` and `diff` commands end to end, with the real search: a small
//! spec (search_spaces/sweeps/small.toml) swept by the binary must equal the committed golden
//! CSV (results/golden/small.csv), with 1 and 2 threads and sharded-then-merged.
//!
//! When a deliberate model change moves the numbers, look at the summary this test prints
//! (`autoplan diff` of golden vs new) and re-bless with
//! `AUTOPLAN_BLESS=1 cargo test --test sweep_golden`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const SPEC: &str = "search_spaces/sweeps/small.toml";
const GOLDEN: &str = "results/golden/small.csv";

fn autoplan(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_autoplan"))
        .args(args)
        .output()
        .expect("run autoplan");
    assert!(
        out.status.code().is_some(),
        "autoplan {args:?} was killed: {out:?}"
    );
    out
}

fn ok(args: &[&str]) -> Output {
    let out = autoplan(args);
    assert!(
        out.status.success(),
        "autoplan {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn dir(test: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("sweep_golden-{test}"));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

/// Panics with `autoplan diff`'s summary (not two whole files) when `file` is not the golden.
fn assert_golden(file: &Path, what: &str) {
    let golden = fs::read_to_string(GOLDEN).unwrap();
    if fs::read_to_string(file).unwrap() != golden {
        let diff = autoplan(&["diff", GOLDEN, file.to_str().unwrap(), "--threshold", "0"]);
        panic!(
            "{what}: differs from {GOLDEN}:\n{}{}\nIf the model changed deliberately: AUTOPLAN_BLESS=1 cargo test --test sweep_golden",
            String::from_utf8_lossy(&diff.stdout),
            String::from_utf8_lossy(&diff.stderr)
        );
    }
}

fn sweep(out: &Path, extra: &[&str]) -> String {
    let out_s = out.to_str().unwrap();
    let mut args = vec!["sweep", "--spec", SPEC, "--out", out_s];
    args.extend_from_slice(extra);
    ok(&args);
    fs::read_to_string(out).unwrap()
}

#[test]
fn small_sweep_matches_the_golden_csv() {
    let d = dir("golden");
    let one = sweep(&d.join("one.csv"), &["--threads", "1"]);
    if std::env::var_os("AUTOPLAN_BLESS").is_some() {
        fs::write(GOLDEN, &one).unwrap();
    }
    assert_golden(&d.join("one.csv"), "1 thread");
    sweep(&d.join("two.csv"), &["--threads", "2"]);
    assert_golden(&d.join("two.csv"), "2 threads");
    let golden = fs::read_to_string(GOLDEN).unwrap();
    // The golden file is not vacuous: plans and an infeasible case.
    assert!(golden.contains(",ok,,2,1,") && golden.contains(",infeasible,out of memory"));
}

#[test]
fn shards_merged_by_the_cli_equal_the_golden_csv() {
    let d = dir("shards");
    let mut parts = Vec::new();
    for k in 1..=3 {
        let p = d.join(format!("{k}.csv"));
        sweep(&p, &["--threads", "1", "--shard", &format!("{k}/3")]);
        parts.push(p.to_str().unwrap().to_string());
    }
    let all = d.join("all.csv");
    let mut args = vec!["merge", "--spec", SPEC, "-o", all.to_str().unwrap()];
    args.extend(parts.iter().rev().map(String::as_str));
    ok(&args);
    assert_golden(&all, "3 shards merged");
    // A missing shard is caught with --spec.
    let out = autoplan(&["merge", "--spec", SPEC, &parts[0], &parts[1]]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing"));
}

#[test]
fn resume_after_a_stop_and_a_torn_row_equals_the_golden_csv() {
    let d = dir("resume");
    let out = d.join("out.csv");
    sweep(&out, &["--threads", "2", "--max-cases", "3"]);
    // Tear the last row as a kill during a write would.
    let partial = fs::read_to_string(&out).unwrap();
    fs::write(&out, &partial[..partial.len() - 10]).unwrap();
    // Without --resume the file is left alone.
    let refused = autoplan(&["sweep", "--spec", SPEC, "--out", out.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(2));
    sweep(&out, &["--resume"]);
    assert_golden(&out, "stopped, torn, resumed");
}

#[test]
fn diff_reports_changed_best_plans_and_metric_shifts() {
    let d = dir("diff");
    let golden = fs::read_to_string(GOLDEN).unwrap();
    let same = ok(&["diff", GOLDEN, GOLDEN]);
    assert!(String::from_utf8_lossy(&same.stdout).contains("0 best plan(s) changed"));
    // Case 0 with its two plans swapped (ranks renumbered): its best plan changes. The last
    // case (one infeasible row) dropped.
    let mut rows: Vec<String> = golden.lines().map(str::to_string).collect();
    let (r1, r2) = (rows[1].clone(), rows[2].clone());
    assert!(r1.contains(",ok,,2,1,") && r2.contains(",ok,,2,2,"));
    rows[1] = r2.replacen(",ok,,2,2,", ",ok,,2,1,", 1);
    rows[2] = r1.replacen(",ok,,2,1,", ",ok,,2,2,", 1);
    assert!(rows.pop().unwrap().contains(",infeasible,"));
    let new = d.join("new.csv");
    fs::write(&new, rows.join("\n") + "\n").unwrap();
    let out = autoplan(&["diff", GOLDEN, new.to_str().unwrap(), "--threshold", "0"]);
    assert_eq!(out.status.code(), Some(1), "differences exit 1");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("1 best plan(s) changed"), "{report}");
    assert!(report.contains("1 only in old"), "{report}");
    assert!(report.contains("memory_peak_bytes"), "{report}");
}

#[test]
fn bad_names_in_a_spec_are_located_before_any_work() {
    let d = dir("bad");
    let spec = d.join("bad.toml");
    let text = fs::read_to_string(SPEC)
        .unwrap()
        .replace("\"mixtral-8x7b\"", "\"mixtral-8x8b\"");
    fs::write(&spec, &text).unwrap();
    let line = text.lines().position(|l| l.contains("8x8b")).unwrap() + 1;
    let out_csv = d.join("out.csv");
    let out = autoplan(&[
        "sweep",
        "--spec",
        spec.to_str().unwrap(),
        "--out",
        out_csv.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let at = format!("bad.toml:{line}:");
    assert!(
        err.contains(&at) && err.contains("models.1") && err.contains("unknown model"),
        "{err}"
    );
    assert!(!out_csv.exists(), "nothing is written");
}

#[test]
fn the_committed_reference_is_the_nightly_specs_grid() {
    // Every case of the nightly spec, once, whole, in order (not a re-run: the numbers are
    // compared by the nightly job with `autoplan diff`).
    let reference = "results/reference.csv";
    let out = ok(&[
        "merge",
        "--spec",
        "search_spaces/sweeps/nightly.toml",
        reference,
    ]);
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        fs::read_to_string(reference).unwrap()
    );
}
