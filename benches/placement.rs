//! Expert placement: the heuristic on E=256 experts, P=64 GPUs (8 nodes × 8), L=5 slots
//! (4 + 1 redundant per GPU), Zipf(1.2) loads, a DeepSeek-V3-sized token (7168 × 2 bytes).
//! Target: well under 1 s per solve. Run: `cargo bench --bench placement`.

use autoplan_placement::{
    heuristic, loads, HeuristicOptions, Instance, InstanceOptions, Objective, Topology,
};
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;

fn instance(objective: Objective) -> Instance {
    // Intra-node: 3 µs, 200 GB/s effective; inter-node: 10 µs, 40 GB/s effective.
    let topo = Topology::two_level(8, 8, (3e-6, 1.0 / 200e9), (10e-6, 1.0 / 40e9)).unwrap();
    let demand = loads::zipf(256, 1.2, 64.0 * 32768.0, 1)
        .demand(64, 256, "zipf")
        .unwrap();
    let opts = InstanceOptions {
        bytes_per_token: 7168.0 * 2.0,
        expert_bytes: 3.0 * 7168.0 * 2048.0 * 2.0,
        compute_s_per_token: 2.0 * 3.0 * 7168.0 * 2048.0 / 400e12,
        replica_sync_bytes: 0.0,
        objective,
    };
    Instance::new(topo, 256, 5, demand, opts).unwrap()
}

fn placement(c: &mut Criterion) {
    let mut g = c.benchmark_group("placement");
    g.sample_size(10);
    for (name, o) in [
        ("synchronous", Objective::Synchronous),
        ("thesis", Objective::Thesis),
    ] {
        let inst = instance(o);
        g.bench_function(format!("heuristic_e256_p64_{name}"), |b| {
            b.iter(|| heuristic::heuristic(black_box(&inst), &HeuristicOptions::default()))
        });
    }
    g.finish();
}

criterion_group!(benches, placement);
criterion_main!(benches);
