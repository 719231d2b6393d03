//! Criterion benches of the cost crate: one collective evaluation (the search calls it millions
//! of times; target < 50 ns) and one GEMM time. Run: `cargo bench --bench cost`.

use std::hint::black_box;

use autoplan::cluster::GroupPlacement;
use autoplan::cost::{calibration, compute, AlgoMode, Algorithm, Collective, CostModel};
use criterion::{criterion_group, criterion_main, Criterion};

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

criterion_group!(benches, collectives);
criterion_main!(benches);
