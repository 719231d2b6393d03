//! Criterion benches of the search (`cargo bench --bench search`): a full branch-and-bound
//! search of the default space for the four cases of issue 5 (target < 1 s each on 2 cores),
//! and an exhaustive evaluation of a whole space (target ≥ 1M plans/s/core; the plans/s and
//! the prune ratio are printed once per case before the timings).

use std::hint::black_box;

use autoplan::cluster::resolve_cluster;
use autoplan::evaluate::EvalOptions;
use autoplan::graph::resolve_model;
use autoplan::search::{resolve_space, search, Scorer, SearchOptions};
use criterion::{criterion_group, criterion_main, Criterion};

const CASES: &[(&str, &str)] = &[
    ("deepseek-v3", "h800x2048"),
    ("llama3.1-405b", "h100x16384"),
    ("gpt3-175b", "a100x1024"),
    ("mixtral-8x22b", "h100x256"),
];

fn scorer(model: &str, cluster: &str) -> Scorer {
    let m = resolve_model(model).expect("bundled model");
    let c = resolve_cluster(cluster).expect("bundled cluster");
    Scorer::new(&m, &c, EvalOptions::default())
}

fn full_search(c: &mut Criterion) {
    let space = resolve_space("default").expect("bundled space");
    let mut g = c.benchmark_group("search");
    g.sample_size(10);
    for &(model, cluster) in CASES {
        let s = scorer(model, cluster);
        let opts = SearchOptions {
            top_k: 10,
            exhaustive: false,
        };
        let once = search(&s, &space, &opts, &());
        eprintln!(
            "search {model} on {cluster}: {} plans in the space, {} evaluated, prune ratio \
             {:.4}, {:.3} s wall, {} threads",
            once.stats.space_plans,
            once.stats.evaluated,
            once.stats.prune_ratio(),
            once.stats.wall_s,
            once.stats.threads
        );
        // A fresh scorer per search (built outside the timing): the evaluator's per-thread
        // caches key on it, so no search finds what an earlier one priced, as a single
        // `autoplan search` does not.
        g.bench_function(format!("default/{model}/{cluster}"), |b| {
            b.iter_batched(
                || scorer(model, cluster),
                |s| search(black_box(&s), &space, &opts, &()),
                criterion::BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

fn exhaustive(c: &mut Criterion) {
    let space = resolve_space("default").expect("bundled space");
    let mut g = c.benchmark_group("search-exhaustive");
    g.sample_size(10);
    let (model, cluster) = ("gpt3-175b", "a100x1024");
    let s = scorer(model, cluster);
    let opts = SearchOptions {
        top_k: 10,
        exhaustive: true,
    };
    // One thread, so the rate is per core.
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("thread pool");
    let once = pool.install(|| search(&s, &space, &opts, &()));
    eprintln!(
        "exhaustive {model} on {cluster}: {} plans, {:.0} plans/s on one core",
        once.stats.evaluated,
        once.stats.plans_per_s()
    );
    g.throughput(criterion::Throughput::Elements(once.stats.evaluated));
    g.bench_function(format!("default/{model}/{cluster}/1-thread"), |b| {
        b.iter(|| pool.install(|| search(black_box(&s), &space, &opts, &())))
    });
    g.finish();
}

criterion_group!(benches, full_search, exhaustive);
criterion_main!(benches);
