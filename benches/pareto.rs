//! Criterion bench of the search over scale (`cargo bench --bench pareto`): issue 19's target,
//! the Pareto search over 10 GPU counts × 4 global batches for DeepSeek-V3 on the H800
//! cluster (the default space), under 2 s on 2 cores. The searches' counters (plans
//! evaluated, nodes bounded) are printed once before the timings.

use std::hint::black_box;

use autoplan::cluster::resolve_cluster;
use autoplan::evaluate::EvalOptions;
use autoplan::graph::resolve_model;
use autoplan::search::pareto::{grid, search_scale, Goal};
use autoplan::search::train::Budget;
use autoplan::search::{resolve_space, SearchOptions, Target};
use criterion::{criterion_group, criterion_main, Criterion};

/// 64 to 32,768 GPUs (doubling: 10 counts) × 2048 to 16,384 sequences of 4096 tokens (8M to
/// 64M tokens per step; DeepSeek-V3 trained at up to 15,360, its report §4.2).
const GPUS: [u32; 10] = [64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768];
const BATCHES: [u32; 4] = [2048, 4096, 8192, 16384];

fn pareto(c: &mut Criterion) {
    let m = resolve_model("deepseek-v3").expect("bundled model");
    let cl = resolve_cluster("h800x2048").expect("bundled cluster");
    let space = resolve_space("default").expect("bundled space");
    let points = grid(&GPUS, &BATCHES);
    // DeepSeek-V3's pre-training corpus: 14.8T tokens (report §4.1).
    let budget = Budget {
        tokens: 14.8e12,
        usd_per_gpu_hour: None,
    };
    let opts = SearchOptions {
        top_k: 4,
        exhaustive: false,
    };
    let run = || {
        search_scale(
            &m,
            &cl,
            EvalOptions::default(),
            Target::default(),
            &space,
            &opts,
            &points,
            &budget,
            Goal::Time,
            &(),
        )
        .expect("every point resizes")
    };
    let once = run();
    let (evaluated, nodes, wall) = once.points.iter().fold((0, 0, 0.0), |a, p| {
        let s = &p.case.outcome.stats;
        (a.0 + s.evaluated, a.1 + s.nodes, a.2 + s.wall_s)
    });
    eprintln!(
        "pareto deepseek-v3 on h800x2048: {} points, {} on the front, {} plans evaluated, {} \
         nodes bounded, {:.3} s of search wall",
        once.points.len(),
        once.on_front.iter().filter(|&&f| f).count(),
        evaluated,
        nodes,
        wall
    );
    let mut g = c.benchmark_group("pareto");
    g.sample_size(10);
    g.bench_function("deepseek-v3/h800x2048/10x4", |b| {
        b.iter(|| black_box(run()))
    });
    g.finish();
}

criterion_group!(benches, pareto);
criterion_main!(benches);
