//! Issue 21, items 1–3: every numeric flag and file field is checked at the edge against a
//! stated range (each reproduction of the issue answers with a clear error, exit 2, instead of
//! a panic, an abort or a hang), every printed number is finite, and the exit codes follow one
//! scheme (0 success, 1 differences, 2 bad input, 3 infeasible, 4 I/O).

mod common;

use std::path::{Path, PathBuf};

use common::autoplan;

/// A file in a scratch directory of this test process; the directory is removed when the
/// file is dropped, so no run leaves one behind in the temporary directory.
struct Scratch {
    dir: PathBuf,
    file: PathBuf,
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.file
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `file` in the scratch directory `name`, created empty of anything else.
fn scratch(name: &str, file: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("autoplan-limits-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    Scratch {
        file: dir.join(file),
        dir,
    }
}

/// `args` exits with `code` and stderr contains every part; no panic.
#[track_caller]
fn refused(args: &[&str], code: i32, parts: &[&str]) -> String {
    let (got, _, err) = autoplan(args);
    assert_eq!(got, Some(code), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    for p in parts {
        assert!(err.contains(p), "{args:?}: `{err}` lacks `{p}`");
    }
    err
}

const SEARCH: [&str; 5] = ["search", "--model", "llama3-8b", "--cluster", "a100x64"];

fn search(extra: &[&str]) -> Vec<&'static str> {
    let mut v: Vec<&str> = SEARCH.to_vec();
    v.extend(
        extra
            .iter()
            .map(|s| -> &'static str { Box::leak(s.to_string().into_boxed_str()) }),
    );
    v
}

#[test]
fn top_of_i64_max_is_refused_not_a_capacity_overflow() {
    refused(
        &search(&["--top", "9223372036854775807"]),
        2,
        &["--top 9223372036854775807: expected [1, 10000]"],
    );
}

#[test]
fn top_of_i32_max_is_refused_not_a_412_gb_allocation() {
    refused(
        &search(&["--top", "2147483647"]),
        2,
        &["--top 2147483647: expected [1, 10000]"],
    );
}

#[test]
fn explain_of_i32_max_is_refused() {
    refused(
        &search(&["--explain", "2147483647"]),
        2,
        &["--explain 2147483647: expected [1, 10000]"],
    );
}

#[test]
fn the_engine_takes_a_huge_top_k_without_allocating_it() {
    use autoplan::search::{resolve_space, search_case, SearchOptions};
    let model = autoplan::graph::resolve_model("llama3-8b").unwrap();
    let cluster = autoplan::cluster::resolve_cluster("a100x64").unwrap();
    let space = resolve_space("quick").unwrap();
    let opts = SearchOptions {
        top_k: usize::MAX,
        exhaustive: false,
    };
    let got = search_case(&model, &cluster, Default::default(), &space, &opts, &());
    assert!(!got.outcome.plans.is_empty());
}

#[test]
fn sweep_top_k_of_i32_max_is_located() {
    let spec = scratch("topk", "s.toml");
    let text = std::fs::read_to_string("search_spaces/sweeps/small.toml").unwrap();
    let line = text.lines().position(|l| l.starts_with("top_k")).unwrap() + 1;
    let text: String = text
        .lines()
        .map(|l| {
            if l.starts_with("top_k") {
                "top_k = 2147483647"
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&*spec, text).unwrap();
    let out = spec.with_file_name("out.csv");
    refused(
        &[
            "sweep",
            "--spec",
            spec.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        2,
        &[
            &format!("s.toml:{line}:"),
            "top_k = 2147483647",
            "[1, 10000]",
        ],
    );
    assert!(!out.exists());
}

#[test]
fn ten_thousand_threads_are_refused() {
    refused(
        &search(&["--threads", "10000"]),
        2,
        &["--threads 10000: expected [1, 1024]"],
    );
    let out = scratch("threads", "out.csv");
    refused(
        &[
            "sweep",
            "--spec",
            "search_spaces/sweeps/small.toml",
            "--out",
            out.to_str().unwrap(),
            "--threads",
            "10000",
        ],
        2,
        &["--threads 10000: expected [0, 1024] (0 = one per core)"],
    );
}

const PLACE: [&str; 9] = [
    "place-experts",
    "--cluster",
    "a100x64",
    "--experts",
    "16",
    "--ep",
    "8",
    "--slots",
    "2",
];

fn place(extra: &[&str]) -> Vec<String> {
    PLACE.iter().chain(extra).map(|s| s.to_string()).collect()
}

#[track_caller]
fn place_refused(extra: &[&str], parts: &[&str]) {
    let args = place(extra);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    refused(&args, 2, parts);
}

#[test]
fn exact_time_limits_that_are_not_durations_are_refused() {
    for tl in ["nan", "inf", "-1", "1e300"] {
        place_refused(
            &["--uniform", "--exact", &format!("--time-limit={tl}")],
            &[
                &format!("--time-limit {}", tl.parse::<f64>().unwrap()),
                "(0, 86400]",
            ],
        );
    }
}

#[test]
fn four_billion_experts_are_refused_not_an_abort() {
    let mut args: Vec<&str> = PLACE.to_vec();
    args[4] = "4294967295";
    args.push("--uniform");
    refused(&args, 2, &["--experts 4294967295: expected [1, 4096]"]);
}

#[test]
fn a_million_experts_on_twenty_thousand_slots_are_refused_not_a_hang() {
    let mut args: Vec<&str> = PLACE.to_vec();
    args[4] = "1000000";
    args[8] = "20000";
    args.push("--zipf");
    args.push("1");
    refused(&args, 2, &["--experts 1000000: expected [1, 4096]"]);
    // Each within its own range, the group's slots still bounded.
    let mut args: Vec<&str> = PLACE.to_vec();
    args[6] = "512";
    args[8] = "4096";
    args[2] = "h100x16384";
    args.push("--uniform");
    refused(&args, 2, &["--ep 512 × --slots 4096", "at most 8192"]);
}

#[test]
fn trace_ids_beyond_the_bounds_are_located() {
    let trace = scratch("loads", "t.csv");
    std::fs::write(&*trace, "expert,tokens\n0,1\n9223372036854775808,2\n").unwrap();
    place_refused(
        &["--loads", trace.to_str().unwrap()],
        &["t.csv:3: expert = \"9223372036854775808\": expected an id in [0, 4095]"],
    );
    std::fs::write(&*trace, "source,expert,tokens\n18446744073709551615,0,1\n").unwrap();
    place_refused(
        &["--loads", trace.to_str().unwrap()],
        &["t.csv:2: source = "],
    );
}

/// A copy of a bundled cluster with one line replaced.
fn cluster_with(name: &str, from: &str, to: &str) -> Scratch {
    let text = std::fs::read_to_string(format!("clusters/{name}.toml")).unwrap();
    assert!(text.contains(from), "{name} has no `{from}`");
    let p = scratch(&format!("cluster-{}", to.len()), "c.toml");
    std::fs::write(&*p, text.replacen(from, to, 1)).unwrap();
    p
}

#[test]
fn a_subnormal_peak_is_refused_not_a_nan_step_time() {
    let c = cluster_with("a100x64", "bf16 = 312", "bf16 = 5e-324");
    let err = refused(
        &[
            "evaluate",
            "--model",
            "llama3-8b",
            "--cluster",
            c.to_str().unwrap(),
            "--plan",
            "tp=8,pp=1",
        ],
        2,
        &["c.toml:", "gpu.tflops.bf16 = 5e-324", "[0.1, 1000000]"],
    );
    assert!(!err.contains("NaN"), "{err}");
}

#[test]
fn an_hbm_of_1e308_gib_is_refused_not_an_infinite_headroom() {
    let c = cluster_with("a100x64", "hbm_gib = 80", "hbm_gib = 1e308");
    refused(
        &[
            "search",
            "--model",
            "llama3-8b",
            "--cluster",
            c.to_str().unwrap(),
        ],
        2,
        &["c.toml:", "gpu.hbm_gib = 1e308", "(0, 16384]"],
    );
}

#[test]
fn gpus_flag_is_bounded() {
    refused(
        &search(&["--gpus", "4294967295"]),
        2,
        // The flag's own parser bounds it (lists and ranges share it, issue 19).
        &["--gpus", "4294967295: too large: expected [1, 1048576]"],
    );
}

#[test]
fn the_global_batch_that_never_divides_is_named_with_batches_that_would() {
    let err = refused(
        &["search", "--model", "gpt3-175b", "--cluster", "selene-a100"],
        3,
        &[
            "global batch 1536 is not a multiple of dp × mbs",
            "4480 GPUs",
            "1505 or 1540",
        ],
    );
    assert!(err.starts_with("error: no valid plan"), "{err}");
    refused(
        &[
            "search",
            "--model",
            "llama3-8b",
            "--cluster",
            "h100x16384",
            "--gpus",
            "100000",
        ],
        3,
        &["global batch 128", "100000 GPUs", "3125"],
    );
}

#[test]
fn csv_is_honoured_or_refused() {
    let (code, out, err) = autoplan(&["validate", "--format", "csv"]);
    assert_eq!(code, Some(0), "{err}");
    let mut rows = csv::Reader::from_reader(out.as_bytes());
    let header = rows.headers().unwrap().clone();
    assert_eq!(header.get(0), Some("id"));
    assert_eq!(header.get(1), Some("status"));
    let n = rows.records().filter(|r| r.is_ok()).count();
    assert!(n > 10, "{out}");
    refused(
        &[
            "evaluate",
            "--model",
            "llama3-8b",
            "--cluster",
            "a100x64",
            "--plan",
            "tp=8",
            "--format",
            "csv",
        ],
        2,
        &["--format csv: evaluate prints a report of several tables"],
    );
    refused(
        &["validate", "--explain", "x", "--format", "csv"],
        2,
        &["--explain with --format csv"],
    );
}

#[test]
fn exit_codes_follow_one_scheme() {
    // 0: success.
    assert_eq!(autoplan(&search(&["--top", "1"])).0, Some(0));
    // 2: bad input (a flag, a plan that does not parse).
    refused(&search(&["--top", "0"]), 2, &["--top 0"]);
    refused(
        &[
            "evaluate",
            "--model",
            "llama3-8b",
            "--cluster",
            "a100x64",
            "--plan",
            "tp=7",
        ],
        2,
        &[],
    );
    // 3: infeasible (nothing fits; a valid plan out of memory).
    // (On all 64 GPUs of a100x64 DeepSeek-V3 fits with its optimizer state in host memory;
    // on 8 not even so, and the error names the fewest GPUs that fit.)
    refused(
        &[
            "search",
            "--model",
            "deepseek-v3",
            "--cluster",
            "a100x64",
            "--gpus",
            "8",
        ],
        3,
        &[
            "no plan of the space fits in memory",
            "the fewest A100-SXM4-80GB GPUs that fit a plan of the space: 64",
        ],
    );
    refused(
        &[
            "evaluate",
            "--model",
            "gpt3-175b",
            "--cluster",
            "selene-a100",
            "--gpus",
            "64",
            "--global-batch",
            "64",
            "--plan",
            "tp=8,pp=1,mbs=1",
        ],
        3,
        &["GiB over"],
    );
    // 4: I/O (a file that cannot be read or written).
    refused(
        &["validate", "--runs", "/nonexistent/runs.csv"],
        4,
        &["/nonexistent/runs.csv"],
    );
    refused(
        &search(&["--out", "/nonexistent/dir/out.csv"]),
        4,
        &["cannot create /nonexistent/dir/out.csv"],
    );
    // The scheme is in --help.
    let (code, out, _) = autoplan(&["--help"]);
    assert_eq!(code, Some(0));
    for line in ["Exit status:", "3  infeasible", "4  I/O error"] {
        assert!(out.contains(line), "{out}");
    }
}
