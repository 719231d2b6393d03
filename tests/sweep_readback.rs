//! Sweep CSVs read back by `merge`, `diff` and `sweep --resume` are checked field by field
//! against the schema: a non-finite number, a plan value no knob takes, or any field of the
//! wrong type is refused (exit 2) with its file, line, column and value, never copied through
//! or echoed. And `diff --threshold` is bounded.

mod common;

use std::fs;
use std::path::PathBuf;

use common::autoplan;

const GOLDEN: &str = "results/golden/small.csv";
const SPEC: &str = "search_spaces/sweeps/small.toml";

fn dir(test: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("sweep_readback-{test}"));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

/// The golden sweep with field `column` of line `line` (1-based, 2 = first row) set to
/// `value`, written to `d/name`.
fn edited(d: &std::path::Path, name: &str, line: usize, column: &str, value: &str) -> String {
    let golden = fs::read_to_string(GOLDEN).unwrap();
    let mut lines: Vec<String> = golden.lines().map(str::to_string).collect();
    let at = lines[0].split(',').position(|c| c == column).unwrap();
    let mut fields: Vec<&str> = lines[line - 1].split(',').collect();
    assert!(!fields[at].is_empty(), "line {line} has a {column}");
    fields[at] = value;
    lines[line - 1] = fields.join(",");
    let path = d.join(name);
    fs::write(&path, lines.join("\n") + "\n").unwrap();
    path.to_str().unwrap().to_string()
}

fn refused(args: &[&str], what: &str) {
    let (code, out, err) = autoplan(args);
    assert_eq!(code, Some(2), "{args:?}: {out}{err}");
    assert!(err.contains(what), "{args:?}: {err}");
}

#[test]
fn merge_refuses_a_non_finite_number() {
    let d = dir("merge");
    for (column, value) in [
        ("step_time_s", "inf"),
        ("tokens_per_s", "-inf"),
        ("mfu", "Infinity"),
        ("memory_peak_bytes", "nan"),
        ("bubble_s", "1e3"),
    ] {
        let f = edited(&d, "bad.csv", 3, column, value);
        refused(
            &["merge", &f],
            &format!("bad.csv:3: column `{column}` = \"{value}\": expected a finite decimal"),
        );
    }
    let f = edited(&d, "bad.csv", 2, "gpus", "inf");
    refused(&["merge", &f], "bad.csv:2: column `gpus` = \"inf\"");
}

#[test]
fn resume_refuses_a_finished_case_with_a_non_finite_field() {
    let d = dir("resume");
    let f = edited(&d, "out.csv", 2, "step_time_s", "inf");
    let before = fs::read_to_string(&f).unwrap();
    refused(
        &["sweep", "--spec", SPEC, "--out", &f, "--resume"],
        "out.csv:2: column `step_time_s` = \"inf\"",
    );
    assert_eq!(
        fs::read_to_string(&f).unwrap(),
        before,
        "the file is untouched"
    );
}

#[test]
fn diff_refuses_a_plan_value_no_knob_takes() {
    let d = dir("diff");
    let f = edited(&d, "new.csv", 2, "cp_comm", "nan");
    let (code, out, err) = autoplan(&["diff", GOLDEN, &f]);
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(out.is_empty(), "nothing of the file is echoed: {out}");
    assert!(
        err.contains("new.csv:2: column `cp_comm` = \"nan\"") && err.contains("ring"),
        "{err}"
    );
    // Every column's type: a status, a count, a flag.
    let f = edited(&d, "new.csv", 2, "status", "maybe");
    refused(
        &["diff", GOLDEN, &f],
        "new.csv:2: column `status` = \"maybe\"",
    );
    let f = edited(&d, "new.csv", 2, "tp", "0");
    refused(&["diff", &f, GOLDEN], "new.csv:2: column `tp` = \"0\"");
    let f = edited(&d, "new.csv", 2, "sp", "nan");
    refused(&["diff", GOLDEN, &f], "new.csv:2: column `sp` = \"nan\"");
}

#[test]
fn diff_threshold_is_bounded() {
    for t in ["1e308", "100.5", "-0.1", "NaN", "inf"] {
        let flag = format!("--threshold={t}");
        refused(
            &["diff", GOLDEN, GOLDEN, &flag],
            &format!("--threshold {t}: expected a relative shift in [0, 100]"),
        );
    }
    let (code, out, err) = autoplan(&["diff", GOLDEN, GOLDEN, "--threshold", "1e308"]);
    assert_eq!(code, Some(2));
    assert!(out.is_empty() && !err.contains("inf%"), "{out}{err}");
    for t in ["0", "100"] {
        let (code, out, err) = autoplan(&["diff", GOLDEN, GOLDEN, "--threshold", t]);
        assert_eq!(code, Some(0), "{err}");
        assert!(!out.contains("inf"), "{out}");
    }
}

#[test]
fn the_committed_sweeps_read_back_clean() {
    for f in [GOLDEN, "results/reference.csv"] {
        let (code, out, err) = autoplan(&["merge", f]);
        assert_eq!(code, Some(0), "{f}: {err}");
        assert_eq!(out, fs::read_to_string(f).unwrap(), "{f}");
    }
}
