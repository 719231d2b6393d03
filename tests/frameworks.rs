//! `--framework`: for the README case and the search golden cases (and the llama3-70b,
//! llama3.1-405b and DeepSeek-V2 cases), every top-10 plan ranked for a framework is one the
//! framework runs (its capability check passes), the Megatron export of every plan ranked for
//! Megatron-Core succeeds, and under `any` the export refuses exactly what the table refuses,
//! with the table's reason.

mod common;

use autoplan::cluster::resolve_cluster;
use autoplan::evaluate::EvalOptions;
use autoplan::graph::{resolve_model, ModelSpec};
use autoplan::plan::{Framework, Plan};
use autoplan::search::{resolve_space, search_case_for, SearchOptions, Target};

use common::cases::CASES;

/// The top-10 plans of every case for `framework` (with the default headroom).
fn top10(framework: Framework) -> Vec<(ModelSpec, Vec<Plan>)> {
    CASES
        .iter()
        .map(|&(m, c, s)| {
            let model = resolve_model(m).expect("bundled model");
            let cluster = resolve_cluster(c).expect("bundled cluster");
            let space = resolve_space(s).expect("bundled space");
            let target = Target {
                framework,
                ..Target::default()
            };
            let opts = SearchOptions {
                top_k: 10,
                exhaustive: false,
            };
            let plans = match search_case_for(
                &model,
                &cluster,
                EvalOptions::default(),
                target,
                &space,
                &opts,
                &(),
            ) {
                Ok(case) => case.outcome.plans.iter().map(|r| r.plan).collect(),
                // A framework without the model's precision (DeepSeek-V3's FP8 delayed
                // scaling under torchtitan or DeepSpeed) ranks nothing, and says why.
                Err(e) if e.contains("cannot train in this precision") => Vec::new(),
                Err(e) => panic!("{m} on {c}: {e}"),
            };
            (model, plans)
        })
        .collect()
}

/// Every ranked plan passes the framework's check; returns how many were ranked.
fn all_runnable(framework: Framework) -> usize {
    let mut n = 0;
    for (model, plans) in top10(framework) {
        for p in plans {
            n += 1;
            if let Err(r) = framework.check(&p, &model) {
                panic!("{}: ranked `{p}` that {framework} refuses: {r}", model.name);
            }
        }
    }
    n
}

#[test]
fn megatron_core_ranks_only_what_it_runs_and_every_plan_exports() {
    let fw = Framework::default();
    let mut n = 0;
    for (model, plans) in top10(fw) {
        assert_eq!(plans.len(), 10, "{}: fewer than 10 plans", model.name);
        for p in plans {
            n += 1;
            fw.check(&p, &model)
                .unwrap_or_else(|r| panic!("{}: `{p}` refused: {r}", model.name));
            p.megatron_args_for(&model, fw)
                .unwrap_or_else(|e| panic!("{}: `{p}` does not export: {e}", model.name));
        }
    }
    assert_eq!(n, 70);
}

#[test]
fn older_megatron_core_torchtitan_and_deepspeed_rank_only_what_they_run() {
    let v14: Framework = "megatron-core@0.14"
        .parse()
        .expect("a version in the table");
    assert!(all_runnable(v14) > 0);
    assert!(all_runnable(Framework::TorchTitan) > 0);
    assert!(all_runnable(Framework::DeepSpeed) > 0);
}

#[test]
fn the_export_refuses_what_the_table_refuses_with_its_reason() {
    // Under `any` the ranking holds plans Megatron-Core cannot run (DualPipe, zero-bubble, EP
    // overlap with 1F1B pipelines, ...): each is refused for export with the table's reason.
    let fw = Framework::default();
    let mut refused = 0;
    for (model, plans) in top10(Framework::Any) {
        for p in plans {
            if let Err(r) = fw.check(&p, &model) {
                refused += 1;
                let e = p
                    .megatron_args(&model)
                    .expect_err("a plan the table refuses must not export");
                assert!(
                    e.to_string().contains(&r.message()) && e.to_string().contains(r.source),
                    "{}: `{p}`: export error `{e}` lacks the table's reason `{r}`",
                    model.name
                );
            }
        }
    }
    assert!(
        refused > 0,
        "the theoretical space must hold plans Megatron refuses"
    );
}

#[test]
fn refusals_name_the_version_the_rule_and_its_source() {
    let model = resolve_model("deepseek-v3").expect("bundled model");
    let plan: Plan = "tp=1,pp=16,dp=128,ep=64,mbs=1,schedule=1f1b,recompute=selective,zero=1,\
                      ep_overlap=on"
        .parse()
        .expect("plan");
    let v15: Framework = "megatron-core@0.15".parse().expect("version");
    let r = v15
        .check(&plan, &model)
        .expect_err("EP overlap on a 1F1B pipeline");
    assert_eq!(
        r.message(),
        "Megatron-Core 0.15 cannot overlap EP with pp > 1 without virtual pipeline stages"
    );
    assert!(r.source.contains("transformer_config.py"), "{r}");
    // The `moe` module recomputed under EP overlap: refused from 0.15, not in 0.14.
    let moe: Plan = "tp=1,pp=1,dp=2048,ep=64,mbs=1,recompute=selective:moe,zero=1,ep_overlap=on"
        .parse()
        .expect("plan");
    assert!(v15.check(&moe, &model).is_err());
    let v14: Framework = "megatron-core@0.14".parse().expect("version");
    assert_eq!(v14.check(&moe, &model), Ok(()));
    // TP overlap without sequence parallelism.
    let gpt = resolve_model("gpt3-175b").expect("bundled model");
    let tpo: Plan = "tp=8,sp=off,pp=8,dp=16,mbs=1,tp_overlap=on"
        .parse()
        .expect("plan");
    let r = Framework::default()
        .check(&tpo, &gpt)
        .expect_err("tp overlap without sp");
    assert!(
        r.to_string().contains("args.py @ core_v0.19.0:L1401-1402"),
        "{r}"
    );
    // The interleaved schedule with a micro-batch count that is not a multiple of pp:
    // DeepSeek-V3's 15360 sequences on dp=1024 are 15 micro-batches.
    let il: Plan = "tp=1,pp=2,dp=1024,ep=64,mbs=1,schedule=interleaved,vpp=4,zero=1"
        .parse()
        .expect("plan");
    let r = Framework::default()
        .check(&il, &model)
        .expect_err("15 % 2 ≠ 0");
    assert!(
        r.source.contains("schedules.py @ core_v0.19.0:L1133-1152"),
        "{r}"
    );
    // Under `any` too: the interleaved bubble formula does not hold for it.
    let r = Framework::Any
        .check(&il, &model)
        .expect_err("15 % 2 ≠ 0 under any");
    assert!(r.message().contains("not a multiple of pp"), "{r}");
    // Versions outside the table are an error naming the range.
    let e = "megatron-core@0.12"
        .parse::<Framework>()
        .expect_err("not in the table");
    assert!(e.contains("0.14..0.19"), "{e}");
}

#[test]
fn min_headroom_keeps_risky_plans_out_of_the_ranking() {
    // Under `any` with no headroom, a plan of DeepSeek-V3's top 100 leaves under 2 GiB of 80
    // free; with the default 2 GiB no ranked plan does.
    let model = resolve_model("deepseek-v3").expect("bundled model");
    let cluster = resolve_cluster("h800x2048").expect("bundled cluster");
    let space = resolve_space("default").expect("bundled space");
    let hbm = cluster.gpu.hbm_bytes;
    let free = |headroom: f64| {
        let target = Target {
            framework: Framework::Any,
            min_headroom_bytes: headroom,
        };
        let opts = SearchOptions {
            top_k: 100,
            exhaustive: false,
        };
        search_case_for(
            &model,
            &cluster,
            EvalOptions::default(),
            target,
            &space,
            &opts,
            &(),
        )
        .expect("any framework")
        .outcome
        .plans
        .iter()
        .map(|r| hbm - r.metrics.memory_peak_bytes)
        .collect::<Vec<f64>>()
    };
    const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
    let none = free(0.0);
    assert!(
        none.iter().any(|&f| f < 2.0 * GIB),
        "every plan of the theoretical top 100 leaves 2 GiB: {none:?}"
    );
    let two = free(autoplan::search::DEFAULT_MIN_HEADROOM_BYTES);
    assert_eq!(two.len(), 100);
    assert!(two.iter().all(|&f| f >= 2.0 * GIB), "{two:?}");
}

#[test]
fn evaluate_refuses_with_the_rule_and_any_evaluates() {
    let run = |extra: &[&str]| {
        let mut args = vec![
            "evaluate",
            "--model",
            "deepseek-v3",
            "--cluster",
            "h800x2048",
            "--plan",
            "tp=1,pp=16,dp=128,ep=64,mbs=1,recompute=full,zero=1,ep_overlap=on",
        ];
        args.extend_from_slice(extra);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_autoplan"))
            .args(&args)
            .output()
            .expect("run autoplan");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, err) = run(&["--framework", "megatron-core@0.15"]);
    assert_eq!(code, Some(3), "{err}");
    assert!(
        err.contains(
            "Megatron-Core 0.15 cannot overlap EP with pp > 1 without virtual pipeline stages"
        ) && err.contains("transformer_config.py"),
        "{err}"
    );
    let (code, err) = run(&["--framework", "megatron-core@0.15", "--emit", "megatron"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("Megatron-Core 0.15 cannot overlap EP"),
        "{err}"
    );
    let (code, err) = run(&["--framework", "any"]);
    assert_eq!(code, Some(0), "{err}");
}
