//! Criterion benches of the evaluator: one `evaluate()` of a big plan (the search's inner loop;
//! target ≲ 1 µs so one core scores ≥ 1M plans/s) and one full `report()`.
//! Run: `cargo bench --bench evaluate`.

use std::hint::black_box;

use autoplan::cost::calibration;
use autoplan::evaluate::{EvalOptions, Evaluator};
use autoplan::graph::resolve_model;
use autoplan::plan::{Plan, Recompute, Schedule, Zero};
use criterion::{criterion_group, criterion_main, Criterion};

fn evaluate(c: &mut Criterion) {
    let mut g = c.benchmark_group("evaluate");
    // GPT-3 175B on 1024 H100: tp8 · pp8 (interleaved ×3) · dp16, SP, selective, ZeRO-1.
    let gpt = resolve_model("gpt3-175b").expect("bundled gpt3-175b");
    let ev = Evaluator::new(&gpt, &calibration::dgx_h100(128), EvalOptions::default());
    let dense = Plan {
        tp: 8,
        sp: true,
        pp: 8,
        dp: 16,
        schedule: Schedule::Interleaved,
        vpp: 3,
        mbs: 1,
        recompute: Recompute::Selective,
        zero: Zero::stage(1),
        ..Plan::default()
    };
    assert!(ev.evaluate(&dense).is_ok());
    g.bench_function("gpt3-175b/1024xH100/evaluate", |b| {
        b.iter(|| ev.evaluate(black_box(&dense)))
    });
    g.bench_function("gpt3-175b/1024xH100/report", |b| {
        b.iter(|| ev.report(black_box(&dense)))
    });
    // DeepSeek-V3 (MLA, 256 experts, MTP) on 2048 H800: cp2 · pp4 (interleaved ×4) · dp256,
    // ep32, ZeRO-2, EP overlap: a plan that fits (not the search's best). It must fit: an
    // out-of-memory plan returns before the step time is computed and would time only the
    // rejection.
    let ds = resolve_model("deepseek-v3").expect("bundled deepseek-v3");
    let ev = Evaluator::new(&ds, &calibration::hgx_h800(256), EvalOptions::default());
    let moe = Plan::parse_for_gpus(
        "tp=1,cp=2,dp=256,pp=4,ep=32,mbs=1,sp=off,recompute=none,zero=2,\
         schedule=interleaved,vpp=4,ep_overlap=on",
        2048,
    )
    .expect("plan");
    assert!(ev.evaluate(&moe).is_ok());
    g.bench_function("deepseek-v3/2048xH800/evaluate", |b| {
        b.iter(|| ev.evaluate(black_box(&moe)))
    });
    g.finish();
}

criterion_group!(benches, evaluate);
criterion_main!(benches);
