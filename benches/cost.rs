//! Criterion benches of the cost crate: one collective evaluation (the search calls it millions
//! of times; target < 50 ns) and one GEMM time. Run: `cargo bench --bench cost`.
//!
//! After criterion's report, the same calls are timed as the fastest of 200 samples of 2000
//! calls each: on a shared, loaded machine criterion's mean includes preemptions, the minimum
//! does not.

use std::hint::black_box;

use autoplan::cluster::GroupPlacement;
use autoplan::cost::{calibration, compute, AlgoMode, Algorithm, Collective, CostModel};
use criterion::{criterion_group, Criterion};

fn collectives(c: &mut Criterion) {
    let model = CostModel::new(&calibration::dgx_h100(64));
    let dp = GroupPlacement {
        size: 64,
        ranks_per_node: 8,
        nodes: 8,
    };
    let ep = GroupPlacement {
        size: 32,
        ranks_per_node: 4,
        nodes: 8,
    };
    let mut g = c.benchmark_group("cost");
    g.bench_function("collective/allreduce-cheapest", |b| {
        b.iter(|| {
            model.collective(
                black_box(Collective::AllReduce),
                black_box(dp),
                black_box(1.5e9),
                black_box(AlgoMode::Cheapest),
            )
        })
    });
    g.bench_function("collective/allreduce-fixed-ring", |b| {
        b.iter(|| {
            model.collective(
                black_box(Collective::AllReduce),
                black_box(dp),
                black_box(1.5e9),
                black_box(AlgoMode::Fixed(Algorithm::Ring)),
            )
        })
    });
    g.bench_function("collective/alltoall-nccl-like", |b| {
        b.iter(|| {
            model.collective(
                black_box(Collective::AllToAll),
                black_box(ep),
                black_box(64e6),
                black_box(AlgoMode::NcclLike),
            )
        })
    });
    g.bench_function("alltoall_unequal/cheapest", |b| {
        b.iter(|| {
            model.alltoall_unequal(
                black_box(ep),
                black_box(96e6),
                black_box(64e6),
                black_box(AlgoMode::Cheapest),
            )
        })
    });
    g.bench_function("alternatives/allreduce", |b| {
        b.iter(|| {
            model.alternatives(
                black_box(Collective::AllReduce),
                black_box(dp),
                black_box(1.5e9),
            )
        })
    });
    let gpu = calibration::gpu_h100("H100", autoplan::cluster::GpuArch::H100);
    g.bench_function("gemm_time", |b| {
        b.iter(|| {
            let (m, n, k) = black_box((8192.0, 1536.0, 8192.0));
            compute::gemm_time(
                &gpu,
                2.0 * m * n * k,
                m,
                n,
                k,
                autoplan::cluster::Precision::Bf16,
            )
        })
    });
    g.finish();
}

/// Fastest per-call time over 200 samples of 2000 calls.
fn best_of(name: &str, mut f: impl FnMut() -> f64) {
    let mut best = f64::INFINITY;
    for _ in 0..200 {
        let t = std::time::Instant::now();
        let mut acc = 0.0;
        for _ in 0..2000 {
            acc += f();
        }
        black_box(acc);
        best = best.min(t.elapsed().as_secs_f64() / 2000.0);
    }
    println!("best-of-samples {name:40} {:6.1} ns", best * 1e9);
}

fn minimum_times() {
    let model = CostModel::new(&calibration::dgx_h100(64));
    let dp = GroupPlacement {
        size: 64,
        ranks_per_node: 8,
        nodes: 8,
    };
    let ep = GroupPlacement {
        size: 32,
        ranks_per_node: 4,
        nodes: 8,
    };
    let one = |op, g, bytes, mode| {
        model
            .collective(
                black_box(op),
                black_box(g),
                black_box(bytes),
                black_box(mode),
            )
            .time
    };
    best_of("collective/allreduce-cheapest", || {
        one(Collective::AllReduce, dp, 1.5e9, AlgoMode::Cheapest)
    });
    best_of("collective/allreduce-fixed-ring", || {
        one(
            Collective::AllReduce,
            dp,
            1.5e9,
            AlgoMode::Fixed(Algorithm::Ring),
        )
    });
    best_of("collective/alltoall-nccl-like", || {
        one(Collective::AllToAll, ep, 64e6, AlgoMode::NcclLike)
    });
    best_of("alltoall_unequal/cheapest", || {
        model
            .alltoall_unequal(
                black_box(ep),
                black_box(96e6),
                black_box(64e6),
                black_box(AlgoMode::Cheapest),
            )
            .time
    });
    best_of("alternatives/allreduce", || {
        model
            .alternatives(
                black_box(Collective::AllReduce),
                black_box(dp),
                black_box(1.5e9),
            )
            .as_slice()
            .len() as f64
    });
}

criterion_group!(benches, collectives);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    minimum_times();
}
