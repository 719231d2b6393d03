//! Validation against `data/published_runs.csv`: the bounds of issue 4 pinned, so a
//! regression of the model (or of the calibration) fails CI.

mod common;

use autoplan_evaluate::validate::{
    bundled_cluster as cluster_for, validate, PublishedRun, Validation,
};

fn runs() -> Vec<PublishedRun> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/published_runs.csv");
    let mut rdr = csv::Reader::from_path(path).expect("published_runs.csv");
    rdr.deserialize().map(|r| r.expect("row")).collect()
}

fn run() -> Validation {
    validate(
        &runs(),
        &|n| autoplan_graph::resolve_model(n).ok(),
        &cluster_for,
    )
}

#[test]
fn mape_at_most_10_percent_and_no_row_off_by_25() {
    let v = run();
    for r in &v.rows {
        println!(
            "{:48} {:18} {:9.3} {:9.3} {:+6.1}%",
            r.id,
            r.figure.name(),
            r.measured,
            r.predicted,
            100.0 * r.error
        );
    }
    assert!(v.rows.len() >= 40, "usable rows: {}", v.rows.len());
    assert!(v.mape <= 0.10, "MAPE {:.1}%", 100.0 * v.mape);
    for r in &v.rows {
        assert!(
            r.error.abs() <= 0.25,
            "{} off by {:+.1}%",
            r.id,
            100.0 * r.error
        );
    }
}

#[test]
fn no_published_plan_is_predicted_out_of_memory_or_invalid() {
    let v = run();
    for s in &v.skipped {
        assert!(
            !s.reason.starts_with("published plan rejected"),
            "{}: {}",
            s.id,
            s.reason
        );
    }
}

#[test]
fn a_row_without_recompute_recomputes_the_least_that_fits() {
    // The Megatron-Bridge and NeMo tables give no recompute. gpt-oss-120b at tp 1 · pp 4 ·
    // ep 8 and micro-batch 4 stores ~2 GiB per block and micro-batch, 36 per GPU in flight on
    // the first stage; Nemotron-4 340B on 128 GPUs holds 64.5 GiB of weights, fp32 gradients
    // and Adam state (ZeRO-1 over dp 2) before its 19 GiB of activations. Neither fits without
    // recompute, so each is scored with the fewest blocks per model chunk recomputed in full
    // that fit (Megatron's block method): a part of gpt-oss's 9 blocks per stage, all of
    // Nemotron's one block per chunk (vpp 12). One block fewer does not fit. The Bridge Llama
    // rows, which fit, keep no recompute.
    use autoplan_evaluate::validate::{case_of, recompute_known};
    use autoplan_evaluate::{Evaluator, Infeasible};
    let v = run();
    assert!(
        !v.skipped
            .iter()
            .any(|s| s.reason.starts_with("recompute not given")),
        "{:?}",
        v.skipped
    );
    let runs = runs();
    let case = |id: &str| {
        let r = runs.iter().find(|r| r.id == id).expect(id);
        case_of(r, &|n| autoplan_graph::resolve_model(n).ok(), &cluster_for).expect(id)
    };
    for (id, layers) in [
        ("bridge2511_h100_GPT-OSS-120B_64gpu_bf16", Some(6)),
        ("nemo2407_h100_Nemotron-340B_128gpu", None),
    ] {
        let c = case(id);
        assert!(!recompute_known(&c), "{id}: the model's choice");
        assert_eq!(c.plan.recompute, autoplan_plan::Recompute::Full, "{id}");
        assert_eq!(c.plan.recompute_layers, layers, "{id}");
        assert!(
            c.chosen
                .as_deref()
                .is_some_and(|w| w.contains("least that fits")),
            "{id}"
        );
        assert!(v.rows.iter().any(|r| r.id == id), "{id} not scored");
        let ev = Evaluator::new(&c.model, &c.cluster, c.options);
        let fewer = match layers {
            Some(k) => autoplan_plan::Plan {
                recompute_layers: Some(k - 1),
                ..c.plan
            },
            None => autoplan_plan::Plan {
                recompute: autoplan_plan::Recompute::None,
                ..c.plan
            },
        };
        assert!(
            matches!(ev.evaluate(&fewer), Err(Infeasible::OutOfMemory { .. })),
            "{id}: one block fewer fits"
        );
    }
    for id in [
        "bridge2511_h100_LLAMA3_8B_8gpu_fp8",
        "bridge2511_h100_LLAMA3_70B_64gpu_fp8",
    ] {
        let c = case(id);
        assert_eq!(c.plan.recompute, autoplan_plan::Recompute::None, "{id}");
        assert!(recompute_known(&c), "{id}");
    }
}

/// Row `id` at twice its sequence, as `validate` expresses it: the row gives no recompute, its
/// plan does not fit without one (checked), and the case's recompute is the model's choice.
/// With the row and the step time of the case's plan under another `recompute` and
/// `recompute_layers`.
fn at_twice_the_sequence(
    id: &str,
) -> (
    PublishedRun,
    autoplan_evaluate::validate::Case,
    impl Fn(autoplan_plan::Recompute, Option<u32>) -> Option<f64>,
) {
    use autoplan_evaluate::validate::recompute_known;
    use autoplan_evaluate::{Evaluator, Infeasible};
    use autoplan_plan::{Plan, Recompute};
    let mut r = common::row(id);
    assert!(r.recompute.is_none(), "{id}");
    r.seq_len = r.seq_len.map(|s| s * 2);
    let c = common::case(&r).expect(id);
    assert!(!recompute_known(&c), "{id}: the model's choice");
    let ev = Evaluator::new(&c.model, &c.cluster, c.options);
    let plan = c.plan;
    let none = Plan {
        recompute: Recompute::None,
        ..plan
    };
    assert!(
        matches!(ev.evaluate(&none), Err(Infeasible::OutOfMemory { .. })),
        "{id}"
    );
    let step = move |recompute, recompute_layers| {
        let p = Plan {
            recompute,
            recompute_layers,
            ..plan
        };
        ev.evaluate(&p).ok().map(|m| m.step_time_s)
    };
    (r, c, step)
}

#[test]
fn an_unfused_attention_row_without_recompute_recomputes_the_attention_core_first() {
    // MegaScale's baseline Megatron-LM (2023, unfused attention) at twice its sequence: GPT-175B
    // at tp 8 · pp 8 · vpp 6 stores each block's s×s scores (5·a·s²/t bytes, 1 GiB of its
    // 1.4 GiB per block and micro-batch at 4096 tokens) and does not fit without recompute.
    // Selective recompute of the attention core (Megatron's `--recompute-activations`) drops
    // exactly those and fits, at a fraction of full recompute's cost, so it is the least that
    // fits; under a fused attention kernel it frees nothing (the Nemotron row above stays full).
    use autoplan_plan::{Recompute, RecomputeModules};
    let (_, c, step) = at_twice_the_sequence("megascale_175b_megatron_256gpu_bs768");
    assert_eq!(c.plan.recompute, Recompute::Selective);
    assert_eq!(c.plan.recompute_modules, RecomputeModules::DEFAULT);
    assert!(c
        .chosen
        .as_deref()
        .is_some_and(|w| w.contains("attention core recomputed")));
    let (sel, full) = (
        step(Recompute::Selective, None).unwrap(),
        step(Recompute::Full, None).unwrap(),
    );
    assert!(sel < 0.9 * full, "{sel} vs {full}");
    // At its own 2048 tokens the row fits without recompute and keeps none.
    let c = common::case(&common::row("megascale_175b_megatron_256gpu_bs768")).unwrap();
    assert_eq!(c.plan.recompute, Recompute::None);
}

#[test]
fn a_moe_row_of_2025_without_recompute_recomputes_the_fastest_module_set() {
    // Megatron-Bridge 25.09's DeepSeek-V3 on 1024 H100 at twice its sequence does not fit
    // without recompute. NVIDIA's tuned MoE configurations recompute modules, not blocks
    // (NeMo 2.5.0's DeepSeek-V3 recipe: `mla_up_proj` and `layernorm`): the case takes the
    // fastest module set Megatron-Core accepts that fits, faster than the fewest blocks that
    // fit. A run before Megatron-Core 0.12 (NeMo 24.07's container, or a source of 2024) had
    // no `--recompute-modules`, and recomputes blocks.
    use autoplan_plan::Recompute;
    let (r, c, step) = at_twice_the_sequence("bridge2509_h100_DeepSeekV3_1024gpu_not");
    assert_eq!(c.plan.recompute, Recompute::Selective);
    assert!(c
        .chosen
        .as_deref()
        .is_some_and(|w| w.contains("module sets")));
    let (by_module, blocks) = (
        step(Recompute::Selective, None).unwrap(),
        step(Recompute::Full, Some(1)).unwrap(),
    );
    assert!(by_module < blocks, "{by_module} vs {blocks}");
    for older in [
        r.source
            .replace("25.09 NeMo container", "24.07 NeMo container"),
        format!("{} (Aug 2024)", r.source),
    ] {
        let o = PublishedRun {
            source: older.clone(),
            ..r.clone()
        };
        let c = common::case(&o).expect(&older);
        assert_eq!(c.plan.recompute, Recompute::Full, "{older}");
    }
}

#[test]
fn the_two_published_qwen3_235b_plans_rank_as_measured() {
    // Megatron-MoE-ModelZoo's Qwen3-235B-A22B on 256 H100: cross-node EP 32 with DeepEP ran at
    // 1663 tokens/s/GPU, intra-node TP 4 × EP 8 × PP 8 at 1130. The model must order them the
    // same way (16 local experts' GEMMs of 512 tokens, each launched, DeepEP's
    // node-deduplicated network traffic), and both rows stay scored, not set aside.
    let v = run();
    let get = |id: &str| {
        v.rows
            .iter()
            .find(|r| r.id == id)
            .unwrap_or_else(|| panic!("{id} not scored"))
            .predicted
    };
    let xnode = get("mzoo_h100_Qwen3_235B_a22B_xnode_ep32");
    let intra = get("mzoo_h100_Qwen3_235B_a22B_intranode_tp4_ep8_pp8");
    assert!(xnode > intra, "{xnode} vs {intra}");
}

#[test]
fn rows_set_aside_are_few_and_named() {
    // The FP8 fine-grained MoE row and torchtitan's context-parallel row (OUT_OF_DOMAIN).
    let v = run();
    assert!(v.outliers.len() <= 2, "{:?}", v.outliers);
    for o in &v.outliers {
        assert!(!o.reason.is_empty());
    }
}

#[test]
fn the_fit_at_the_table_constants_scores_the_rows_validate_scores() {
    // `validate --fit` must leave out what `validate` leaves out (set-aside rows), or one
    // unrunnable row makes every grid point infinitely wrong, and the rows whose recompute the
    // model chose (the row gives none and its plan does not fit without). At the ARCH_TABLE
    // point it reproduces validate's other rows and their MAPE.
    use autoplan_cluster::GpuArch;
    use autoplan_evaluate::validate::{case_of, fit};
    let runs = runs();
    let cases: Vec<_> = runs
        .iter()
        .filter_map(|r| case_of(r, &|n| autoplan_graph::resolve_model(n).ok(), &cluster_for).ok())
        .collect();
    let v = run();
    let chosen: Vec<&str> = cases
        .iter()
        .filter(|c| !autoplan_evaluate::validate::recompute_known(c))
        .map(|c| c.id.as_str())
        .collect();
    let names_unpriced = |name: &str| {
        autoplan_plan::framework::CostProfile::named(name)
            .is_some_and(|p| !p.not_modelled.is_empty())
    };
    let mut total = 0;
    for arch in [GpuArch::V100, GpuArch::A100, GpuArch::H100] {
        let e = *autoplan_cost::compute::arch_efficiency(arch);
        let p = &fit(
            &cases,
            arch,
            &[e.gemm_eff_max],
            &[e.gemm_latency],
            &[e.hbm_eff_max],
        )[0]
        .score;
        assert!(p.mape.is_finite(), "{arch:?}: {p:?}");
        // `validate`'s rows of the architecture are the same scoring, less the rows whose
        // recompute the model chose and those of a profile naming what it does not price
        // (scored, not fitted on: `fitted_on`).
        let errors: Vec<f64> = v
            .rows
            .iter()
            .filter(|r| {
                r.gpu_arch == arch
                    && !chosen.contains(&r.id.as_str())
                    && !names_unpriced(r.framework)
            })
            .map(|r| r.error.abs())
            .collect();
        let mape = errors.iter().sum::<f64>() / errors.len() as f64;
        assert_eq!(errors.len(), p.rows, "{arch:?}");
        assert!(
            (mape - p.mape).abs() <= 1e-12,
            "{arch:?}: {} vs {}",
            mape,
            p.mape
        );
        total += p.rows;
    }
    let unpriced: Vec<&str> = v
        .rows
        .iter()
        .filter(|r| names_unpriced(r.framework))
        .map(|r| r.id.as_str())
        .collect();
    assert_eq!(total + chosen.len() + unpriced.len(), v.rows.len());
    assert_eq!(chosen.len(), 2, "{chosen:?}");
    assert_eq!(unpriced, ["tt_8b_cp1_seq32k"]);
    assert_eq!(v.by_gpu.len(), 3);
}

#[test]
fn nemo_model_flops_per_token_match_the_rows() {
    // NeMo 24.07 publishes both model TFLOP/s and tokens/s per GPU: their ratio is the model
    // FLOPs per token under Megatron's formula (full s×s attention scores: 3·(G + 2·A) with A
    // our causal count, `AttentionFlops::Full`), the convention `validate` scores these rows in. The NeMo-named models (GPT3-5B/20B, Nemotron-8B/22B/340B), whose
    // architecture the table does not give, are checked against it, and so is every other
    // model of the table.
    let mut checked = Vec::new();
    for r in runs().iter().filter(|r| r.id.starts_with("nemo2407")) {
        let (Some(tf), Some(tok)) = (r.measured_tflops_per_gpu, r.measured_tokens_per_s_per_gpu)
        else {
            continue;
        };
        let Ok(case) = autoplan_evaluate::validate::case_of(
            r,
            &|n| autoplan_graph::resolve_model(n).ok(),
            &cluster_for,
        ) else {
            panic!("{}: no case", r.id)
        };
        let ours = autoplan_evaluate::ModelFlops::of(&case.model)
            .model_per_token(autoplan_evaluate::AttentionFlops::Full);
        let theirs = tf * 1e12 / tok;
        let err = ours / theirs - 1.0;
        checked.push(format!(
            "{}: {:.2} vs {:.2} GFLOP ({:+.2}%)",
            r.id,
            ours / 1e9,
            theirs / 1e9,
            100.0 * err
        ));
        assert!(err.abs() <= 0.002, "{checked:#?}");
    }
    println!("{checked:#?}");
    assert_eq!(checked.len(), 12, "{checked:#?}");
}

#[test]
fn a_blank_micro_batch_of_megatron_lm_2021_22_reads_as_the_tuned_one() {
    // The 2021–22 Megatron-LM rows all state their micro-batch (Narayanan+21 Table 1, 16 at
    // pp 1 down to 1 at pp ≥ 16; Korthikanti+22). Blanked, each is read as the fastest
    // micro-batch dividing its local batch that the plan fits with, and the rows stay scored
    // and as close as with the stated one: the local batch as one micro-batch (Megatron v1's
    // reading) left 13 of these 18 rows out of memory or with a pipeline of one micro-batch.
    use autoplan_evaluate::validate::case_of;
    use autoplan_evaluate::Evaluator;
    let stated: Vec<PublishedRun> = runs()
        .into_iter()
        .filter(|r| {
            (r.id.starts_with("nar21") || r.id.starts_with("kor22")) && r.global_batch.is_some()
        })
        .collect();
    assert_eq!(stated.len(), 18);
    let blank: Vec<PublishedRun> = stated
        .iter()
        .map(|r| PublishedRun {
            micro_batch: None,
            ..r.clone()
        })
        .collect();
    let resolve = |n: &str| autoplan_graph::resolve_model(n).ok();
    let (v, w) = (
        validate(&stated, &resolve, &cluster_for),
        validate(&blank, &resolve, &cluster_for),
    );
    assert_eq!(w.rows.len(), 18, "{:?}", w.skipped);
    for (r, b) in stated.iter().zip(&blank) {
        let c = case_of(b, &resolve, &cluster_for).expect(&r.id);
        let local = c.model.training.global_batch / c.plan.dp;
        assert!(local.is_multiple_of(c.plan.mbs), "{}", r.id);
        assert!(
            c.chosen
                .as_deref()
                .is_some_and(|w| w.contains("micro-batch")),
            "{}",
            r.id
        );
        // No other divisor the model admits is faster.
        let ev = Evaluator::new(&c.model, &c.cluster, c.options);
        let t = ev.evaluate(&c.plan).expect(&r.id).step_time_s;
        for m in (1..=local).filter(|m| local.is_multiple_of(*m)) {
            let p = autoplan_plan::Plan { mbs: m, ..c.plan };
            if let Ok(x) = ev.evaluate(&p) {
                assert!(x.step_time_s >= t, "{}: mbs {m} is faster", r.id);
            }
        }
        let err = |v: &autoplan_evaluate::validate::Validation| {
            v.rows.iter().find(|x| x.id == r.id).expect(&r.id).error
        };
        assert!(
            (err(&w) - err(&v)).abs() <= 0.05,
            "{}: {:+.3} blank vs {:+.3} stated",
            r.id,
            err(&w),
            err(&v)
        );
    }
    assert!(w.mape <= v.mape + 0.01, "{} vs {}", w.mape, v.mape);
    // Megatron v1 (2020) ran each replica's local batch whole: its rows keep that reading.
    let v1 = runs()
        .into_iter()
        .find(|r| r.id == "meg20_dgxa100_dp128_1B")
        .unwrap();
    assert_eq!(v1.micro_batch, None);
    let c = case_of(&v1, &resolve, &cluster_for).unwrap();
    assert_eq!(c.plan.mbs, c.model.training.global_batch / c.plan.dp);
}
