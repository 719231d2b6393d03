//! `autoplan search` end to end: the ranking, JSON fields, thread-count independence, the
//! `--explain` report, bad spaces and `--fix`, and the no-fit message.

mod common;
use common::autoplan;

const CASE: &[&str] = &["search", "--model", "llama3-8b", "--cluster", "a100x64"];

fn with<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    CASE.iter().copied().chain(extra.iter().copied()).collect()
}

#[test]
fn table_ranks_and_explains_the_best_plan() {
    let (code, out, err) = autoplan(&with(&["--top", "3", "--stats"]));
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("rank") && out.contains("tok/s/GPU"), "{out}");
    assert!(
        out.contains("search statistics:") && out.contains("plans pruned"),
        "{out}"
    );
    assert!(out.contains("── plan 1 in full ──"), "{out}");
    assert!(out.contains("step-time breakdown"), "{out}");
    assert!(out.contains("communication per step"), "{out}");
}

#[test]
fn json_has_plans_and_stats_and_threads_do_not_matter() {
    let run = |threads: &str| {
        let (code, out, err) = autoplan(&with(&[
            "--top",
            "5",
            "--format",
            "json",
            "--threads",
            threads,
        ]));
        assert_eq!(code, Some(0), "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).expect("json");
        v
    };
    let one = run("1");
    let two = run("2");
    let plans = one["plans"].as_array().expect("plans");
    assert_eq!(plans.len(), 5);
    for p in plans {
        for k in [
            "plan",
            "step_time_s",
            "tokens_per_s",
            "mfu",
            "memory_peak_gib",
        ] {
            assert!(!p[k].is_null(), "{k} missing in {p}");
        }
    }
    assert!(one["stats"]["space_plans"].as_u64().unwrap() > 0);
    // Same ranking and numbers for any thread count (stats differ: pruning does).
    assert_eq!(one["plans"], two["plans"]);
    // Sorted by step time.
    let t: Vec<f64> = plans
        .iter()
        .map(|p| p["step_time_s"].as_f64().unwrap())
        .collect();
    assert!(t.windows(2).all(|w| w[0] <= w[1]), "{t:?}");
}

#[test]
fn exhaustive_gives_the_same_ranking() {
    let args = ["--top", "4", "--format", "csv", "--space", "quick"];
    let (c1, fast, e1) = autoplan(&with(&args));
    let (c2, slow, e2) = autoplan(&with(&[&args[..], &["--exhaustive"]].concat()));
    assert_eq!((c1, c2), (Some(0), Some(0)), "{e1}{e2}");
    assert_eq!(fast, slow);
    assert_eq!(fast.lines().count(), 5, "{fast}");
}

#[test]
fn fix_restricts_the_plans_and_bad_fix_is_an_error() {
    let (code, out, err) = autoplan(&with(&["--fix", "tp=2,pp=2", "--format", "csv"]));
    assert_eq!(code, Some(0), "{err}");
    for line in out.lines().skip(1) {
        assert!(line.contains("tp=2,") && line.contains("pp=2,"), "{line}");
    }
    let (code, _, err) = autoplan(&with(&["--fix", "tp=zero"]));
    assert_eq!(code, Some(2));
    assert!(err.contains("--fix `tp=zero`"), "{err}");
}

#[test]
fn bad_space_file_is_located() {
    let dir = std::env::temp_dir().join(format!("autoplan-search-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.toml");
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/search_spaces/quick.toml"
    ))
    .unwrap()
    .replace("\"selective\", \"full\"", "\"selective\", \"most\"");
    std::fs::write(&path, text).unwrap();
    let (code, _, err) = autoplan(&with(&["--space", path.to_str().unwrap()]));
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(code, Some(2));
    assert!(
        err.contains("bad.toml:") && err.contains("memory.recompute"),
        "{err}"
    );
    let (code, _, err) = autoplan(&with(&["--space", "no-such-space"]));
    assert_eq!(code, Some(2));
    assert!(err.contains("quick"), "{err}");
}

#[test]
fn nothing_fits_says_by_how_much() {
    // DeepSeek-V3 (671B) on 8 GPUs: even with the optimizer state in host memory its 16-bit
    // weights and fp32 gradients alone are > 8 × 80 GiB.
    let (code, _, err) = autoplan(&[
        "search",
        "--model",
        "deepseek-v3",
        "--cluster",
        "a100x64",
        "--gpus",
        "8",
    ]);
    assert_eq!(code, Some(3), "nothing fits: infeasible");
    assert!(err.contains("no plan of the space fits in memory"), "{err}");
    assert!(err.contains("GiB over the 80.00 GiB"), "{err}");
}

/// On all 64 GPUs, ≥ 16 B/param of weights, gradients and Adam state is > 64 × 80 GiB: nothing
/// fits in HBM alone, and the search answers with the optimizer state offloaded to the host.
#[test]
fn deepseek_v3_on_a100x64_answers_with_offload() {
    let (code, out, err) = autoplan(&[
        "search",
        "--model",
        "deepseek-v3",
        "--cluster",
        "a100x64",
        "--top",
        "3",
    ]);
    assert_eq!(code, Some(0), "{err}");
    // The model file's FP8 has no tensor cores on A100: planned in BF16, and said so.
    assert!(
        err.contains("planned in bf16, not deepseek-v3's fp8-block (its file)"),
        "{err}"
    );
    assert!(err.contains("no plan fits in HBM alone"), "{err}");
    assert!(err.contains("143.36 GiB per GPU"), "{err}");
    assert!(out.contains("offload_optimizer=1"), "{out}");
    assert!(out.contains("offload (host)"), "{out}");
    assert!(out.contains("host (offloaded)"), "{out}");
}

/// An FP8 recipe asked for on GPUs without FP8 tensor cores is bad input (exit 2), not a plan
/// priced at the 16-bit rate; on H100 the model file's FP8 stands, with no note.
#[test]
fn fp8_needs_fp8_tensor_cores() {
    let (code, _, err) = autoplan(&[
        "search",
        "--model",
        "llama3-8b",
        "--cluster",
        "a100x64",
        "--precision",
        "fp8-current",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("needs FP8 tensor cores"), "{err}");
    let (code, _, err) = autoplan(&[
        "search",
        "--model",
        "deepseek-v3",
        "--cluster",
        "h800x2048",
        "--top",
        "1",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("planned in"), "{err}");
}

/// A V100 has no BF16 tensor cores and runs no fused attention kernel: a BF16 model is planned
/// in FP16 (with the note), `--precision bf16` is refused, and no ranked plan splits the
/// sequence over CP (Transformer Engine runs CP only in its fused kernels), nor does
/// `evaluate` price one.
#[test]
fn a_v100_trains_in_fp16_without_context_parallelism() {
    let (code, out, err) = autoplan(&[
        "search",
        "--model",
        "llama2-7b",
        "--cluster",
        "dgx2-v100",
        "--top",
        "50",
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("planned in fp16, not llama2-7b's bf16") && err.contains("BF16 tensor cores"),
        "{err}"
    );
    assert!(err.contains("attention priced unfused"), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    let plans = v["plans"].as_array().expect("plans");
    assert!(plans.len() > 10, "{out}");
    for p in plans {
        assert_eq!(p["degrees"]["cp"].as_u64(), Some(1), "{p}");
    }
    let (code, _, err) = autoplan(&[
        "search",
        "--model",
        "llama2-7b",
        "--cluster",
        "dgx2-v100",
        "--precision",
        "bf16",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("needs BF16 tensor cores") && err.contains("use fp16"),
        "{err}"
    );
    let (code, _, err) = autoplan(&[
        "evaluate",
        "--model",
        "llama2-7b",
        "--cluster",
        "dgx2-v100",
        "--plan",
        "cp=2,dp=8",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("cp=2 needs a fused attention kernel") && err.contains("V100"),
        "{err}"
    );
}

/// Llama-3 8B at a 1M-token sequence on one 8-GPU node: nothing fits in HBM alone, nor with the
/// optimizer or the parameters offloaded; the search goes on to activation offload and answers
/// with it. Under Megatron-Core (activation offload only without recompute and PP, no parameter
/// offload) nothing fits and the error names the fewest GPUs.
#[test]
fn long_sequence_answers_with_activation_offload() {
    let args = |fw: &'static str| {
        vec![
            "search",
            "--model",
            "llama3-8b",
            "--cluster",
            "dgx-h100",
            "--gpus",
            "8",
            "--seq-len",
            "1048576",
            "--global-batch",
            "8",
            "--top",
            "2",
            "--framework",
            fw,
        ]
    };
    let (code, out, err) = autoplan(&args("any"));
    assert_eq!(code, Some(0), "{err}");
    for note in [
        "no plan fits in HBM alone",
        "the ZeRO-3 parameter shards and the optimizer state offloaded",
        "the activations offloaded to host memory (offload_activations = 1, 2, 4, 8, 16, 31, all",
    ] {
        assert!(err.contains(note), "{note}: {err}");
    }
    assert!(out.contains("offload_activations=all"), "{out}");
    let (code, _, err) = autoplan(&args("megatron-core"));
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("the activations offloaded"), "{err}");
    assert!(!err.contains("parameter shards"), "{err}");
    assert!(
        err.contains("the fewest H100-SXM5-80GB GPUs that fit a plan of the space: 16"),
        "{err}"
    );
}

/// `--format json|csv` carry `--explain N`: JSON the report `evaluate --format json` prints for
/// plan N (per-layer rows under `report.comm`), CSV a second table of those rows after an empty
/// line; without `--explain` neither format changes.
#[test]
fn json_and_csv_explain_plan_n_with_its_per_layer_rows() {
    let json = |extra: &[&str]| {
        let (code, out, err) = autoplan(&with(
            &[&["--top", "3", "--format", "json"], extra].concat(),
        ));
        assert_eq!(code, Some(0), "{err}");
        serde_json::from_str::<serde_json::Value>(&out).expect("json")
    };
    let plain = json(&[]);
    assert!(plain.get("explain").is_none(), "{plain}");
    let v = json(&["--explain", "2"]);
    let e = &v["explain"];
    assert_eq!(e["rank"], 2);
    assert_eq!(e["plan"], v["plans"][1]["plan"]);
    assert_eq!(e["step_time_s"], v["plans"][1]["step_time_s"]);
    // The same report as `autoplan evaluate` of that plan.
    let plan = e["plan"].as_str().expect("plan string");
    let (code, out, err) = autoplan(&[
        "evaluate",
        "--model",
        "llama3-8b",
        "--cluster",
        "a100x64",
        "--plan",
        plan,
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let mut evaluated: serde_json::Value = serde_json::from_str(&out).expect("json");
    evaluated["rank"] = 2.into();
    evaluated["plan"] = plan.into();
    assert_eq!(e, &evaluated);
    let comm = e["report"]["comm"].as_array().expect("per-layer rows");
    assert!(!comm.is_empty(), "{e}");

    let csv = |extra: &[&str]| {
        let (code, out, err) =
            autoplan(&with(&[&["--top", "3", "--format", "csv"], extra].concat()));
        assert_eq!(code, Some(0), "{err}");
        out
    };
    let plain = csv(&[]);
    assert!(!plain.contains("\n\n"), "{plain}");
    let out = csv(&["--explain", "2"]);
    let (ranking, rows) = out.split_once("\n\n").expect("a second table");
    assert_eq!(format!("{ranking}\n"), plain);
    let mut r = ::csv::Reader::from_reader(rows.as_bytes());
    let header = r.headers().expect("header").clone();
    assert_eq!(&header[0], "rank");
    let col = |name: &str| header.iter().position(|h| h == name).expect(name);
    let records: Vec<::csv::StringRecord> = r.records().map(|x| x.expect("row")).collect();
    assert_eq!(records.len(), comm.len());
    for (rec, row) in records.iter().zip(comm) {
        assert_eq!(&rec[col("rank")], "2");
        assert_eq!(rec[col("what")], row["what"]);
        assert_eq!(rec[col("collective")], row["collective"]);
        let exposed: f64 = rec[col("exposed_s")].parse().expect("a number");
        // serde_json's default float parsing may miss the last ulp (its `float_roundtrip`
        // feature is off); the CSV's is exact. The same number, to a relative 1e-15.
        let json_exposed = row["exposed"].as_f64().expect("exposed");
        assert!(
            (exposed - json_exposed).abs() <= 1e-15 * exposed.abs().max(1e-300),
            "{exposed} vs {json_exposed}"
        );
    }

    // Beyond the ranking (a space of a few plans) or zero: an error, nothing half-written.
    let fix = "tp=8,pp=8,cp=1,mbs=1,recompute=full,zero=1,schedule=1f1b";
    let (code, out, err) = autoplan(&with(&["--fix", fix, "--format", "csv", "--explain", "99"]));
    assert_ne!(code, Some(0));
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("--explain 99: only") && err.contains("plans were ranked"),
        "{err}"
    );
    let (code, _, err) = autoplan(&with(&["--format", "json", "--explain", "0"]));
    assert_ne!(code, Some(0));
    assert!(err.contains("--explain must be at least 1"), "{err}");
}
