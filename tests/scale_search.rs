//! Issue 19 items 2 and 3: time to train and cost (`--tokens`, `--price`), and the search over
//! scale (`--gpus` and `--global-batch` lists and ranges, `--objective`, the Pareto front).

mod common;
use common::autoplan;

use autoplan::cluster::resolve_cluster;
use autoplan::evaluate::EvalOptions;
use autoplan::graph::resolve_model;
use autoplan::search::pareto::{
    best_of, dominates, grid, point_inputs, search_scale, Goal, ScaleOutcome,
};
use autoplan::search::train::Budget;
use autoplan::search::{resolve_space, search_case_for, SearchOptions, Target};

const SCALE: &[&str] = &[
    "search",
    "--model",
    "llama3-8b",
    "--cluster",
    "h100x256",
    "--space",
    "quick",
    "--gpus",
    "32..256",
    "--global-batch",
    "128,512",
    "--tokens",
    "2T",
    "--price",
    "2.5",
];

fn with<'a>(base: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
    base.iter().copied().chain(extra.iter().copied()).collect()
}

fn scale_outcome(goal: Goal) -> ScaleOutcome {
    let m = resolve_model("llama3-8b").unwrap();
    let c = resolve_cluster("h100x256").unwrap();
    let space = resolve_space("quick").unwrap();
    let points = grid(&[256, 32, 64, 128], &[512, 128]);
    let budget = Budget {
        tokens: 2e12,
        usd_per_gpu_hour: Some(2.5),
    };
    let opts = SearchOptions {
        top_k: 4,
        exhaustive: false,
    };
    search_scale(
        &m,
        &c,
        EvalOptions::default(),
        Target::default(),
        &space,
        &opts,
        &points,
        &budget,
        goal,
        &(),
    )
    .unwrap()
}

/// Each point is exactly the single-size search at its size and batch, and the front holds
/// exactly the points no other point dominates.
#[test]
fn points_are_the_single_size_search_and_the_front_is_non_dominated() {
    let o = scale_outcome(Goal::Cost);
    let m = resolve_model("llama3-8b").unwrap();
    let c = resolve_cluster("h100x256").unwrap();
    let space = resolve_space("quick").unwrap();
    assert_eq!(o.points.len(), 8);
    // Grid order: GPU counts ascending, then batches.
    let order: Vec<_> = o
        .points
        .iter()
        .map(|p| (p.point.gpus, p.point.global_batch))
        .collect();
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(order, sorted);
    for p in &o.points {
        let (pm, pc) = point_inputs(&m, &c, p.point).unwrap();
        assert_eq!(pc.gpus(), p.point.gpus);
        assert_eq!(pc.node, c.node, "node type, fabric and NVLink domain kept");
        let direct = search_case_for(
            &pm,
            &pc,
            EvalOptions::default(),
            Target::default(),
            &space,
            &SearchOptions {
                top_k: 4,
                exhaustive: false,
            },
            &(),
        )
        .unwrap();
        assert_eq!(
            direct.outcome.keys(),
            p.case.outcome.keys(),
            "{:?}",
            p.point
        );
        let best = best_of(&direct.outcome.plans, false).map(|i| direct.outcome.plans[i]);
        assert_eq!(best.map(|r| r.plan), p.best().map(|r| r.plan));
        assert_eq!(best.map(|r| r.step_time_s), p.best().map(|r| r.step_time_s));
    }
    let costs: Vec<(usize, (f64, f64))> = o
        .points
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.train.map(|t| (i, (t.seconds, t.gpu_hours))))
        .collect();
    assert!(costs.len() >= 4, "most points fit");
    for &(i, a) in &costs {
        let dominated = costs.iter().any(|&(_, b)| dominates(b, a));
        assert_eq!(o.on_front[i], !dominated, "point {i}");
    }
    assert!(o.on_front.iter().any(|&f| f));
    // The cost ranking is by GPU-hours.
    let gh: Vec<f64> = o
        .ranking
        .iter()
        .map(|&i| o.points[i].train.unwrap().gpu_hours)
        .collect();
    assert!(gh.windows(2).all(|w| w[0] <= w[1]), "{gh:?}");
    let t = scale_outcome(Goal::Time);
    let secs: Vec<f64> = t
        .ranking
        .iter()
        .map(|&i| t.points[i].train.unwrap().seconds)
        .collect();
    assert!(secs.windows(2).all(|w| w[0] <= w[1]), "{secs:?}");
}

/// Relative equality for derived figures.
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

/// Time to train × GPUs = GPU-hours, × price = dollars, in every format; the table, JSON and
/// CSV list the same points in the same order with the same plans and front.
#[test]
fn formats_agree_and_gpu_hours_are_time_times_gpus() {
    let (code, js, err) = autoplan(&with(SCALE, &["--format", "json", "--objective", "time"]));
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&js).unwrap();
    // The stderr caveats, none for a dense model on a calibrated, uncapped H100.
    assert_eq!(v["caveats"], serde_json::json!([]));
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 8);
    for p in points {
        if p["plan"].is_null() {
            assert!(p["no_plan"].is_string());
            continue;
        }
        let t = &p["train"];
        let gpus = p["gpus"].as_f64().unwrap();
        let secs = t["seconds"].as_f64().unwrap();
        let gh = t["gpu_hours"].as_f64().unwrap();
        assert!(close(secs / 3600.0 * gpus, gh), "{p}");
        assert!(close(t["days"].as_f64().unwrap() * 24.0 * gpus, gh), "{p}");
        assert!(close(gh * 2.5, t["usd"].as_f64().unwrap()), "{p}");
        let steps = t["steps"].as_f64().unwrap();
        assert!(
            close(steps * p["step_time_s"].as_f64().unwrap(), secs),
            "{p}"
        );
        assert!(steps * p["tokens_per_step"].as_f64().unwrap() >= 2e12);
    }
    let (code, csv, err) = autoplan(&with(SCALE, &["--format", "csv", "--objective", "time"]));
    assert_eq!(code, Some(0), "{err}");
    let (code, table, err) = autoplan(&with(SCALE, &["--objective", "time"]));
    assert_eq!(code, Some(0), "{err}");
    let mut rows = csv.lines();
    let head: Vec<&str> = rows.next().unwrap().split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
    let table_rows: Vec<&str> = table
        .lines()
        .skip_while(|l| !l.starts_with("rank"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(table_rows.len(), 8, "{table}");
    for ((line, p), trow) in rows.zip(points).zip(&table_rows) {
        let f: Vec<&str> = line.split(',').collect();
        // A plan string has commas: the CSV quotes it. Compare the leading fields.
        assert_eq!(f[col("gpus")], p["gpus"].to_string());
        assert_eq!(f[col("global_batch")], p["global_batch"].to_string());
        assert_eq!(f[col("pareto")], p["pareto"].to_string());
        let rank = p["rank"]
            .as_u64()
            .map_or("-".to_string(), |r| r.to_string());
        let t: Vec<&str> = trow.split_whitespace().collect();
        assert_eq!(t[0], rank, "{trow}");
        assert_eq!(t[1], p["gpus"].to_string(), "{trow}");
        assert_eq!(t[2], p["global_batch"].to_string(), "{trow}");
        if let Some(plan) = p["plan"].as_str() {
            assert!(
                line.contains(plan) && trow.ends_with(plan),
                "{line} / {trow}"
            );
            assert_eq!(trow.contains(" * "), p["pareto"] == true, "{trow}");
            let days = format!("{:.2}", p["train"]["days"].as_f64().unwrap());
            assert!(t.contains(&days.as_str()), "{trow} lacks {days}");
        }
    }
}

/// Thread counts change nothing but the timings.
#[test]
fn scale_output_does_not_depend_on_threads() {
    let run = |n: &str| {
        let (code, out, err) = autoplan(&with(SCALE, &["--format", "csv", "--threads", n]));
        assert_eq!(code, Some(0), "{err}");
        out
    };
    assert_eq!(run("1"), run("3"));
}

/// A one-size search with --tokens: the time to train under each row, in JSON and CSV too.
#[test]
fn single_size_search_and_evaluate_give_time_to_train() {
    let base = [
        "search",
        "--model",
        "llama3-8b",
        "--cluster",
        "a100x64",
        "--space",
        "quick",
        "--top",
        "2",
        "--tokens",
        "1T",
    ];
    let (code, out, err) = autoplan(&with(&base, &["--format", "json"]));
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let p = &v["plans"][0];
    let gh = p["train"]["gpu_hours"].as_f64().unwrap();
    assert!(close(
        p["train"]["seconds"].as_f64().unwrap() / 3600.0 * 64.0,
        gh
    ));
    assert!(p["train"]["usd"].is_null(), "no price given");
    let (code, out, err) = autoplan(&with(&base, &["--format", "csv"]));
    assert_eq!(code, Some(0), "{err}");
    assert!(out
        .lines()
        .next()
        .unwrap()
        .ends_with("train_steps,train_days,gpu_hours,usd"));
    let (code, out, err) = autoplan(&base);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("time to train 1.00T tokens"), "{out}");
    let (code, out, err) = autoplan(&[
        "evaluate",
        "--model",
        "llama3-8b",
        "--cluster",
        "a100x64",
        "--plan",
        "tp=2,pp=2,recompute=full",
        "--tokens",
        "1T",
        "--price",
        "3",
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let t = &v["train"];
    assert!(close(
        t["gpu_hours"].as_f64().unwrap() * 3.0,
        t["usd"].as_f64().unwrap()
    ));
    // Without --tokens nothing changes: no train figures.
    let (code, out, _) = autoplan(&base[..base.len() - 2]);
    assert_eq!(code, Some(0));
    assert!(!out.contains("time to train"), "{out}");
}

/// Bad flags name the flag and say why; nothing is searched.
#[test]
fn bad_flags_name_the_flag() {
    let cases: &[(&[&str], &str, &str)] = &[
        (&["--tokens", "-1T"], "--tokens", "positive"),
        (&["--tokens", "0"], "--tokens", "positive"),
        (&["--tokens", "NaN"], "--tokens", "finite"),
        (&["--tokens", "1e308"], "--tokens", "too large"),
        (&["--tokens", "lots"], "--tokens", "unknown suffix"),
        (&["--tokens", "1.5.T"], "--tokens", "expected a token count"),
        (&["--tokens", "1T", "--price", "-2"], "--price", "positive"),
        (&["--tokens", "1T", "--price", "0"], "--price", "positive"),
        (&["--tokens", "1T", "--price", "NaN"], "--price", "finite"),
        (
            &["--tokens", "1T", "--price", "1e308"],
            "--price",
            "too large",
        ),
        (&["--tokens", "1T", "--price", "two"], "--price", "dollars"),
        (&["--price", "2"], "--price 2", "--tokens"),
        (&["--gpus", "0..4096"], "--gpus", "positive"),
        (&["--gpus", "4096..256"], "--gpus", "ends below"),
        (&["--gpus", "99999999999"], "--gpus", "too large"),
        (&["--gpus", "64,64"], "--gpus", "listed twice"),
        (&["--gpus", "1e308"], "--gpus", "positive integer"),
        (
            &["--tokens", "1T", "--gpus", "12,24"],
            "--gpus: 12 GPUs",
            "multiple",
        ),
        (&["--gpus", "64,128"], "--tokens", "token count"),
        (&["--global-batch", "0,8"], "--global-batch", "positive"),
        (&["--gpus", "-8"], "--gpus", "positive"),
        (
            &["--tokens", "1T", "--tokens-per-step", "16M..4M"],
            "--tokens-per-step",
            "ends below",
        ),
        (
            &["--tokens", "1T", "--gpus", "64,128", "--explain", "1"],
            "--explain",
            "one point",
        ),
    ];
    for (extra, flag, why) in cases {
        let args = with(
            &[
                "search",
                "--model",
                "llama3-8b",
                "--cluster",
                "h100x256",
                "--space",
                "quick",
            ],
            extra,
        );
        let (code, out, err) = autoplan(&args);
        assert_ne!(code, Some(0), "{extra:?}: {out}");
        assert!(err.contains(flag) && err.contains(why), "{extra:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let (code, _, err) = autoplan(&[
        "evaluate",
        "--model",
        "llama3-8b",
        "--cluster",
        "h100x256",
        "--plan",
        "tp=8",
        "--gpus",
        "64..256",
    ]);
    assert_ne!(code, Some(0));
    assert!(
        err.contains("--gpus 64..256") && err.contains("one value"),
        "{err}"
    );
}

/// The file fields: `[training] tokens` and `price_usd_per_gpu_hour`, checked and located.
#[test]
fn file_fields_are_checked_and_used() {
    use autoplan::input::Source;
    let text = autoplan::graph::bundled_model_text("llama3-8b").unwrap();
    let with_tokens =
        |v: &str| text.replace("[training]\n", &format!("[training]\ntokens = {v}\n"));
    let m = autoplan::graph::ModelSpec::from_toml(&Source::new("m.toml", with_tokens("\"15T\"")))
        .unwrap();
    assert_eq!(m.training.tokens, Some(15e12));
    for (v, why) in [
        ("-1", "positive"),
        ("1e308", "too large"),
        ("\"15Q\"", "unknown suffix"),
    ] {
        let e = autoplan::graph::ModelSpec::from_toml(&Source::new("m.toml", with_tokens(v)))
            .unwrap_err()
            .to_string();
        assert!(e.contains("training.tokens") && e.contains(why), "{v}: {e}");
    }
    let text = autoplan::cluster::bundled_cluster_text("h100x256").unwrap();
    let priced = |v: &str| format!("price_usd_per_gpu_hour = {v}\n{text}");
    let c = autoplan::cluster::Cluster::from_toml(&Source::new("c.toml", priced("2.25"))).unwrap();
    assert_eq!(c.price_usd_per_gpu_hour, Some(2.25));
    for (v, why) in [
        ("-1.0", "positive"),
        ("1e308", "too large"),
        ("nan", "finite"),
    ] {
        let e = autoplan::cluster::Cluster::from_toml(&Source::new("c.toml", priced(v)))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("price_usd_per_gpu_hour") && e.contains(why),
            "{v}: {e}"
        );
    }
    // The cluster file's price is the default of --price.
    let dir = std::env::temp_dir().join(format!("autoplan-price-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("priced.toml");
    std::fs::write(&path, priced("2.25")).unwrap();
    let (code, out, err) = autoplan(&[
        "search",
        "--model",
        "llama3-8b",
        "--cluster",
        path.to_str().unwrap(),
        "--space",
        "quick",
        "--top",
        "1",
        "--tokens",
        "1T",
        "--format",
        "json",
    ]);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let t = &v["plans"][0]["train"];
    assert!(close(
        t["gpu_hours"].as_f64().unwrap() * 2.25,
        t["usd"].as_f64().unwrap()
    ));
}
