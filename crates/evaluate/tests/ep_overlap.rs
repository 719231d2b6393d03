//! EP communication overlap as the schedule allows it, and DeepSeek-V3's DualPipe ranks
//! (issue 17: "DeepSeek-V3's published plan within 10%"; `core/ep_overlap.rs`,
//! `core/dualpipe.rs`): the published DSV3 row's error pinned, and the directions that must hold
//! whatever the constants — overlap never slower than none, DualPipe's pace the mean of a
//! rank's two stages, FP8 dispatch under DeepSeek's recipe.

mod common;

use autoplan_evaluate::validate::{case_of, validate};
use autoplan_evaluate::{EvalOptions, Evaluator};
use autoplan_plan::Plan;
use common::{cluster_for, row, rows};

/// The scored error of row `id` of `file`.
fn error_of(file: &str, id: &str) -> f64 {
    let v = validate(
        &rows(file),
        &|n| autoplan_graph::resolve_model(n).ok(),
        &cluster_for,
    );
    v.rows
        .iter()
        .find(|r| r.id == id)
        .unwrap_or_else(|| panic!("{id} not scored"))
        .error
}

fn dsv3() -> Evaluator {
    let m = autoplan_graph::resolve_model("deepseek-v3").unwrap();
    let c = autoplan_cluster::resolve_cluster("h800x2048").unwrap();
    Evaluator::new(&m, &c, EvalOptions::default())
}

fn plan(s: &str, gpus: u64) -> Plan {
    Plan::parse_for_gpus(s, gpus).unwrap_or_else(|e| panic!("{s}: {e}"))
}

/// The published plan (report §3.2) without its `ep_overlap=on`.
const DSV3_PUBLISHED: &str = "tp=1,pp=16,ep=64,schedule=dualpipe,mbs=1,zero=1,dispatcher=deepep,\
                              recompute=selective:layernorm+mla_up_proj";

fn dsv3_published() -> Plan {
    plan(&format!("{DSV3_PUBLISHED},ep_overlap=on"), 2048)
}

#[test]
fn deepseek_v3_published_row_is_pinned() {
    // Before DualPipe's ranks and the overlap rules: -28.8%; with them +7.3% (the issue's
    // target: within 10% of the 1543 tokens/s/GPU the report's GPU hours imply).
    let e = error_of("published_runs_2.csv", "deepseek_v3_pretrain_2048xH800");
    assert!(e.abs() <= 0.10, "{e:+.3}");
}

#[test]
fn the_published_a2a_overlap_rows_run_it_and_their_twins_do_not() {
    let resolve = |n: &str| autoplan_graph::resolve_model(n).ok();
    let case = |id: &str| {
        case_of(&row(id), &resolve, &cluster_for).unwrap_or_else(|s| panic!("{id}: {}", s.reason))
    };
    let on = case("mzoo_h100_Qwen3_235B_a22B_xnode_ep32_1f1b_overlap");
    let off = case("mzoo_h100_Qwen3_235B_a22B_xnode_ep32");
    assert!(on.plan.ep_overlap && !off.plan.ep_overlap);
    assert_eq!(
        Plan {
            ep_overlap: false,
            ..on.plan
        },
        off.plan
    );
    // DeepSeek-V3's DualPipe row ran DeepSeek's own cross-node dispatch (report §3.2.2).
    let ds = case("deepseek_v3_pretrain_2048xH800");
    assert_eq!(ds.plan.dispatcher, autoplan_plan::Dispatcher::DeepEp);
    // The overlapped twin is predicted faster, as measured (1862 vs 1663 tokens/s/GPU).
    let ev = |c: &autoplan_evaluate::validate::Case| {
        Evaluator::new(&c.model, &c.cluster, c.options)
            .evaluate(&c.plan)
            .unwrap()
            .tokens_per_s_per_gpu
    };
    assert!(ev(&on) > ev(&off));
}

#[test]
fn overlapping_ep_is_never_slower_than_not() {
    let ds = dsv3();
    let qwen = {
        let m = autoplan_graph::resolve_model("qwen3-235b-a22b").unwrap();
        let c = autoplan_cluster::resolve_cluster("h100x256").unwrap();
        Evaluator::new(&m, &c, EvalOptions::default())
    };
    let cases: [(&Evaluator, &str, u64); 7] = [
        (&ds, DSV3_PUBLISHED, 2048),
        (
            &ds,
            "tp=1,pp=16,ep=64,schedule=dualpipe,mbs=1,zero=1,recompute=full",
            2048,
        ),
        (
            &ds,
            "tp=2,pp=8,schedule=interleaved,vpp=4,ep=64,mbs=1,zero=1,sp=on,recompute=full",
            2048,
        ),
        (
            &qwen,
            "tp=2,pp=8,schedule=interleaved,vpp=4,ep=32,mbs=1,zero=1,sp=on,dispatcher=deepep",
            256,
        ),
        (
            &qwen,
            "tp=4,pp=8,schedule=interleaved,vpp=4,ep=8,mbs=1,zero=1,sp=on,dispatcher=deepep",
            256,
        ),
        (
            &qwen,
            "tp=2,pp=8,schedule=interleaved,vpp=4,ep=32,mbs=1,zero=1,sp=on,dispatcher=all-gather",
            256,
        ),
        (
            &qwen,
            "tp=2,pp=8,schedule=interleaved,vpp=4,ep=8,moe_tp=2,mbs=1,zero=1,sp=on,recompute=full",
            256,
        ),
    ];
    for (ev, s, gpus) in cases {
        let on = plan(&format!("{s},ep_overlap=on"), gpus);
        let off = Plan {
            ep_overlap: false,
            ..on
        };
        let (a, b) = match (ev.report(&on), ev.report(&off)) {
            (Ok(a), Ok(b)) => (a, b),
            (a, b) => panic!("{s}: {:?} {:?}", a.err(), b.err()),
        };
        assert!(
            a.metrics.step_time_s <= b.metrics.step_time_s * (1.0 + 1e-12),
            "{s}: {} > {}",
            a.metrics.step_time_s,
            b.metrics.step_time_s
        );
        // Every EP transfer's exposed time lies within [0, its time].
        for r in a
            .comm
            .iter()
            .filter(|r| r.kind == autoplan_evaluate::CommKind::Ep)
        {
            assert!(
                r.exposed >= 0.0 && r.exposed <= r.time * (1.0 + 1e-12),
                "{s}: {r:?}"
            );
        }
    }
}

#[test]
fn a_dualpipe_rank_runs_at_the_mean_of_its_two_stages() {
    // DeepSeek-V3 report §3.2.1: rank i holds stages i and pp-1-i, half the micro-batches
    // through each. DeepSeek-V3's light first stage (2 dense blocks) pairs with its heavy last
    // one (3 blocks, the MTP module and the head).
    let ev = dsv3();
    let r = ev.report(&dsv3_published()).unwrap();
    let pp = r.stages.len();
    let t: Vec<f64> = r.stages.iter().map(|s| s.time_per_microbatch_s).collect();
    let pace = (0..pp / 2)
        .map(|i| 0.5 * (t[i] + t[pp - 1 - i]))
        .fold(0.0, f64::max);
    let worst_stage = t.iter().copied().fold(0.0, f64::max);
    assert!(pace < worst_stage);
    assert!((r.bottleneck_stage as usize) < pp / 2);
    let b = &r.breakdown;
    let per_mb = (b.compute_s
        + b.recompute_s
        + b.tp_exposed_s
        + b.cp_exposed_s
        + b.ep_exposed_s
        + b.pp_exposed_s)
        / f64::from(r.microbatches);
    assert!((per_mb / pace - 1.0).abs() < 1e-6, "{per_mb} vs {pace}");
    // The pipeline sends hide behind the paired chunk's compute (§3.2.1).
    assert_eq!(b.pp_exposed_s, 0.0);
    // The same plan under 1F1B paces at its worst stage: slower.
    let one = Plan {
        schedule: autoplan_plan::Schedule::OneF1B,
        ep_overlap: false,
        ..dsv3_published()
    };
    let dual_no_overlap = Plan {
        ep_overlap: false,
        ..dsv3_published()
    };
    // (1F1B holds one stage per rank: less memory than DualPipe, so it fits too.)
    let s1 = ev.evaluate(&one).unwrap().step_time_s;
    let s2 = ev.evaluate(&dual_no_overlap).unwrap().step_time_s;
    assert!(s2 < s1, "{s2} vs {s1}");
}

#[test]
fn deepseek_fp8_recipe_dispatches_in_fp8_and_combines_in_bf16() {
    // DeepSeek-V3 report §3.3.3: in DeepSeek's framework the dispatch and the combine's
    // gradient travel in FP8 with 1×128 scales, the combine and the dispatch's gradient in
    // BF16. Megatron-Core's DeepEP path hands the dispatch its BF16 hidden states
    // (`fused_a2a.py` @ megatron-core 0.14.0), so by default (the export targets) all four
    // travel in BF16.
    let mut m = autoplan_graph::resolve_model("deepseek-v3").unwrap();
    m.training.precision = autoplan_cluster::Precision::Fp8Block;
    let cl = autoplan_cluster::resolve_cluster("h800x2048").unwrap();
    let deepseek = EvalOptions {
        fp8_dispatch: true,
        ..EvalOptions::default()
    };
    let ev = Evaluator::new(&m, &cl, deepseek);
    let p = dsv3_published();
    let rows = |ev: &Evaluator| {
        let r = ev.report(&p).unwrap();
        let bytes = |what: &str| {
            r.comm
                .iter()
                .find(|c| c.what == what && c.layer == Some(autoplan_graph::LayerKind::Moe))
                .unwrap_or_else(|| panic!("{what}"))
                .bytes
        };
        (
            bytes("EP dispatch (DeepEP)"),
            bytes("EP combine (DeepEP)"),
            bytes("EP combine-grad (DeepEP)"),
            bytes("EP dispatch-grad (DeepEP)"),
        )
    };
    let (d, c, cg, dg) = rows(&ev);
    let fp8 = (1.0 + 4.0 / 128.0) / 2.0;
    assert!((d / c - fp8).abs() < 1e-12 && (cg / dg - fp8).abs() < 1e-12);
    assert_eq!(c, dg);
    let dual = ev.evaluate(&p).unwrap().step_time_s;
    // Megatron-Core (the default options): BF16 both ways, and the step no faster.
    let megatron = Evaluator::new(&m, &cl, EvalOptions::default());
    let (d, c, cg, dg) = rows(&megatron);
    assert_eq!((d, cg), (c, dg));
    assert!(megatron.evaluate(&p).unwrap().step_time_s >= dual);
    // Other recipes send BF16 both ways, in DeepSeek's framework too. Per-tensor FP8 (the
    // bundled model's recipe): DeepSeek's quantized dispatch needs the 1×128 activation scales.
    m.training.precision = autoplan_cluster::Precision::Fp8;
    let bf = Evaluator::new(&m, &cl, deepseek);
    let (d, c, cg, dg) = rows(&bf);
    assert_eq!((d, cg), (c, dg));
}
