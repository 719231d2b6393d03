//! `--emit megatron|torchtitan|deepspeed`: every plan a framework runs exports, and the export
//! reads back to the same plan (every knob the format expresses); a plan the framework cannot
//! run is refused with its capability table's reason. Random plans, and the top-10 plans of
//! the README case and the search golden cases (plus the issue's llama3-70b, llama3.1-405b
//! and DeepSeek-V2 cases) ranked for each framework (issue 18, "Done when").

mod common;

use autoplan::cluster::resolve_cluster;
use autoplan::emit::{self, megatron::same_expressed, ExportError};
use autoplan::evaluate::EvalOptions;
use autoplan::graph::{resolve_model, ModelSpec};
use autoplan::plan::{Framework, Plan};
use autoplan::search::{resolve_space, search_case_for, SearchOptions, Target};

/// The export of `plan` in `framework`'s format.
fn export(fw: Framework, plan: &Plan, model: &ModelSpec) -> Result<String, ExportError> {
    match fw {
        Framework::MegatronCore { .. } => emit::megatron::emit(plan, model, fw, false),
        Framework::TorchTitan => emit::torchtitan::emit(plan, model, false),
        Framework::DeepSpeed => emit::deepspeed::emit(plan, model),
        Framework::Any => panic!("no export for `any`"),
    }
}

/// The plan an export reads back to.
fn parse(fw: Framework, text: &str, model: &ModelSpec, gpus: u32) -> Result<Plan, String> {
    match fw {
        Framework::MegatronCore { .. } => emit::megatron::parse(text, model, gpus),
        Framework::TorchTitan => emit::torchtitan::parse(text, model),
        Framework::DeepSpeed => emit::deepspeed::parse(text, model),
        Framework::Any => panic!("no export for `any`"),
    }
}

/// Export, read back, compare: the failure names the plan, the export and the difference.
fn round_trip(fw: Framework, plan: &Plan, model: &ModelSpec) {
    let text = export(fw, plan, model).unwrap_or_else(|e| {
        panic!(
            "{}: `{plan}` runs in {fw} but does not export: {e}",
            model.name
        )
    });
    let gpus = plan.gpus() as u32;
    let back = parse(fw, &text, model, gpus).unwrap_or_else(|e| {
        panic!(
            "{}: `{plan}`: the {fw} export does not parse: {e}\n{text}",
            model.name
        )
    });
    if let Err(d) = same_expressed(plan, &back, model) {
        panic!(
            "{}: `{plan}` reads back as `{back}` ({d})\n{text}",
            model.name
        );
    }
}

/// Random plans `fw` runs on a dense, an MoE and an MLA model: each exports and reads back;
/// those it refuses are refused by the export with the table's reason. Returns how many round
/// trips ran.
fn random_round_trips(fw: Framework, seed: u64) -> usize {
    let mut rng = common::plans::Rng(seed);
    let mut ran = 0;
    for name in ["llama3-8b", "mixtral-8x7b", "deepseek-v2-lite", "gpt3-175b"] {
        let model = resolve_model(name).expect("bundled model");
        for _ in 0..60000 {
            let plan = common::plans::random_plan(&mut rng);
            let Ok(gpus) = u32::try_from(plan.gpus()) else {
                continue;
            };
            if plan.check(&model, gpus).is_err() {
                continue;
            }
            match fw.check(&plan, &model) {
                Ok(()) => {
                    round_trip(fw, &plan, &model);
                    ran += 1;
                }
                Err(refusal) => match export(fw, &plan, &model) {
                    Err(ExportError::Refused(r)) => assert_eq!(*r, refusal),
                    other => panic!(
                        "{name}: `{plan}`: {fw} refuses it ({refusal}), export gave {other:?}"
                    ),
                },
            }
        }
    }
    ran
}

#[test]
fn random_megatron_plans_round_trip() {
    let n = random_round_trips(Framework::default(), 18);
    assert!(n >= 3000, "only {n} random plans Megatron-Core runs");
}

#[test]
fn random_torchtitan_plans_round_trip() {
    // Fewer than Megatron-Core: torchtitan shards a pipelined plan only as zero=1 (torch's
    // pipelining), a plan without PP only with FSDP2 (3, 3-noreshard, 3:G) or DDP alone.
    let n = random_round_trips(Framework::TorchTitan, 19);
    assert!(n >= 400, "only {n} random plans torchtitan runs");
}

#[test]
fn random_deepspeed_plans_round_trip() {
    let n = random_round_trips(Framework::DeepSpeed, 20);
    assert!(n >= 300, "only {n} random plans DeepSpeed runs");
}

use common::cases::CASES;

/// Every top-10 plan of every case ranked for `fw` exports and reads back; returns the plans
/// and the cases `fw` ranks nothing for (a precision it does not train in, with that reason).
fn top10_export(fw: Framework) -> (usize, Vec<&'static str>) {
    let (mut n, mut none) = (0, Vec::new());
    for (m, c, s) in CASES {
        let model = resolve_model(m).expect("bundled model");
        let cluster = resolve_cluster(c).expect("bundled cluster");
        let space = resolve_space(s).expect("bundled space");
        let target = Target {
            framework: fw,
            ..Target::default()
        };
        let opts = SearchOptions {
            top_k: 10,
            exhaustive: false,
        };
        match search_case_for(
            &model,
            &cluster,
            EvalOptions::default(),
            target,
            &space,
            &opts,
            &(),
        ) {
            Ok(case) => {
                // Fewer than 10 only where the framework runs fewer plans of the space
                // (DeepSpeed: 1F1B, no EP, even stages).
                assert!(!case.outcome.plans.is_empty(), "{m} on {c}: no plan");
                for r in &case.outcome.plans {
                    round_trip(fw, &r.plan, &model);
                    n += 1;
                }
            }
            Err(e) if e.contains("cannot train in this precision") => none.push(m),
            Err(e) => panic!("{m} on {c}: {e}"),
        }
    }
    (n, none)
}

#[test]
fn megatron_core_top10_plans_export_and_read_back() {
    assert_eq!(top10_export(Framework::default()), (70, vec![]));
    let v14: Framework = "megatron-core@0.14"
        .parse()
        .expect("a version in the table");
    assert_eq!(top10_export(v14), (70, vec![]));
}

#[test]
fn torchtitan_top10_plans_export_and_read_back() {
    // DeepSeek-V3 trains in FP8 with delayed scaling and GPT-3 in FP16, which torchtitan does
    // not run.
    assert_eq!(
        top10_export(Framework::TorchTitan),
        (50, vec!["deepseek-v3", "gpt3-175b"])
    );
}

#[test]
fn deepspeed_top10_plans_export_and_read_back() {
    // DeepSeek-V3's FP8 is not DeepSpeed's; of llama3.1-405b's space 8 plans fit in memory
    // under DeepSpeed's rules (ZeRO-2/3 without pipelining, 1F1B only).
    assert_eq!(
        top10_export(Framework::DeepSpeed),
        (58, vec!["deepseek-v3"])
    );
}

#[test]
fn search_explain_emit_exports_the_ranked_plan_as_evaluate_does() {
    let case = ["--model", "llama3-8b", "--cluster", "a100x64"];
    for fmt in ["torchtitan", "deepspeed", "megatron", "nccl"] {
        let fw = match fmt {
            "torchtitan" | "deepspeed" => fmt,
            _ => "megatron-core",
        };
        let mut args = vec!["search"];
        args.extend(case);
        args.extend(["--framework", fw, "--format", "json"]);
        let (code, json, err) = common::autoplan(&args);
        assert_eq!(code, Some(0), "{err}");
        let v: serde_json::Value = serde_json::from_str(&json).expect("search JSON");
        let second = v["plans"][1]["plan"].as_str().expect("plan 2").to_string();
        args.truncate(args.len() - 2);
        args.extend(["--explain", "2", "--emit", fmt]);
        let (code, exported, err) = common::autoplan(&args);
        assert_eq!(code, Some(0), "{fmt}: {err}");
        let mut ev = vec!["evaluate"];
        ev.extend(case);
        ev.extend(["--framework", fw, "--plan", &second, "--emit", fmt]);
        let (code, direct, err) = common::autoplan(&ev);
        assert_eq!(code, Some(0), "{fmt}: {err}");
        assert_eq!(
            exported, direct,
            "{fmt}: search --explain 2 --emit vs evaluate --emit"
        );
        assert!(
            exported.contains(&second) || fmt == "megatron",
            "{fmt}: {exported}"
        );
    }
}

/// `evaluate --emit torchtitan` of Llama 3 8B on `a100x64` under `plan`.
fn emit_torchtitan(plan: &str) -> (Option<i32>, String, String) {
    common::autoplan(&[
        "evaluate",
        "--model",
        "llama3-8b",
        "--cluster",
        "a100x64",
        "--plan",
        plan,
        "--emit",
        "torchtitan",
    ])
}

#[test]
fn exports_refuse_with_the_table_reason() {
    let (code, _, err) = emit_torchtitan("tp=2,sp=on,mbs=1,recompute=none,zero=1");
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("torchtitan 0.2.2 cannot shard the data-parallel ranks this way")
            && err.contains("parallelize.py"),
        "{err}"
    );
    // With PP the same sharding is what torch's pipelining runs: exported as FSDP2.
    let (code, out, err) =
        emit_torchtitan("tp=2,sp=on,pp=4,schedule=interleaved,vpp=2,mbs=1,recompute=none,zero=1");
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("data_parallel_shard_degree = 8")
            && out.contains("fsdp_reshard_after_forward = \"default\""),
        "{out}"
    );
    let (code, _, err) = common::autoplan(&[
        "evaluate",
        "--model",
        "llama3-8b",
        "--cluster",
        "a100x64",
        "--plan",
        "tp=2,sp=on,pp=4,schedule=interleaved,vpp=2,mbs=1,zero=1",
        "--emit",
        "deepspeed",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("DeepSpeed 0.19.5 cannot run this pipeline schedule")
            && err.contains("pipe/schedule.py"),
        "{err}"
    );
}

/// The optimizer offload in each export (issue 19 item 1): DeepSpeed writes ZeRO-Offload's
/// `zero_optimization.offload_optimizer` (a `ratio` below 1, on stage 3 only) and reads it
/// back; Megatron writes its flags and reads them back; torchtitan refuses with the table's
/// reason (its `enable_cpu_offload` moves the parameters too).
#[test]
fn optimizer_offload_exports_and_reads_back() {
    let model = resolve_model("llama3-8b").expect("bundled model");
    for (fw, zero, pct) in [
        (Framework::DeepSpeed, 3, 25),
        (Framework::DeepSpeed, 3, 100),
        (Framework::DeepSpeed, 1, 100),
        (Framework::default(), 1, 50),
        (Framework::default(), 1, 100),
    ] {
        let plan = Plan {
            dp: 8,
            zero: autoplan::plan::Zero::stage(zero),
            offload_optimizer: pct,
            ..Plan::default()
        };
        let text = export(fw, &plan, &model).unwrap_or_else(|e| panic!("{plan}: {e}"));
        let back = parse(fw, &text, &model, 8).unwrap_or_else(|e| panic!("{plan}: {e}"));
        assert_eq!(back.offload_optimizer, pct, "{fw} `{plan}`:\n{text}");
        if fw == Framework::DeepSpeed {
            let ratio = format!("\"ratio\": {}", f64::from(pct) / 100.0);
            assert!(text.contains("\"offload_optimizer\""), "{text}");
            assert!(text.contains("\"device\": \"cpu\""), "{text}");
            assert_eq!(text.contains(&ratio), pct < 100, "{ratio}\n{text}");
        } else {
            assert!(text.contains("--optimizer-cpu-offload"), "{text}");
        }
    }
    // Without offload the export writes none.
    let plain = Plan {
        dp: 8,
        zero: autoplan::plan::Zero::stage(3),
        ..Plan::default()
    };
    let text = export(Framework::DeepSpeed, &plain, &model).expect("exports");
    assert!(!text.contains("offload_optimizer"), "{text}");
    // A ratio below 1 off stage 3, and torchtitan at all, are refused with the table's reason.
    for (fw, zero, pct, why) in [
        (Framework::DeepSpeed, 1, 50, "offload_config.py"),
        (Framework::TorchTitan, 3, 100, "enable_cpu_offload"),
    ] {
        let plan = Plan {
            dp: 8,
            zero: autoplan::plan::Zero::stage(zero),
            offload_optimizer: pct,
            ..Plan::default()
        };
        let refusal = fw.check(&plan, &model).expect_err("refused");
        match export(fw, &plan, &model) {
            Err(ExportError::Refused(r)) => {
                assert_eq!(*r, refusal);
                assert!(r.to_string().contains(why), "{r}");
            }
            other => panic!("{fw} `{plan}`: {other:?}"),
        }
    }
    // A read-back refuses what autoplan does not price: an NVMe tier, a ratio off the grid.
    let text = export(Framework::DeepSpeed, &plain, &model).expect("exports");
    for (dict, why) in [
        (r#""device": "nvme""#, "cpu"),
        (r#""device": "cpu", "ratio": 0.125"#, "ratio"),
    ] {
        let bad = text.replace(
            "\"stage\": 3",
            &format!("\"stage\": 3, \"offload_optimizer\": {{{dict}}}"),
        );
        let e = parse(Framework::DeepSpeed, &bad, &model, 8).expect_err("refused");
        assert!(e.contains(why), "{e}");
    }
}

/// Parameter offload in each export: DeepSpeed writes ZeRO-Infinity's
/// `zero_optimization.offload_param`, torchtitan `[training] enable_cpu_offload` (parameters,
/// gradients and optimizer state together), both read back; Megatron-Core refuses it with the
/// table's reason, and torchtitan refuses the optimizer offload without it.
#[test]
fn parameter_offload_exports_and_reads_back() {
    let model = resolve_model("llama3-8b").expect("bundled model");
    let plan = Plan {
        dp: 8,
        zero: autoplan::plan::Zero::stage(3),
        offload_optimizer: 100,
        offload_params: true,
        ..Plan::default()
    };
    for (fw, key) in [
        (Framework::DeepSpeed, "\"offload_param\""),
        (Framework::TorchTitan, "enable_cpu_offload = true"),
    ] {
        let text = export(fw, &plan, &model).unwrap_or_else(|e| panic!("{fw}: {e}"));
        assert!(text.contains(key), "{fw}:\n{text}");
        let back = parse(fw, &text, &model, 8).unwrap_or_else(|e| panic!("{fw}: {e}"));
        assert!(
            back.offload_params && back.offload_optimizer == 100,
            "{fw}: {back}"
        );
        let kept = Plan {
            offload_params: false,
            ..plan
        };
        if let Ok(text) = export(fw, &kept, &model) {
            assert!(!text.contains(key), "{fw}:\n{text}");
            assert!(!parse(fw, &text, &model, 8).unwrap().offload_params);
        }
    }
    for (fw, p, why) in [
        (Framework::default(), plan, "--optimizer-cpu-offload"),
        (
            Framework::TorchTitan,
            Plan {
                offload_params: false,
                ..plan
            },
            "enable_cpu_offload",
        ),
    ] {
        match export(fw, &p, &model) {
            Err(ExportError::Refused(r)) => assert!(r.to_string().contains(why), "{r}"),
            other => panic!("{fw} `{p}`: {other:?}"),
        }
    }
}

/// Activation offload in each export: Megatron-Core writes `--cpu-offloading-num-layers N`
/// (no `--cpu-offloading` flag in 0.19: the count sets it), DeepSpeed
/// `activation_checkpointing.cpu_checkpointing` with `--checkpoint-in-cpu`; both read back;
/// torchtitan refuses it with the table's reason, and each table's rules refuse what the
/// framework does not run.
#[test]
fn activation_offload_exports_and_reads_back() {
    use autoplan::plan::offload_activations::ALL;
    let model = resolve_model("llama3-8b").expect("bundled model");
    let base = Plan {
        dp: 8,
        zero: autoplan::plan::Zero::stage(1),
        ..Plan::default()
    };
    let mcore = Plan {
        offload_activations: 12,
        ..base
    };
    let ds = Plan {
        recompute: autoplan::plan::Recompute::Full,
        offload_activations: ALL,
        ..base
    };
    for (fw, plan, keys) in [
        (
            Framework::default(),
            mcore,
            &["--cpu-offloading-num-layers 12"][..],
        ),
        (
            Framework::DeepSpeed,
            ds,
            &["\"cpu_checkpointing\": true", "--checkpoint-in-cpu"][..],
        ),
    ] {
        let text = export(fw, &plan, &model).unwrap_or_else(|e| panic!("{fw}: {e}"));
        for key in keys {
            assert!(text.contains(key), "{fw}: {key}\n{text}");
        }
        assert!(!text.contains("--cpu-offloading\n"), "{text}");
        let back = parse(fw, &text, &model, 8).unwrap_or_else(|e| panic!("{fw}: {e}"));
        assert_eq!(back.offload_activations, plan.offload_activations, "{fw}");
        let kept = Plan {
            offload_activations: 0,
            ..plan
        };
        let text = export(fw, &kept, &model).unwrap();
        assert!(!text.contains("--cpu-offloading") && !text.contains("--checkpoint-in-cpu"));
        assert_eq!(parse(fw, &text, &model, 8).unwrap().offload_activations, 0);
    }
    for (fw, p, why) in [
        (
            Framework::TorchTitan,
            Plan {
                zero: autoplan::plan::Zero::stage(3),
                ..mcore
            },
            "no activation offload",
        ),
        (
            Framework::default(),
            Plan {
                pp: 2,
                dp: 4,
                ..mcore
            },
            "pipeline",
        ),
        (Framework::default(), ds, "recomputation"),
        (Framework::DeepSpeed, mcore, "cpu_checkpointing"),
    ] {
        match export(fw, &p, &model) {
            Err(ExportError::Refused(r)) => assert!(r.to_string().contains(why), "{r}"),
            other => panic!("{fw} `{p}`: {other:?}"),
        }
    }
}

/// On a multi-node NVLink domain (an NVL72 rack of 4-GPU trays) the flex dispatcher, priced
/// over NVLink inside the rack, exports with HybridEP's backend (Megatron-Core 0.16+, the one
/// that crosses trays over NVLink) and reads back to the same plan; before 0.16 it is not
/// exported, with the reason. Inside one node it stays `--moe-enable-deepep`.
#[test]
fn flex_dispatch_on_an_nvl72_rack_runs_hybridep() {
    let model = resolve_model("deepseek-v3").unwrap();
    let plan = Plan::parse_for_gpus("ep=64,dispatcher=deepep,recompute=full,mbs=1", 256).unwrap();
    let at = |minor| Framework::MegatronCore { minor };
    let text = emit::megatron::emit(&plan, &model, at(19), true).unwrap();
    assert!(
        text.contains("--moe-flex-dispatcher-backend hybridep"),
        "{text}"
    );
    assert!(!text.contains("--moe-enable-deepep"), "{text}");
    let back = emit::megatron::parse(&text, &model, 256).unwrap();
    assert_eq!(same_expressed(&plan, &back, &model), Ok(()));
    let one_node = emit::megatron::emit(&plan, &model, at(19), false).unwrap();
    assert!(one_node.contains("--moe-enable-deepep"), "{one_node}");
    let e = emit::megatron::emit(&plan, &model, at(15), true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("hybridep") && e.contains("0.16"), "{e}");
    // The CLI knows the rack from the cluster file.
    let on_rack = |more: &[&str]| {
        let mut args = vec![
            "evaluate",
            "--model",
            "deepseek-v3",
            "--cluster",
            "gb200-nvl72x4",
            "--gpus",
            "256",
        ];
        args.extend_from_slice(more);
        common::autoplan(&args)
    };
    let (code, out, err) = on_rack(&[
        "--plan",
        "ep=64,dispatcher=deepep,recompute=full,mbs=1",
        "--emit",
        "megatron",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("--moe-flex-dispatcher-backend hybridep"),
        "{out}"
    );
    // torchtitan has no backend for the rack's NVLink: not exported, with the reason.
    let (code, _, err) = on_rack(&[
        "--framework",
        "torchtitan",
        "--precision",
        "mxfp8",
        "--plan",
        "ep=64,dispatcher=deepep,recompute=full,mbs=1,zero=3",
        "--emit",
        "torchtitan",
    ]);
    assert_ne!(code, Some(0), "{err}");
    assert!(
        err.contains("multi-node NVLink") && err.contains("§2.1"),
        "{err}"
    );
}

/// Transformer Engine's TP overlap asserts CUDA multicast (NVLink SHARP) unless `UB_SKIPMC=1`
/// asks for CUDA IPC: an A100 plan with `--tp-comm-overlap` exports that variable, an H100 plan
/// (NVLS nodes) or an A100 plan without the overlap does not; the flags read back alike.
#[test]
fn tp_overlap_without_nvlink_sharp_asks_for_cuda_ipc() {
    let model = resolve_model("gpt3-175b").unwrap();
    let fw = Framework::default();
    let plan = Plan::parse_for_gpus("tp=8,sp=on,pp=8,tp_overlap=on", 1024).unwrap();
    let a100 = resolve_cluster("a100x1024").unwrap();
    let h100 = resolve_cluster("h100x16384")
        .unwrap()
        .with_gpus(1024)
        .unwrap();
    let env = |p: &Plan, c| {
        emit::megatron::environment(&emit::megatron::emit_on(p, &model, fw, c).unwrap())
    };
    assert_eq!(
        env(&plan, &a100).get("UB_SKIPMC").map(String::as_str),
        Some("1")
    );
    assert_eq!(env(&plan, &h100).get("UB_SKIPMC"), None);
    let off = Plan {
        tp_overlap: false,
        ..plan
    };
    assert_eq!(env(&off, &a100).get("UB_SKIPMC"), None);
    let text = emit::megatron::emit_on(&plan, &model, fw, &a100).unwrap();
    let back = emit::megatron::parse(&text, &model, 1024).unwrap();
    assert_eq!(same_expressed(&plan, &back, &model), Ok(()));
}
