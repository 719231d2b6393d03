//! Issue 21, item 3: a reader that closes stdout early (`autoplan ... | head`) ends every
//! command, in every output format, quietly with exit 0: no panic ("failed printing to
//! stdout"), no "error: Broken pipe", nothing on stderr.

use std::process::{Command, Stdio};

/// Run `autoplan ARGS` with stdout a pipe whose read end is closed at once; (exit code, stderr).
fn closed_stdout(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_autoplan"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run autoplan");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[track_caller]
fn quiet(args: &[&str]) {
    let (code, err) = closed_stdout(args);
    assert_eq!(code, Some(0), "{args:?}: {err}");
    assert!(err.is_empty(), "{args:?}: stderr `{err}`");
}

const FORMATS: [&str; 3] = ["table", "json", "csv"];

#[test]
fn search_in_every_format() {
    for f in FORMATS {
        let base = [
            "search",
            "--model",
            "llama3-8b",
            "--cluster",
            "a100x64",
            "--format",
            f,
        ];
        quiet(&base);
        let mut explain = base.to_vec();
        explain.extend(["--explain", "1", "--top", "50"]);
        quiet(&explain);
    }
}

#[test]
fn evaluate_in_every_format_it_takes() {
    let base = [
        "evaluate",
        "--model",
        "llama3-8b",
        "--cluster",
        "a100x64",
        "--plan",
        "tp=8,pp=1,mbs=1",
    ];
    for f in ["table", "json"] {
        let mut a = base.to_vec();
        a.extend(["--format", f]);
        quiet(&a);
    }
    let mut a = base.to_vec();
    a.extend(["--emit", "megatron"]);
    quiet(&a);
}

#[test]
fn validate_in_every_format() {
    for f in FORMATS {
        quiet(&["validate", "--format", f]);
    }
    quiet(&[
        "validate",
        "--explain",
        "mzoo_h100_Qwen3_235B_a22B_xnode_ep32",
    ]);
}

#[test]
fn collective_in_every_format() {
    for f in FORMATS {
        quiet(&[
            "collective",
            "--cluster",
            "dgx-h100",
            "--op",
            "allreduce",
            "--ranks",
            "8",
            "--bytes",
            "64MiB",
            "--format",
            f,
        ]);
        quiet(&[
            "collective",
            "--validate",
            "data/collectives_measured.csv",
            "--format",
            f,
        ]);
    }
}

#[test]
fn place_experts_in_every_format() {
    for f in FORMATS {
        quiet(&[
            "place-experts",
            "--cluster",
            "a100x64",
            "--experts",
            "64",
            "--ep",
            "16",
            "--slots",
            "5",
            "--zipf",
            "0.8",
            "--format",
            f,
        ]);
    }
}

#[test]
fn show_and_lists_in_every_format() {
    for f in FORMATS {
        quiet(&["show", "--model", "deepseek-v3", "--format", f]);
        quiet(&["show", "--cluster", "h800x2048", "--format", f]);
    }
    quiet(&["models"]);
    quiet(&["clusters"]);
}

#[test]
fn diff_and_merge_to_a_closed_pipe() {
    let golden = "results/golden/small.csv";
    // 17 kB of differences (exit 1 when read): the pipe is closed long before the end.
    quiet(&["diff", golden, "results/reference.csv"]);
    quiet(&["diff", golden, golden]);
    quiet(&["merge", golden]);
}
