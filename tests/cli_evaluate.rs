//! `autoplan evaluate` and `autoplan validate` end to end (issue 4, items 5 and 6).

mod common;
use common::autoplan;

const PLAN: &str = "tp=8,sp=on,pp=8,schedule=interleaved,vpp=3,mbs=1,recompute=selective";

#[test]
fn evaluate_table_has_every_section() {
    let (code, out, err) = autoplan(&[
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
        PLAN,
    ]);
    assert_eq!(code, Some(0), "{err}");
    for section in [
        "step time",
        "MFU",
        "step-time breakdown",
        "pipeline bubble",
        "communication per step",
        "attention out reduce-scatter (SP)",
        "pipeline activation send/recv",
        "memory per GPU",
    ] {
        assert!(out.contains(section), "missing {section:?} in\n{out}");
    }
}

#[test]
fn evaluate_json_has_the_promised_keys() {
    let (code, out, err) = autoplan(&[
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
        PLAN,
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    for key in [
        "step_time_s",
        "tokens_per_s",
        "mfu",
        "tflops_per_gpu",
        "memory_peak_gib",
    ] {
        assert!(
            v[key].as_f64().is_some_and(|x| x > 0.0),
            "{key}: {}",
            v[key]
        );
    }
    assert_eq!(v["fits"], serde_json::Value::Bool(true));
    assert!(!v["report"]["comm"].as_array().unwrap().is_empty());
}

#[test]
fn invalid_plans_exit_2_and_oversized_ones_3_with_the_reason() {
    let (code, _, err) = autoplan(&[
        "evaluate",
        "--model",
        "gpt3-175b",
        "--cluster",
        "selene-a100",
        "--gpus",
        "64",
        "--plan",
        "tp=7,pp=1",
    ]);
    assert_eq!(code, Some(2));
    assert!(!err.is_empty() && !err.contains("panicked"), "{err}");
    let (code, out, _) = autoplan(&[
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
        "--format",
        "json",
    ]);
    // Valid but out of memory: infeasible, exit 3.
    assert_eq!(code, Some(3));
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["fits"], serde_json::Value::Bool(false));
    let excess = v["excess_gib"].as_f64().unwrap();
    assert!(excess > 0.0);
    assert!(v["reason"].as_str().unwrap().contains("GiB over"));
    // The breakdown of the plan that does not fit: its total is the excess over 80 GiB.
    let total = v["memory"]["total"].as_f64().unwrap() / (1u64 << 30) as f64;
    assert!(
        (total - 80.0 - excess).abs() < 1e-6,
        "{total} vs 80 + {excess}"
    );
    assert!(v["memory"]["activations"].as_f64().unwrap() > 0.0);
}

#[test]
fn validate_json_reports_mape_and_rows() {
    let runs = concat!(env!("CARGO_MANIFEST_DIR"), "/data/published_runs.csv");
    let (code, out, err) = autoplan(&["validate", "--runs", runs, "--format", "json"]);
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert!(v["mape"].as_f64().unwrap() <= 0.10);
    let rows = v["rows"].as_array().unwrap();
    assert!(rows.len() >= 40);
    for r in rows {
        for key in ["id", "predicted", "measured", "error"] {
            assert!(!r[key].is_null(), "{key} in {r}");
        }
    }
}

#[test]
fn validate_explain_prints_the_rows_report_and_fit_scores_the_current_table() {
    let runs = concat!(env!("CARGO_MANIFEST_DIR"), "/data/published_runs.csv");
    let id = "mzoo_h100_Qwen3_235B_a22B_xnode_ep32";
    let (code, out, err) = autoplan(&["validate", "--runs", runs, "--explain", id]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with(id), "{out}");
    for section in [
        "step-time breakdown",
        "EP dispatch (DeepEP)",
        "memory per GPU",
        // The measured step the row implies: GBS 2048 × 4096 / (1663.4 tokens/s × 256 GPUs).
        "step time: measured 19.699 s (implied by the row)",
        "per block and micro-batch of the busiest stage",
        "recompute=selective:layernorm+moe_act",
    ] {
        assert!(out.contains(section), "{section} missing:\n{out}");
    }
    // A skipped row says why; an unknown id names the file.
    let (code, _, err) = autoplan(&["validate", "--runs", runs, "--explain", "tt_70b_2d"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("sequence length not given"), "{err}");
    // A row without a recompute whose plan does not fit without one is priced with the least
    // that fits, and says so.
    let id = "bridge2511_h100_GPT-OSS-120B_64gpu_bf16";
    let (code, out, err) = autoplan(&["validate", "--runs", runs, "--explain", id]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("chosen by the model: recompute: the row gives none")
            && out.contains("the first 6 of each chunk's 9 blocks recomputed in full")
            && out.contains("recompute_layers=6"),
        "{out}"
    );
    // One that fits with no recompute at all (Llama 3 70B on 8 H100 without sharding) is
    // skipped saying so, with the memory that rules it out.
    let dir = std::env::temp_dir().join(format!("autoplan-explain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tiny = dir.join("runs.csv");
    std::fs::write(
        &tiny,
        "id,model,gpu,num_gpus,gpus_per_node,tp,pp,dp,seq_len,micro_batch,global_batch,\
         measured_tokens_per_s_per_gpu\n\
         r1,LLAMA3_70B,H100-SXM-80GB (DGX-H100),8,8,1,1,8,8192,1,64,1000\n",
    )
    .unwrap();
    let (code, out, _) = autoplan(&[
        "validate",
        "--runs",
        tiny.to_str().unwrap(),
        "--explain",
        "r1",
    ]);
    assert_eq!(code, Some(3), "out of memory: infeasible");
    assert!(
        out.contains("skipped: recompute not given")
            && out.contains("with every block recomputed: out of memory")
            && out.contains("memory per GPU"),
        "{out}"
    );
    std::fs::remove_dir_all(&dir).ok();
    // A depth the row does not give is said to be the model's choice.
    let runs2 = concat!(env!("CARGO_MANIFEST_DIR"), "/data/published_runs_2.csv");
    let id = "llama3_405b_8192gpu_seq8192";
    let (code, out, err) = autoplan(&["validate", "--runs", runs2, "--explain", id]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("chosen by the model: vpp 8: the row names an interleaved"),
        "{out}"
    );
    let id = "nar21_t1_530B";
    let (_, out, _) = autoplan(&["validate", "--runs", runs, "--explain", id]);
    assert!(!out.contains("chosen by the model"), "{out}");
    let (code, _, err) = autoplan(&["validate", "--runs", runs, "--explain", "nope"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("published_runs.csv") && err.contains("nope"),
        "{err}"
    );

    // The grid's best point is never worse than the calibrated table, which is one of its points.
    let (code, out, err) = autoplan(&[
        "validate", "--runs", runs, "--fit", "v100", "--format", "json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    let best = v["best"][0]["mape"].as_f64().unwrap();
    let current = v["current"]["mape"].as_f64().unwrap();
    assert!(best <= current + 1e-12, "{best} > {current}");
    assert_eq!(v["current"]["rows"].as_u64(), Some(4));
    // V100's four rows are one source's (Megatron-LM v1): no family to hold out.
    assert_eq!(v["leave_one_source_out"].as_array().map(Vec::len), Some(0));

    // A framework profile's constant: its grid, its own value (the best point: the profile
    // carries its fit) and a leave-one-out error per row; an unknown profile is named.
    let runs2 = "data/published_runs_2.csv";
    let (code, out, err) = autoplan(&[
        "validate",
        "--runs",
        runs2,
        "--fit-framework",
        "megatron-deepspeed",
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["current"]["rows"].as_u64(), Some(3));
    assert_eq!(v["current"]["constant"].as_str(), Some("unpriced_compute"));
    assert_eq!(
        v["best"][0]["value"].as_f64(),
        v["current"]["value"].as_f64()
    );
    assert_eq!(v["leave_one_out"].as_array().map(Vec::len), Some(3));
    let (code, _, err) = autoplan(&["validate", "--runs", runs2, "--fit-framework", "nope"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("nope") && err.contains("llm-foundry"), "{err}");
}

#[test]
fn seq_len_beyond_a_learned_position_table_is_refused_not_widened() {
    let (code, _, err) = autoplan(&[
        "evaluate",
        "--model",
        "gpt3-175b",
        "--cluster",
        "a100x1024",
        "--seq-len",
        "4096",
        "--plan",
        "tp=8,pp=8",
    ]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("--seq-len") && err.contains("learned position table (2048)"),
        "{err}"
    );
}

/// `evaluate ARGS --format json`'s step time, seconds (the command must succeed).
fn step_time(args: &[&str]) -> f64 {
    let mut all = vec!["evaluate"];
    all.extend_from_slice(args);
    all.extend(["--format", "json"]);
    let (code, out, err) = autoplan(&all);
    assert_eq!(code, Some(0), "{args:?}: {err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    v["step_time_s"].as_f64().unwrap()
}

#[test]
fn precision_override_reaches_the_cost_model() {
    let step = |precision: &str| {
        step_time(&[
            "--model",
            "llama3-70b",
            "--cluster",
            "dgx-h100",
            "--gpus",
            "64",
            "--precision",
            precision,
            "--plan",
            "tp=4,pp=8,schedule=interleaved,vpp=5,mbs=1,sp=on,zero=1",
        ])
    };
    // FP8 doubles the GEMMs' peak on H100; the attention core, head and communication do not
    // speed up, so the step is faster but not twice as fast.
    let (bf16, fp8) = (step("bf16"), step("fp8"));
    assert!(fp8 < bf16 && fp8 > 0.5 * bf16, "bf16 {bf16} fp8 {fp8}");
    let (code, _, err) = autoplan(&[
        "evaluate",
        "--model",
        "llama3-70b",
        "--cluster",
        "dgx-h100",
        "--precision",
        "fp4",
        "--plan",
        "tp=8",
    ]);
    assert_eq!(code, Some(2));
    assert!(err.contains("fp4"), "{err}");
}

#[test]
fn the_attention_flag_reaches_the_cost_model() {
    // Llama 3 8B at 32K tokens on H100s, where the attention core is most of a block:
    // FlashAttention-2's kernels (`--attention flash2`) run it at about half cuDNN's forward
    // rate (the default, `flash`: the framework's fused kernel).
    let step = |attention: &str| {
        step_time(&[
            "--model",
            "llama3-8b",
            "--cluster",
            "dgx-h100",
            "--gpus",
            "8",
            "--seq-len",
            "32768",
            "--global-batch",
            "8",
            "--attention",
            attention,
            "--plan",
            "tp=1,pp=1,mbs=1,recompute=full,zero=3",
        ])
    };
    let (flash, flash2) = (step("flash"), step("flash2"));
    assert!(flash2 > 1.2 * flash, "flash {flash} flash2 {flash2}");
}

#[test]
fn reserve_moves_the_memory_peak_and_is_checked() {
    let peak = |extra: &[&str]| -> f64 {
        let mut args = vec![
            "evaluate",
            "--model",
            "llama3-8b",
            "--cluster",
            "a100x64",
            "--plan",
            "tp=8,sp=on,zero=1",
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        let (code, out, err) = autoplan(&args);
        assert_eq!(code, Some(0), "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).expect("json");
        v["memory_peak_gib"].as_f64().unwrap()
    };
    // The default reserve is 3 GiB: 10 GiB adds 7 to the peak.
    let d = peak(&[]) - peak(&["--reserve", "10"]);
    assert!((d + 7.0).abs() < 1e-9, "{d}");
    for bad in ["--reserve=-1", "--reserve=80", "--reserve=nan"] {
        let (code, _, err) = autoplan(&[
            "search",
            "--model",
            "llama3-8b",
            "--cluster",
            "a100x64",
            bad,
        ]);
        assert_ne!(code, Some(0), "{bad}");
        assert!(err.contains("--reserve"), "{bad}: {err}");
    }
}

#[test]
fn an_uncalibrated_gpu_is_said_to_be_one() {
    // L40S has no published run to fit its efficiency constants on: evaluate and search say so
    // on stderr, evaluate's JSON has `calibrated: false`; a fitted GPU (A100) has no note.
    let run = |cluster: &str, cmd: &str, json: bool| {
        let mut args = vec![cmd, "--model", "llama3-8b", "--cluster", cluster];
        if cmd == "evaluate" {
            args.extend(["--plan", "tp=1,pp=4,mbs=1,recompute=full,zero=3"]);
        } else {
            args.extend(["--top", "1"]);
        }
        if json {
            args.extend(["--format", "json"]);
        }
        let (code, out, err) = autoplan(&args);
        assert_eq!(code, Some(0), "{cluster} {cmd}: {err}");
        (out, err)
    };
    for cmd in ["evaluate", "search"] {
        let (_, err) = run("l40sx64", cmd, false);
        assert!(
            err.contains("note: no published run on L40S-48GB calibrates"),
            "{cmd}: {err}"
        );
        let (_, err) = run("a100x64", cmd, false);
        assert!(!err.contains("note:"), "{cmd}: {err}");
    }
    for (cluster, calibrated) in [("l40sx64", false), ("a100x64", true)] {
        let (out, err) = run(cluster, "evaluate", true);
        assert!(!err.contains("note:"), "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).expect("json");
        assert_eq!(v["calibrated"], calibrated, "{cluster}");
    }
}

#[test]
fn a_moe_narrower_than_any_validated_one_is_said_to_be_one() {
    // Qwen3-30B-A3B's experts (768) are narrower than any MoE a published run validates within
    // 25% (Qwen3-235B-A22B's 1536): evaluate and search say so on stderr; Qwen3-235B-A22B,
    // DeepSeek-V3 and a dense model do not.
    let run = |model: &str, cmd: &str| {
        let mut args = vec![cmd, "--model", model, "--cluster", "dgx-h100"];
        if cmd == "evaluate" {
            args.extend([
                "--gpus",
                "256",
                "--plan",
                "tp=1,pp=8,ep=8,mbs=1,recompute=full",
            ]);
        } else {
            args.extend(["--gpus", "64", "--top", "1", "--space", "moe"]);
        }
        // Evaluated, fitting or not (exit 3: out of memory, the note printed before).
        let (code, _, err) = autoplan(&args);
        assert!(matches!(code, Some(0 | 3)), "{model} {cmd}: {err}");
        err
    };
    for cmd in ["evaluate", "search"] {
        let err = run("qwen3-30b-a3b", cmd);
        assert!(
            err.contains("note: qwen3-30b-a3b's routed experts (768 wide) are narrower"),
            "{cmd}: {err}"
        );
        for model in ["qwen3-235b-a22b", "deepseek-v3"] {
            let err = run(model, cmd);
            assert!(!err.contains("routed experts"), "{model} {cmd}: {err}");
        }
    }
}

#[test]
fn a_framework_profile_says_what_it_leaves_out() {
    // torchtitan's and DeepSpeed's cost profiles name what they do not price
    // (`CostProfile::not_modelled`): evaluate and search print it on stderr; Megatron-Core's
    // names nothing and prints nothing.
    for (framework, said) in [
        (
            "torchtitan",
            Some("note: the torchtitan cost profile: Float8's scaling kernels"),
        ),
        (
            "deepspeed",
            Some("note: the deepspeed cost profile: DeepSpeed's pipeline engine"),
        ),
        ("megatron-core", None),
    ] {
        for cmd in ["evaluate", "search"] {
            let mut args = vec![
                cmd,
                "--model",
                "llama3-8b",
                "--cluster",
                "dgx-h100",
                "--gpus",
                "8",
                "--framework",
                framework,
            ];
            if cmd == "evaluate" {
                args.extend(["--plan", "tp=1,pp=1,mbs=1,zero=3,recompute=full"]);
            } else {
                args.extend(["--top", "1"]);
            }
            let (code, _, err) = autoplan(&args);
            assert_eq!(code, Some(0), "{framework} {cmd}: {err}");
            match said {
                Some(s) => assert!(err.contains(s), "{framework} {cmd}: {err}"),
                None => assert!(!err.contains("cost profile"), "{framework} {cmd}: {err}"),
            }
        }
    }
}

/// `--emit nccl` (issue 18 item 3): a tuner config NCCL's example plugin reads, whose lines
/// name the algorithm and protocol the report booked for each tuned collective; a plan priced
/// with an algorithm NCCL lacks is refused with the reason.
#[test]
fn evaluate_emits_an_nccl_tuner_config_matching_the_report() {
    use autoplan_cost::nccl;
    let base = [
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
    ];
    let run = |plan: &str, extra: &[&str]| {
        let mut args = base.to_vec();
        args.push(plan);
        args.extend_from_slice(extra);
        autoplan(&args)
    };
    let (code, out, err) = run(PLAN, &["--emit", "nccl"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("NCCL_ALGO=\""), "{out}");
    let lines = nccl::parse_tuner_config(&out).expect("the emitted config parses");
    assert!(!lines.is_empty());
    let (code, json, err) = run(PLAN, &["--format", "json"]);
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let mut checked = 0;
    for row in v["report"]["comm"].as_array().unwrap() {
        let op: autoplan_cost::Collective = row["collective"].as_str().unwrap().parse().unwrap();
        if nccl::tuner_collective(op).is_none() || row["group"]["size"].as_u64() == Some(1) {
            continue;
        }
        let (nodes, ranks) = (
            row["group"]["nodes"].as_u64().unwrap() as u32,
            row["group"]["size"].as_u64().unwrap() as u32,
        );
        let bytes = row["bytes"].as_f64().unwrap().round() as u64;
        let l = nccl::lookup(&lines, op, bytes, nodes, ranks)
            .unwrap_or_else(|| panic!("no line for {row}"));
        assert_eq!(
            nccl::tuner_algorithm(l.algorithm),
            Some(match row["algorithm"].as_str().unwrap() {
                "double-binary-tree" => "tree",
                "in-switch" => "nvls",
                other => other,
            }),
            "{row}"
        );
        assert_eq!(
            l.protocol.name(),
            row["protocol"].as_str().unwrap(),
            "{row}"
        );
        checked += 1;
    }
    assert!(checked > 0);
    let (code, _, err) = run(&format!("{PLAN},algo=any"), &["--emit", "nccl"]);
    assert_ne!(code, Some(0));
    assert!(err.contains("NCCL does not have"), "{err}");
}

/// A cluster whose GPUs run capped below their rated power (Grand Teton's 500 W H100s) is said
/// to be one on stderr by `evaluate` and `search`, and by `show --cluster`; an uncapped one is not.
#[test]
fn a_power_capped_cluster_is_said_to_be_one() {
    for cluster in ["grand-teton-h100", "dgx-h100"] {
        for cmd in ["evaluate", "search"] {
            let mut args = vec![
                cmd,
                "--model",
                "llama3-8b",
                "--cluster",
                cluster,
                "--gpus",
                "8",
            ];
            if cmd == "evaluate" {
                args.extend(["--plan", "tp=1,dp=8,mbs=1,recompute=full"]);
            } else {
                args.extend(["--top", "1"]);
            }
            let (code, _, err) = autoplan(&args);
            assert!(matches!(code, Some(0 | 3)), "{cluster} {cmd}: {err}");
            let said = err.contains("GPUs run under a 500 W power limit, below their 700 W rating");
            assert_eq!(
                said,
                cluster == "grand-teton-h100",
                "{cluster} {cmd}: {err}"
            );
        }
    }
    let (code, out, err) = autoplan(&["show", "--cluster", "grand-teton-h100"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("power   700 W rated, run at a 500 W limit"),
        "{out}"
    );
    // The JSON outputs carry the caveats.
    for (cluster, want) in [("grand-teton-h100", 1), ("dgx-h100", 0)] {
        for extra in [
            &["evaluate", "--plan", "tp=4,dp=2,mbs=1,recompute=full"][..],
            &["search", "--top", "1"][..],
        ] {
            let mut args = vec![extra[0], "--model", "llama3-8b", "--cluster", cluster];
            args.extend(["--gpus", "8", "--format", "json"]);
            args.extend(&extra[1..]);
            let (code, out, err) = autoplan(&args);
            assert_eq!(code, Some(0), "{err}");
            let v: serde_json::Value = serde_json::from_str(&out).unwrap();
            let caveats = v["caveats"].as_array().unwrap();
            assert_eq!(caveats.len(), want, "{cluster} {}: {caveats:?}", extra[0]);
        }
    }
}

/// The HTML report carries the caveats `report` and `search --html` print on stderr (a shared
/// report is read without the terminal): a power-capped cluster and a MoE narrower than any
/// validated one are listed under the summary; a plain case lists none.
#[test]
fn a_report_carries_its_caveats() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let capped = dir.join("report_caveats.html");
    let plain = dir.join("report_no_caveats.html");
    for (model, cluster, out) in [
        ("qwen3-30b-a3b", "grand-teton-h100", &capped),
        ("llama3-8b", "dgx-h100", &plain),
    ] {
        let out_s = out.to_str().unwrap();
        let (code, _, err) = autoplan(&[
            "report",
            "--model",
            model,
            "--cluster",
            cluster,
            "--gpus",
            "8",
            "--top",
            "1",
            "-o",
            out_s,
        ]);
        assert_eq!(code, Some(0), "{model}: {err}");
    }
    let html = std::fs::read_to_string(&capped).unwrap();
    assert!(html.contains("<h3>Caveats</h3>"), "caveats missing");
    assert!(
        html.contains("run under a 500 W power limit"),
        "power caveat missing"
    );
    assert!(
        html.contains("routed experts (768 wide)"),
        "MoE caveat missing"
    );
    let html = std::fs::read_to_string(&plain).unwrap();
    assert!(!html.contains("Caveats"), "a plain report lists caveats");
}
