//! Framework cost profiles (issue 17 item 4): which profile each published row runs under (a
//! rule on its source), each mechanism's direction (a profile that overlaps or fuses less is
//! never faster for the same plan), and the MAPE of both published files pinned (item 6), so
//! a regression of a profile, of the model or of the calibration fails here.

mod common;

use autoplan_evaluate::validate::{row_profile, validate, Validation};
use autoplan_evaluate::{unfused_elementwise_bytes, Elementwise, EvalOptions, Evaluator};
use autoplan_graph::LayerKind;
use autoplan_plan::framework::CostProfile;
use autoplan_plan::{Framework, Plan, Recompute, Schedule, Zero};
use common::{case, cluster_for, row, rows};

fn run(file: &str) -> Validation {
    validate(
        &rows(file),
        &|n| autoplan_graph::resolve_model(n).ok(),
        &cluster_for,
    )
}

/// GPT-3 175B with a global batch of 64 on `gpus` of Selene's A100s: the profile tests' case.
fn gpt3_on_selene(gpus: u32) -> (autoplan_graph::ModelSpec, autoplan_cluster::Cluster) {
    let mut model = autoplan_graph::resolve_model("gpt3-175b").expect("bundled");
    model.training.global_batch = 64;
    let cluster = autoplan_cluster::resolve_cluster("selene-a100")
        .unwrap()
        .with_gpus(gpus)
        .unwrap();
    (model, cluster)
}

fn profile_of(id: &str) -> CostProfile {
    row_profile(&row(id))
}

#[test]
fn each_row_runs_under_the_profile_of_its_source() {
    let cases = [
        ("meg20_dgxa100_mp_8B", CostProfile::MEGATRON_LM_2020),
        ("nar21_t1_530B", CostProfile::MEGATRON_LM_2021),
        ("kor22_175B_sp_selective", CostProfile::MEGATRON_LM_2022),
        ("nemo2407_h100_LLAMA3-8B_8gpu", CostProfile::MEGATRON_CORE),
        ("mlperf31_nvidia_gpt3_512xH100", CostProfile::MEGATRON_CORE),
        // MegaScale's Table 2: its plain Megatron-LM baseline, and MegaScale itself.
        (
            "megascale_175b_megatron_768gpu_bs768",
            CostProfile::MEGATRON_LM_2023,
        ),
        (
            "megascale_175b_megascale_768gpu_bs768",
            CostProfile::MEGATRON_CORE,
        ),
        ("bloom_176b_384xA100", CostProfile::MEGATRON_DEEPSPEED_2022),
        ("mtnlg_530b_2240gpu", CostProfile::MEGATRON_DEEPSPEED_2022),
        ("gptneox_20b_96xA100", CostProfile::MEGATRON_DEEPSPEED_2022),
        ("mpt_7b_512xh100", CostProfile::LLM_FOUNDRY),
        ("tt_8b_cp1_seq32k", CostProfile::TORCHTITAN),
        // torchtitan without compile ("no torch.compile"; "FSDP only." in bf16), and its
        // Float8 / async-TP rows, which run compiled.
        ("tt_8b_fsdp8_eager", CostProfile::TORCHTITAN_EAGER),
        ("tt_8b_fsdp128_eager", CostProfile::TORCHTITAN_EAGER),
        ("tt_8b_fsdp128_compile_fp8", CostProfile::TORCHTITAN),
        ("tt_70b_2d_asynctp", CostProfile::TORCHTITAN),
    ];
    for (id, want) in cases {
        assert_eq!(profile_of(id).name, want.name, "{id}");
    }
    // A row of the same papers under another id (their runs at other scales) is read by the
    // paper its source cites, not by the id's prefix.
    let mut other = rows("published_runs.csv")
        .into_iter()
        .find(|r| r.id == "nar21_t1_1T")
        .unwrap();
    for (id, source, want) in [
        (
            "x_1",
            "Narayanan+21 SC21 Figure 5",
            CostProfile::MEGATRON_LM_2021,
        ),
        (
            "x_2",
            "Korthikanti+22 Table 4",
            CostProfile::MEGATRON_LM_2022,
        ),
        ("x_3", "Shoeybi+19 Table 1", CostProfile::MEGATRON_LM_2020),
        (
            "x_4",
            "NVIDIA NeMo performance summary",
            CostProfile::MEGATRON_CORE,
        ),
        // Another stack's run from before FlashAttention and Transformer Engine (2022 or
        // earlier) ran the Megatron-LM of its time; a later one, Megatron-Core's defaults.
        (
            "x_5",
            "Zhang+22 OPT (metaseq logbook)",
            CostProfile::MEGATRON_LM_2021,
        ),
        (
            "x_6",
            "Zeng et al., GLM-130B, arXiv 2210.02414 (Oct 2022)",
            CostProfile::MEGATRON_LM_2021,
        ),
        ("x_7", "Touvron+23 LLaMA §2.4", CostProfile::MEGATRON_CORE),
    ] {
        other.id = id.to_string();
        other.source = source.to_string();
        assert_eq!(row_profile(&other).name, want.name, "{source}");
    }
    // A stack named in the notes, not the source (a paper or blog citing the run), is read
    // the same: llm-foundry, torchtitan (eager unless the notes name compile).
    for (notes, want) in [
        (
            "MPT-30B trained with MosaicML llm-foundry, FSDP FULL_SHARD",
            CostProfile::LLM_FOUNDRY,
        ),
        (
            "pytorch/torchtitan, FSDP2 eager",
            CostProfile::TORCHTITAN_EAGER,
        ),
        ("torchtitan FSDP2 + torch.compile", CostProfile::TORCHTITAN),
    ] {
        other.id = "x_8".into();
        other.source = "Some+25 scaling study".into();
        other.notes = Some(notes.into());
        assert_eq!(row_profile(&other).name, want.name, "{notes}");
    }
    other.notes = None;
    // A V100 runs no FlashAttention kernel (sm80 and newer), whatever the source's date.
    other.source = "a 2024 cluster report".into();
    other.gpu = "Tesla V100-SXM2-32GB".into();
    assert_eq!(row_profile(&other).name, CostProfile::MEGATRON_LM_2021.name);
}

/// A DeepSpeed row is the 2021–22 Megatron-DeepSpeed fork (unfused attention, its fitted
/// unpriced compute) unless it names FlashAttention (opt-in there, whatever the date): then it
/// ran the fused kernel under DeepSpeed's engine rules, einsum MoE dispatch unless dated 2026 or
/// later. Its blank `sp` is off (an opt-in flag), its blank recompute full, its blank sharding
/// ZeRO-1.
#[test]
fn a_deepspeed_row_is_read_by_the_attention_it_names() {
    let mut r = rows("published_runs_2.csv")
        .into_iter()
        .find(|r| r.id == "bloom_176b_384xA100")
        .unwrap();
    assert_eq!(
        row_profile(&r).name,
        CostProfile::MEGATRON_DEEPSPEED_2022.name
    );
    for (source, notes, want) in [
        (
            "Smith+22 MT-NLG, DeepSpeed",
            "",
            CostProfile::MEGATRON_DEEPSPEED_2022,
        ),
        (
            "a DeepSpeed blog, 2021",
            "",
            CostProfile::MEGATRON_DEEPSPEED_2022,
        ),
        (
            "Jacobs+23 DeepSpeed-Ulysses",
            "",
            CostProfile::MEGATRON_DEEPSPEED_2022,
        ),
        (
            "Jacobs+23 DeepSpeed-Ulysses",
            "FlashAttention v2",
            CostProfile::DEEPSPEED_MOE_2023,
        ),
        (
            "Megatron-DeepSpeed examples",
            "--use-flash-attn-v2 (FlashAttention-2)",
            CostProfile::DEEPSPEED_MOE_2023,
        ),
        (
            "DeepSpeed benchmark (2026)",
            "flash_attn",
            CostProfile::DEEPSPEED,
        ),
    ] {
        r.source = source.into();
        r.notes = Some(notes.into());
        assert_eq!(row_profile(&r).name, want.name, "{source} / {notes}");
    }
    // BLOOM with FlashAttention and its plan cells blanked: its era's defaults, not
    // Megatron-Core's.
    r.source = "Megatron-DeepSpeed, 2023".into();
    r.notes = Some("--use-flash-attn".into());
    r.sp = None;
    r.recompute = None;
    r.zero_stage = None;
    let c = case(&r).unwrap();
    assert_eq!(c.framework, CostProfile::DEEPSPEED_MOE_2023.name);
    assert!(c.plan.tp > 1 && !c.plan.sp, "{}", c.plan);
    assert_eq!(c.plan.recompute, autoplan_plan::Recompute::Full);
    assert_eq!(c.plan.zero, autoplan_plan::Zero::stage(1));
    assert_eq!(
        c.options.attention,
        autoplan_evaluate::AttentionKernel::FlashAttention2,
        "a FlashAttention run ran the flash-attn package's fused kernel"
    );
}

#[test]
fn a_source_is_dated_by_the_latest_year_it_names() {
    use autoplan_evaluate::validate::source_year;
    for (source, want) in [
        ("Narayanan+21 SC21 Table 1", Some(2021)),
        ("NVIDIA/Megatron-LM README @5281919 (Sep 2020)", Some(2020)),
        ("Dubey+24 'The Llama 3 Herd of Models' Table 4", Some(2024)),
        (
            "Megatron-LM moe/README.md @0b981f9 (Aug 2024), after Korthikanti+22",
            Some(2024),
        ),
        ("Jiang+24 MegaScale (NSDI'24) Table 1", Some(2024)),
        // Not years: a commit hash's digits, a count, an arXiv id, a sum without a name.
        (
            "NeMo performance_summary.md @9c5c5e97 (24.07 container, 1024 GPUs)",
            None,
        ),
        ("arXiv 2205.01068, 3+22 rows", None),
        ("", None),
    ] {
        assert_eq!(source_year(source), want, "{source}");
    }
}

#[test]
fn the_profile_reaches_the_rows_plan_and_options() {
    let mut all = rows("published_runs_2.csv");
    all.retain(|r| r.id == "megascale_175b_megatron_768gpu_bs768" || r.id == "mtnlg_530b_2240gpu");
    for r in &all {
        let c = case(r).unwrap_or_else(|s| panic!("{}: {}", r.id, s.reason));
        assert!(!c.plan.tp_overlap, "{}", r.id);
        assert!(!c.options.dp_overlap, "{}", r.id);
        assert_eq!(
            c.options.attention,
            autoplan_evaluate::AttentionKernel::Unfused
        );
    }
    // MT-NLG's blank recompute is Megatron-DeepSpeed's full recompute (its TFLOP/s reproduce
    // only with the recompute-inclusive formula).
    let mt = all.iter().find(|r| r.id == "mtnlg_530b_2240gpu").unwrap();
    let c = case(mt).unwrap();
    assert_eq!(c.plan.recompute, Recompute::Full);
}

/// Plans over TP, PP, DP and the sharding stages on a 175B GPT (dense, 64 A100s).
fn plans() -> Vec<Plan> {
    let mut out = Vec::new();
    for (tp, pp) in [(1, 8), (2, 4), (4, 4), (8, 2), (8, 8)] {
        for zero in [Zero::NONE, Zero::stage(1), Zero::stage(2), Zero::stage(3)] {
            for recompute in [Recompute::None, Recompute::Full] {
                out.push(Plan {
                    tp,
                    pp,
                    dp: 64 / (tp * pp),
                    sp: tp > 1,
                    zero,
                    recompute,
                    schedule: Schedule::OneF1B,
                    ..Plan::default()
                });
            }
        }
    }
    out
}

#[test]
fn a_profile_that_overlaps_or_fuses_less_is_never_faster() {
    let (model, cluster) = gpt3_on_selene(64);
    let step = |p: &CostProfile, plan: &Plan| {
        let opts = EvalOptions::default().with_profile(p, model.training.precision);
        let plan = Plan {
            tp_overlap: p.tp_comm_overlap,
            ..*plan
        };
        Evaluator::new(&model, &cluster, opts)
            .evaluate(&plan)
            .map(|m| m.step_time_s)
    };
    let mut compared = 0;
    for plan in plans() {
        let Ok(core) = step(&CostProfile::MEGATRON_CORE, &plan) else {
            continue;
        };
        for p in CostProfile::ALL {
            // A profile without an overlap or fusion of Megatron-Core's is slower or as fast.
            if let Ok(t) = step(&p, &plan) {
                assert!(
                    t >= core * (1.0 - 1e-9),
                    "{} faster than megatron-core on {plan}",
                    p.name
                );
                compared += 1;
            }
        }
        // Each mechanism alone: no DP overlap, no TP overlap, unfused attention.
        let mut one = CostProfile::MEGATRON_CORE;
        one.dp_overlap = false;
        assert!(
            step(&one, &plan).unwrap() >= core * (1.0 - 1e-9),
            "dp overlap, {plan}"
        );
        let mut one = CostProfile::MEGATRON_CORE;
        one.tp_comm_overlap = false;
        assert!(
            step(&one, &plan).unwrap() >= core * (1.0 - 1e-9),
            "tp overlap, {plan}"
        );
        let mut one = CostProfile::MEGATRON_CORE;
        one.zero_grad_all_reduce = true;
        assert!(
            step(&one, &plan).unwrap() >= core * (1.0 - 1e-9),
            "all-reduce, {plan}"
        );
        // GPT-3 has dropout: eager dropout before the residual add is strictly slower.
        let mut one = CostProfile::MEGATRON_CORE;
        one.elementwise = Elementwise::EAGER;
        assert!(
            step(&one, &plan).unwrap() > core * (1.0 + 1e-6),
            "eager elementwise, {plan}"
        );
    }
    assert!(compared > 40, "only {compared} plans ran");
}

#[test]
fn the_dp_overlap_matters_where_the_reduction_is_large() {
    // 175B on 256 A100s with dp 8 under ZeRO-1: the reduction is seconds; after the backward
    // it is exposed, during it mostly hidden.
    let (model, cluster) = gpt3_on_selene(256);
    let plan = Plan {
        tp: 8,
        pp: 4,
        dp: 8,
        sp: true,
        zero: Zero::stage(1),
        recompute: Recompute::Full,
        ..Plan::default()
    };
    let t = |p: &CostProfile| {
        Evaluator::new(
            &model,
            &cluster,
            EvalOptions::default().with_profile(p, model.training.precision),
        )
        .evaluate(&plan)
        .unwrap()
        .step_time_s
    };
    assert!(t(&CostProfile::MEGATRON_DEEPSPEED_2022) > 1.01 * t(&CostProfile::MEGATRON_CORE));
    // DeepSpeed's bucketed all-reduce moves twice a reduce-scatter's bytes: exposed after the
    // backward, it costs more.
    let rs = CostProfile {
        zero_grad_all_reduce: false,
        ..CostProfile::DEEPSPEED
    };
    assert!(t(&CostProfile::DEEPSPEED) > t(&rs));
}

#[test]
fn frameworks_map_to_their_profiles() {
    assert_eq!(Framework::default().profile(), CostProfile::MEGATRON_CORE);
    assert_eq!(Framework::DeepSpeed.profile(), CostProfile::DEEPSPEED);
    assert_eq!(Framework::TorchTitan.profile(), CostProfile::TORCHTITAN);
    for p in CostProfile::ALL {
        assert_eq!(CostProfile::named(p.name), Some(p));
        assert!(!p.source.is_empty(), "{}: no source", p.name);
    }
}

/// The figures of docs/validation.md pinned with a margin: a change that makes either file
/// worse beyond it fails (tighten the bounds when the model improves).
#[test]
fn the_published_files_mape_is_pinned() {
    let one = run("published_runs.csv");
    let two = run("published_runs_2.csv");
    // Both files as one set (issue 17: at most 6%).
    let mut all = rows("published_runs.csv");
    all.extend(rows("published_runs_2.csv"));
    let both = validate(
        &all,
        &|n| autoplan_graph::resolve_model(n).ok(),
        &cluster_for,
    );
    for (name, v, min_rows, bound) in [
        ("file 1", &one, 54, 0.042),
        ("file 2", &two, 29, 0.073),
        ("both files", &both, 87, 0.052),
    ] {
        let (n, mape) = (v.rows.len(), 100.0 * v.mape);
        println!("{name}: {n} rows, MAPE {mape:.3}%");
        assert!(
            n >= min_rows && v.mape <= bound,
            "{name}: {n} rows, MAPE {mape:.3}%"
        );
    }
    // Per profile on the second file: MegaScale's Megatron-LM baseline within 12.5% each, the
    // profile's MAPE under 7% (it was 28% as Megatron-Core). With the asynchronous input-grad
    // reduce-scatter of its 2023 code (`tp_bwd_async`) the rows came 3.1 points faster (10%
    // and 6% held before); what they miss grows with the DP degree (measured − modelled step:
    // −0.6 s at dp 4, +1.0 at 12, +1.5 at 48, +1.3 at 128, the 8192-GPU row +12.0%), the
    // un-overlapped gradient reduction over a 3-tier CLOS at scale (docs/validation.md).
    let base: Vec<_> = two
        .rows
        .iter()
        .filter(|r| r.framework == "megatron-lm-2023")
        .collect();
    assert_eq!(base.len(), 4);
    for r in &base {
        assert!(r.error.abs() <= 0.125, "{} {:+.1}%", r.id, 100.0 * r.error);
    }
    let g = two
        .by_framework
        .iter()
        .find(|g| g.name == "megatron-lm-2023")
        .unwrap();
    assert!(
        g.mape <= 0.07,
        "megatron-lm-2023 MAPE {:.1}%",
        100.0 * g.mape
    );
}

/// The NVL72 rows (issue 17): EP groups of 64 inside one rack (`Cluster::job_domain_gpus`)
/// bring GB200's Qwen3-235B and DeepSeek-V3 rows from -52% and -44% to within 15%, and the
/// GB300 twin stays within 10%. The DeepSeek-V3 guide's unoptimised baseline stays
/// over-predicted (docs/validation.md names what it lacks); pinned so it cannot drift further.
#[test]
fn nvl72_rows_are_pinned() {
    let two = run("published_runs_2.csv");
    let err = |id: &str| {
        two.rows
            .iter()
            .find(|r| r.id == id)
            .unwrap_or_else(|| panic!("{id} not scored"))
            .error
    };
    for (id, bound) in [
        ("mzoo_gb200_mxfp8_qwen3_235b", 0.15),
        ("bridge2511_gb200_DeepSeekV3_256gpu_bf16", 0.15),
        ("mzoo_gb300_mxfp8_qwen3_235b", 0.10),
    ] {
        let e = err(id);
        assert!(e.abs() <= bound, "{id} {:+.1}%", 100.0 * e);
    }
    let e = err("dsv3_gb200_guide_baseline");
    assert!(
        (0.0..=0.70).contains(&e),
        "guide baseline {:+.1}%",
        100.0 * e
    );
}

/// The bytes per token eager kernels add to one block's layers, by hand from the shapes
/// (the per-op counts of `elementwise.rs`'s table: RMSNorm +32 B per element forward, +64
/// backward; RoPE +16 each way over Q and K; the gated activation +4 and +8 over the inner
/// width; dropout before the residual add +4 forward over `h`).
#[test]
fn unfused_bytes_per_token_match_a_hand_count() {
    let bytes = |model: &str, kind, e: &Elementwise| {
        let m = autoplan_graph::resolve_model(model).expect("bundled");
        let u = unfused_elementwise_bytes(&m, kind, e);
        (u.hidden, u.sharded)
    };
    // Llama-3-8B: h 4096, 32 query and 8 key/value heads of 128, SwiGLU 14336, RMSNorm, RoPE,
    // no dropout; eager torchtitan.
    let e = &CostProfile::TORCHTITAN_EAGER.elementwise;
    let (h, f) = (4096.0, 14336.0);
    assert_eq!(
        bytes("llama3-8b", LayerKind::Attention, e),
        (
            [32.0 * h, 64.0 * h],
            [16.0 * 40.0 * 128.0, 16.0 * 40.0 * 128.0]
        )
    );
    assert_eq!(
        bytes("llama3-8b", LayerKind::DenseMlp, e),
        ([32.0 * h, 64.0 * h], [4.0 * f, 8.0 * f])
    );
    assert_eq!(
        bytes("llama3-8b", LayerKind::LmHead, e),
        ([0.0; 2], [0.0; 2])
    );
    // 81920 + 131072 B forward on the attention layer: the hand figure in bytes.
    assert_eq!(16.0 * 40.0 * 128.0 + 32.0 * h, 212_992.0);
    // GPT-3 175B (h 12288, dropout) under llm-foundry: dropout's own kernel, forward only;
    // LayerNorm, GELU and learned positions add nothing.
    let lf = &CostProfile::LLM_FOUNDRY.elementwise;
    for kind in [LayerKind::Attention, LayerKind::DenseMlp] {
        assert_eq!(
            bytes("gpt3-175b", kind, lf),
            ([4.0 * 12288.0, 0.0], [0.0, 0.0]),
            "{kind:?}"
        );
    }
    // MPT-7B (LayerNorm, ungated GELU, ALiBi, no dropout) runs nothing eager beyond the fused
    // kernels: llm-foundry's rows are priced as before.
    for kind in [LayerKind::Attention, LayerKind::DenseMlp] {
        assert_eq!(bytes("mpt-7b", kind, lf), ([0.0; 2], [0.0; 2]), "{kind:?}");
    }
    // Every fused profile adds nothing anywhere.
    for p in CostProfile::ALL.iter().filter(|p| p.elementwise.is_fused()) {
        for kind in [LayerKind::Attention, LayerKind::DenseMlp, LayerKind::Moe] {
            assert_eq!(
                bytes("qwen3-30b-a3b", kind, &p.elementwise),
                ([0.0; 2], [0.0; 2]),
                "{}",
                p.name
            );
        }
    }
}

/// The llm-foundry rows (data/published_runs_2.csv) pinned within a band around today's
/// errors: MPT's block runs no elementwise kernel beyond the fused ones, so the eager
/// mechanism left them where they were (+30.6%, +12.2%, +9.8%); the profile's fitted
/// `unpriced_compute` (0.12) brings them to +16.6%, +0.1%, -1.9%. A change that moves them
/// beyond the band fails here.
#[test]
fn llm_foundry_rows_are_pinned() {
    let two = run("published_runs_2.csv");
    for (id, lo, hi) in [
        ("mpt_7b_512xh100", 0.12, 0.21),
        ("mpt_70b_512xh100", -0.04, 0.05),
        ("mpt_70b_64xa100", -0.06, 0.03),
    ] {
        let r = two
            .rows
            .iter()
            .find(|r| r.id == id)
            .unwrap_or_else(|| panic!("{id} not scored"));
        assert_eq!(r.framework, "llm-foundry", "{id}");
        assert!(
            (lo..=hi).contains(&r.error),
            "{id} {:+.1}% outside [{:+.0}%, {:+.0}%]",
            100.0 * r.error,
            100.0 * lo,
            100.0 * hi
        );
    }
}

/// The framework cases `validate --fit-framework` scores: the rows of both files with their
/// own plan.
fn own_plan_cases() -> Vec<autoplan_evaluate::validate::Case> {
    let mut all = rows("published_runs.csv");
    all.extend(rows("published_runs_2.csv"));
    all.iter()
        .filter(|r| {
            autoplan_evaluate::runs::missing_fact(r).is_none()
                && autoplan_evaluate::runs::degrees_given(r)
        })
        .filter_map(|r| case(r).ok())
        .collect()
}

/// A profile's one constant is what `validate --fit-framework` fits on its rows (the
/// minimum-MAPE point of its grid, the GPU constants fixed): `unpriced_compute` for a profile
/// naming what it misses; for one naming nothing (its rows calibrate the GPU) none of that, and
/// at most the host time per expert GEMM of its dropless MoE layers (`expert_gemm_host`). A
/// profile whose constant is fitted does better on each row left out of the fit than without it.
#[test]
fn each_profile_constant_is_its_fit() {
    use autoplan_evaluate::validate::{fit_framework, FrameworkConstant};
    let cases = own_plan_cases();
    for p in CostProfile::ALL {
        let constant = FrameworkConstant::of(&p);
        if p.not_modelled.is_empty() {
            assert_eq!(p.unpriced_compute, 0.0, "{}", p.name);
            assert_eq!(constant, FrameworkConstant::ExpertGemmHost);
        } else {
            assert_eq!(p.expert_gemm_host, 0.0, "{}", p.name);
        }
        let value = constant.value(&p);
        let (points, loo) = fit_framework(&cases, p.name, constant, &constant.grid());
        let best = &points[0];
        if best.score.rows < autoplan_evaluate::validate::MIN_FIT_ROWS {
            // Too few published rows run under it to fit and test a constant: nothing carried.
            assert_eq!(value, 0.0, "{}", p.name);
            continue;
        }
        if value == 0.0 {
            // Carried as 0: the fit must not want more (a profile whose rows no value moves
            // takes the grid's first point).
            assert_eq!(best.value, 0.0, "{}: fitted {:e}", p.name, best.value);
            continue;
        }
        assert!(
            (best.value - value).abs() < 1e-12,
            "{}: fitted {:e}, carries {:e}",
            p.name,
            best.value,
            value
        );
        // Out of sample: each row at the value fitted on the others, against 0.
        let (at_zero, _) = fit_framework(&cases, p.name, constant, &[0.0]);
        let loo_mape = loo.iter().map(|(_, e)| e.abs()).sum::<f64>() / loo.len() as f64;
        assert!(loo.len() >= 3, "{}: {} rows", p.name, loo.len());
        assert!(
            loo_mape < at_zero[0].score.mape,
            "{}: leave-one-out MAPE {:.1}% not below {:.1}% without the constant",
            p.name,
            100.0 * loo_mape,
            100.0 * at_zero[0].score.mape
        );
    }
}

/// `unpriced_compute` scales every class's compute and nothing else: the step's compute
/// (with its recompute) grows by the factor, the communication terms stay.
#[test]
fn unpriced_compute_scales_the_compute_alone() {
    let (model, cluster) = gpt3_on_selene(64);
    let plan = Plan {
        tp: 8,
        pp: 8,
        dp: 1,
        recompute: Recompute::Full,
        ..Plan::default()
    };
    let at = |u: f64| {
        let opts = EvalOptions {
            unpriced_compute: u,
            ..EvalOptions::default().with_profile(
                &CostProfile::MEGATRON_DEEPSPEED_2022,
                model.training.precision,
            )
        };
        Evaluator::new(&model, &cluster, opts)
            .report(&plan)
            .unwrap()
    };
    let (a, b) = (at(0.0), at(0.25));
    let compute = |r: &autoplan_evaluate::Report| r.breakdown.compute_s + r.breakdown.recompute_s;
    assert!(
        (compute(&b) / compute(&a) - 1.25).abs() < 1e-9,
        "{} vs {}",
        compute(&b),
        compute(&a)
    );
    assert!(b.metrics.step_time_s > a.metrics.step_time_s);
    // The TP and PP communication are the same bytes on the same links.
    assert_eq!(a.breakdown.tp_exposed_s, b.breakdown.tp_exposed_s);
}

/// A torchtitan row without a micro-batch runs torchtitan's defaults (frameworks.md §2.1–2.2):
/// without pipelining the local batch, global / DP, is one forward (no gradient accumulation
/// by default); with pipelining `pipeline_parallel_microbatch_size`, 1. The eager profile
/// reads its blanks as torchtitan, not as Megatron-Core.
#[test]
fn a_torchtitan_row_without_a_micro_batch_runs_its_local_batch() {
    let mut all = rows("published_runs.csv");
    // These rows give no sequence length (skipped by validate); the plan does not depend on it.
    for r in &mut all {
        r.seq_len.get_or_insert(8192);
    }
    let mbs = |id: &str| {
        let r = all.iter().find(|r| r.id == id).expect(id);
        assert!(r.micro_batch.is_none(), "{id} gives its micro-batch");
        let c = case(r).unwrap_or_else(|s| panic!("{id}: {}", s.reason));
        (c.plan.mbs, c.plan.pp, c.plan.zero)
    };
    // Llama 3 70B, FSDP 32 × TP 8, global batch 512: local batch 16.
    assert_eq!(mbs("tt_70b_2d").0, 16);
    // Llama 3 8B eager, FSDP 8, global batch 16: local batch 2, fully sharded as the row says.
    let (m, _, zero) = mbs("tt_8b_fsdp8_eager");
    assert_eq!((m, zero), (2, Zero::stage(3)));
    // Llama 3.1 405B on PP 8: micro-batches of 1, and FSDP2 under PyTorch's pipelining, which
    // gathers the stage once and reduces it once per step: zero=1
    // (`ShardModes::pp_once_per_step`).
    let (m, _, zero) = mbs("tt_405b_3d_1f1b");
    assert_eq!((m, zero), (1, Zero::stage(1)));
    // Its interleaved twin names no depth: torchtitan's default, 2 stages per rank.
    let r = all
        .iter()
        .find(|r| r.id == "tt_405b_3d_interleaved1f1b")
        .unwrap();
    let c = case(r).unwrap();
    assert_eq!((c.plan.schedule, c.plan.vpp), (Schedule::Interleaved, 2));
    // A Megatron-Core row without one (GPT 7.1B, DP 48 × TP 2, global batch 192) keeps
    // Megatron-Core's 1.
    assert_eq!(mbs("mcore08_h100_weak_7.1B").0, 1);
}

/// torchtitan's `selective` checkpointing is whole blocks in full (frameworks.md §2.3): every
/// N-th block, N = 2 by default (`selective_ac_option`), or the N the cell names; its per-op
/// mode is not priced, and says so. Megatron's `selective` stays the attention core.
#[test]
fn torchtitan_selective_recomputes_every_nth_block() {
    let mut all = rows("published_runs.csv");
    for r in &mut all {
        r.seq_len.get_or_insert(8192);
    }
    let base = all
        .iter()
        .find(|r| r.id == "tt_8b_fsdp8_eager")
        .expect("row")
        .clone();
    let with = |cell: &str| {
        let mut r = base.clone();
        r.recompute = Some(cell.to_string());
        case(&r)
    };
    // Llama 3 8B: 32 blocks on one stage.
    let c = with("selective").expect("scored");
    assert_eq!(
        (c.plan.recompute, c.plan.recompute_layers),
        (Recompute::Full, Some(16))
    );
    let c = with("selective 4").expect("scored");
    assert_eq!(c.plan.recompute_layers, Some(8));
    // A blank cell is torchtitan's default mode, "selective" (frameworks.md §2.3), not "none".
    let mut blank = base.clone();
    blank.recompute = None;
    let c = case(&blank).expect("scored");
    assert_eq!(
        (c.plan.recompute, c.plan.recompute_layers),
        (Recompute::Full, Some(16))
    );
    assert!(
        c.recompute_stated,
        "a framework default, not the model's choice"
    );
    for cell in ["selective (op)", "per-op SAC", "SAC (per op)"] {
        let s = with(cell).expect_err("per-op SAC is not priced");
        assert_eq!(s.column.as_deref(), Some("recompute"));
        assert!(s.reason.contains("per-op"), "{cell}: {}", s.reason);
    }
    // The recomputed half costs half of full recompute's extra forward.
    let rc = |cell: &str| {
        let c = with(cell).expect("scored");
        autoplan_evaluate::Evaluator::new(&c.model, &c.cluster, c.options)
            .report(&c.plan)
            .expect("fits")
            .breakdown
            .recompute_s
    };
    let (half, full) = (rc("selective"), rc("full"));
    assert!(
        half > 0.0 && (half / full - 0.5).abs() < 0.01,
        "{half} {full}"
    );
    // A Megatron row's `selective` is Megatron's: no block recomputed in full.
    let mut mega = all
        .iter()
        .find(|r| r.id == "kor22_22B_sp_selective")
        .expect("row")
        .clone();
    mega.recompute = Some("selective".into());
    let c = case(&mega).unwrap();
    assert_eq!(
        (c.plan.recompute, c.plan.recompute_layers),
        (Recompute::Selective, None)
    );
}

/// A framework whose TP overlap is not credited (`tp_overlap_hides`: torchtitan's AsyncTP)
/// prices `tp_overlap` on as off, so a search gains nothing from turning it on; Megatron-Core's
/// tiled overlap hides some of the same plan's TP collectives.
#[test]
fn an_uncredited_tp_overlap_hides_nothing() {
    let (model, cluster) = gpt3_on_selene(64);
    let plan = Plan {
        tp: 8,
        sp: true,
        pp: 8,
        dp: 1,
        recompute: Recompute::Full,
        ..Plan::default()
    };
    let tp_exposed = |p: &CostProfile, tp_overlap: bool| {
        Evaluator::new(
            &model,
            &cluster,
            EvalOptions::default().with_profile(p, model.training.precision),
        )
        .report(&Plan { tp_overlap, ..plan })
        .unwrap()
        .breakdown
        .tp_exposed_s
    };
    let tt = CostProfile::TORCHTITAN;
    assert!(!tt.tp_overlap_hides);
    assert_eq!(tp_exposed(&tt, true), tp_exposed(&tt, false));
    let core = CostProfile::MEGATRON_CORE;
    assert!(tp_exposed(&core, true) < tp_exposed(&core, false));
}

/// The recompute, sharding and `sp` cells are read by what they say, never defaulted past: "yes",
/// activation checkpointing and Megatron's block count recompute (the count per model chunk);
/// "no"/"without …" do not; "DDP"/"none" shard nothing; a blank or "n/a" is the era's
/// default; wording none of the rules reads skips the row as an unreadable cell.
#[test]
fn recompute_sharding_and_sp_cells_are_read_or_refused() {
    let base = rows("published_runs.csv")
        .into_iter()
        .find(|r| r.id == "nemo2407_h100_LLAMA3-70B_64gpu")
        .expect("row");
    let with = |column: &str, cell: &str| {
        let mut r = base.clone();
        match column {
            "recompute" => r.recompute = Some(cell.to_string()),
            _ => r.zero_stage = Some(cell.to_string()),
        }
        case(&r)
    };
    // 80 blocks on pp 4 × vpp 5: chunks of 4.
    for (cell, want) in [
        ("yes", (Recompute::Full, None)),
        ("activation checkpointing", (Recompute::Full, None)),
        ("full (--checkpoint-activations)", (Recompute::Full, None)),
        ("full (uniform, 1 layer)", (Recompute::Full, None)),
        ("uniform, 1 layer", (Recompute::Full, None)),
        ("checkpoint every layer", (Recompute::Full, None)),
        ("gradient checkpoint", (Recompute::Full, None)),
        ("full (block, 2 layers)", (Recompute::Full, Some(2))),
        ("block 3", (Recompute::Full, Some(3))),
        ("selective (core_attn)", (Recompute::Selective, None)),
        // Megatron's module names alone; a label before the value.
        ("core_attn", (Recompute::Selective, None)),
        ("layernorm, moe_act", (Recompute::Selective, None)),
        ("AC: full", (Recompute::Full, None)),
        ("recompute: selective", (Recompute::Selective, None)),
        ("full (no offload)", (Recompute::Full, None)),
        ("no", (Recompute::None, None)),
        (
            "none (trained without activation checkpointing)",
            (Recompute::None, None),
        ),
        ("n/a", (Recompute::None, None)),
    ] {
        let c = with("recompute", cell).unwrap_or_else(|s| panic!("{cell}: {}", s.reason));
        assert_eq!((c.plan.recompute, c.plan.recompute_layers), want, "{cell}");
        assert_eq!(c.recompute_stated, cell != "n/a", "{cell}");
    }
    for cell in [
        "partial (some operators recomputed)",
        "block",
        "selective + cpu offload",
    ] {
        let s = with("recompute", cell).expect_err(cell);
        assert_eq!(s.column.as_deref(), Some("recompute"), "{cell}");
        assert!(s.reason.contains(&format!("`{cell}`")), "{}", s.reason);
    }
    for (cell, want) in [
        ("DDP", Zero::NONE),
        ("Megatron DDP", Zero::NONE),
        ("DP (no sharding)", Zero::NONE),
        ("dist-opt", Zero::stage(1)),
        ("none", Zero::NONE),
        ("distributed optimizer", Zero::stage(1)),
        ("", Zero::stage(1)),
        // A hybrid shard without a size shards within a node: tp 4 leaves 2 of the
        // dp·cp = 4 data-parallel ranks in each 8-GPU node.
        ("HSDP", Zero::stage(3).hsdp(2)),
        ("FSDP hybrid shard", Zero::stage(3).hsdp(2)),
        // A shard group holding every data-parallel rank is plain sharding.
        ("HSDP 4", Zero::stage(3)),
    ] {
        let c = with("zero_stage", cell).unwrap_or_else(|s| panic!("{cell}: {}", s.reason));
        assert_eq!(c.plan.zero, want, "{cell}");
    }
    let s = with("zero_stage", "DeepSpeed magic").expect_err("unreadable");
    assert_eq!(s.column.as_deref(), Some("zero_stage"));
    // The `sp` cell likewise (tp 4 here: the Megatron-Core default is on).
    for (cell, want) in [
        ("yes", true),
        ("SP on", true),
        ("no", false),
        ("n/a", true),
        ("", true),
    ] {
        let mut r = base.clone();
        r.sp = Some(cell.to_string());
        assert_eq!(case(&r).expect(cell).plan.sp, want, "{cell}");
    }
    let mut r = base.clone();
    r.sp = Some("Ulysses".into());
    let s = case(&r).expect_err("unreadable");
    assert_eq!(s.column.as_deref(), Some("sp"));
    assert!(s.reason.contains("`Ulysses`"), "{}", s.reason);
}

/// PyTorch's pipelining (torchtitan's) gathers an FSDP stage once and reduces it once per step,
/// after the schedule's last backward (`torch/distributed/pipelining/stage.py` @ torch 2.15.0):
/// one reduce-scatter and one all-gather per step, as Megatron's distributed optimizer, but
/// none of the reduction hidden behind the backward, where Megatron-Core overlaps it.
#[test]
fn pipelined_fsdp_reduces_once_after_the_step() {
    use autoplan_evaluate::CommKind;
    let (model, cluster) = gpt3_on_selene(256);
    let plan: Plan = "tp=8,sp=on,pp=4,dp=8,mbs=1,recompute=full,zero=1"
        .parse()
        .expect("plan");
    let dp_rows = |p: &CostProfile| {
        let ev = Evaluator::new(
            &model,
            &cluster,
            EvalOptions::default().with_profile(p, model.training.precision),
        );
        let r = ev.report(&plan).expect("runs");
        let rows: Vec<_> = r
            .comm
            .into_iter()
            .filter(|c| c.kind == CommKind::Dp && c.what.starts_with("DP "))
            .collect();
        (rows, r.metrics.step_time_s)
    };
    let (titan, t_titan) = dp_rows(&CostProfile::TORCHTITAN);
    let (mcore, t_mcore) = dp_rows(&CostProfile::MEGATRON_CORE);
    assert_eq!(titan.len(), 2, "{titan:?}");
    for c in &titan {
        assert_eq!(c.calls_per_step, 1.0, "{}", c.what);
    }
    let rs = |rows: &[autoplan_evaluate::CommRow]| {
        rows.iter()
            .find(|c| c.what.contains("reduce-scatter"))
            .map(|c| (c.time, c.exposed))
            .expect("a reduce-scatter")
    };
    let (time, exposed) = rs(&titan);
    assert!(
        (exposed - time).abs() <= 1e-12 * time,
        "{exposed} of {time}"
    );
    let (time_m, exposed_m) = rs(&mcore);
    assert!((time_m - time).abs() <= 1e-12 * time);
    assert!(exposed_m < 0.9 * time_m, "{exposed_m} of {time_m}");
    assert!(t_titan > t_mcore);
}

#[test]
fn torchtitan_before_0_2_ran_flash_attention_2_below_blackwell() {
    // torchtitan's SDPA took FlashAttention-2 first until 0.2.0 (2025-10), except from compute
    // capability 10.0 (`torchtitan_sdpa`); its Dec 2024 H100 rows ran it, a copy dated 2026
    // or run on B200s runs cuDNN's kernel (`Flash`), as does every other stack.
    use autoplan_evaluate::AttentionKernel;
    let tt = row("tt_8b_cp1_seq32k");
    assert_eq!(row_profile(&tt).attention, AttentionKernel::FlashAttention2);
    assert_eq!(
        case(&tt).unwrap().options.attention,
        AttentionKernel::FlashAttention2
    );
    let mut later = tt.clone();
    later.source = later.source.replace("Dec 2024", "Feb 2026");
    assert_eq!(row_profile(&later).attention, AttentionKernel::Flash);
    let mut blackwell = tt.clone();
    blackwell.gpu = "B200".into();
    assert_eq!(row_profile(&blackwell).attention, AttentionKernel::Flash);
    // The same profile otherwise: the variant keeps its name and mechanisms.
    assert_eq!(row_profile(&tt).name, CostProfile::TORCHTITAN.name);
    assert_eq!(
        row_profile(&tt).with_attention(AttentionKernel::Flash),
        CostProfile::TORCHTITAN
    );
    assert_eq!(
        profile_of("nemo2407_h100_LLAMA3-8B_8gpu").attention,
        AttentionKernel::Flash
    );
    assert_eq!(CostProfile::TORCHTITAN.attention, AttentionKernel::Flash);
}

#[test]
fn flash_attention_2_is_slower_on_hopper_and_the_same_on_ampere() {
    // Llama 3 8B at 32K tokens, one sequence per GPU: the attention core is a third of its
    // FLOPs. FlashAttention-2's sm80 kernels run Hopper's attention at about half cuDNN's
    // forward rate (`ArchEfficiency::fa2_rate`); on an A100 they are its own kernel.
    use autoplan_evaluate::AttentionKernel;
    let mut model = autoplan_graph::resolve_model("llama3-8b").expect("bundled");
    model.training.seq_len = 32768;
    model.training.global_batch = 8;
    let plan = Plan {
        dp: 8,
        mbs: 1,
        recompute: Recompute::Full,
        zero: Zero::stage(3),
        ..Plan::default()
    };
    for (cluster, slower) in [("dgx-h100", true), ("selene-a100", false)] {
        let c = autoplan_cluster::resolve_cluster(cluster)
            .unwrap()
            .with_gpus(8)
            .unwrap();
        let step = |attention| {
            let opts = EvalOptions {
                attention,
                ..EvalOptions::default()
            };
            Evaluator::new(&model, &c, opts)
                .evaluate(&plan)
                .unwrap_or_else(|e| panic!("{cluster}: {e}"))
                .step_time_s
        };
        let (cudnn, fa2) = (
            step(AttentionKernel::Flash),
            step(AttentionKernel::FlashAttention2),
        );
        eprintln!("{cluster}: {cudnn:.3} s vs FlashAttention-2 {fa2:.3} s");
        if slower {
            assert!(fa2 > 1.2 * cudnn, "{cluster}: {fa2} vs {cudnn}");
        } else {
            assert_eq!(fa2, cudnn, "{cluster}");
        }
    }
}
