//! Properties of the collective model on random clusters and groups (proptest).

use autoplan_cluster::{
    Cluster, Efficiency, Gpu, GpuArch, GroupPlacement, IntraFabric, NetTopology, Network, Node,
};
use autoplan_cost::{
    algorithms_of, library_algorithms, nccl_algorithms_of, AlgoMode, Algorithm, Collective,
    CollectiveLibrary, CostModel,
};
use proptest::prelude::*;

#[allow(clippy::too_many_arguments)]
fn cluster(
    fabric: IntraFabric,
    topology: NetTopology,
    gpn: u32,
    nodes: u32,
    intra_gbps: f64,
    inter_gbps: f64,
    oversub: f64,
    in_switch: bool,
    lat_us: (f64, f64, f64, f64),
) -> Cluster {
    Cluster {
        name: "prop".into(),
        nodes,
        gpu: Gpu {
            name: "g".into(),
            arch: GpuArch::Other,
            peak_flops: vec![],
            hbm_bytes: 80e9,
            hbm_bw: 2e12,
            rated_power_w: None,
            power_limit_w: None,
        },
        node: Node {
            gpus_per_node: gpn,
            fabric,
            intra_bw: intra_gbps * 1e9,
            intra_latency: lat_us.0 * 1e-6,
            in_switch_reduction: in_switch,
            nvlink_domain: gpn,
        },
        network: Network {
            topology,
            inter_bw: inter_gbps * 1e9,
            nics_per_node: gpn,
            oversubscription: oversub,
            link_delay: lat_us.1 * 1e-6,
            in_network_reduction: false,
        },
        efficiency: Efficiency {
            bwurate: 0.9,
            start_lat: lat_us.2 * 1e-6,
            sync_lat: lat_us.3 * 1e-6,
            cpufetch: 5e-6,
        },
        library: autoplan_cluster::CollectiveLibrary::Any,
        host: None,
        price_usd_per_gpu_hour: None,
    }
}

fn fabric() -> impl Strategy<Value = IntraFabric> {
    prop_oneof![
        Just(IntraFabric::Nvswitch),
        Just(IntraFabric::FullMesh),
        Just(IntraFabric::Ring),
        Just(IntraFabric::Pcie),
    ]
}

fn topology() -> impl Strategy<Value = NetTopology> {
    prop_oneof![
        Just(NetTopology::FatTree),
        Just(NetTopology::RailOptimized),
        Just(NetTopology::SpineLeaf),
        Just(NetTopology::Torus2d),
    ]
}

fn op() -> impl Strategy<Value = Collective> {
    proptest::sample::select(Collective::ALL.to_vec())
}

/// Any cluster: fabric, topology, 8 GPUs per node, 64 nodes, bandwidths and latencies.
fn any_cluster() -> impl Strategy<Value = Cluster> {
    (
        fabric(),
        topology(),
        50.0..900.0f64,
        5.0..100.0f64,
        1.0..4.0f64,
        any::<bool>(),
        (0.1..5.0f64, 0.1..5.0f64, 0.0..20.0f64, 0.0..20.0f64),
    )
        .prop_map(|(f, t, bi, be, o, sw, lat)| cluster(f, t, 8, 64, bi, be, o, sw, lat))
}

/// A group: r ranks on each of N nodes (r ≤ 8).
fn group() -> impl Strategy<Value = GroupPlacement> {
    (1u32..=8, 1u32..=64).prop_map(|(r, n)| GroupPlacement {
        size: r * n,
        ranks_per_node: r,
        nodes: n,
    })
}

/// A lower bound of the bandwidth time of `op` with per-rank egress at most B_i + B_e:
/// the volume every rank must move (Patarasuk & Yuan 2009 for all-reduce; (n−1)/n·S for the
/// others; in-network reduction only needs S per rank) and, across nodes, the volume every
/// node must export through its r NIC shares.
fn lower_bound(c: &Cluster, op: Collective, g: GroupPlacement, s: f64) -> f64 {
    let u = c.efficiency.bwurate;
    let bi = c.node.intra_bw * u;
    let be = c.network.inter_bw * u;
    let (n, r, nn) = (
        f64::from(g.size),
        f64::from(g.ranks_per_node),
        f64::from(g.nodes),
    );
    if g.size <= 1 {
        return 0.0;
    }
    let egress = if g.nodes > 1 { bi + be } else { bi };
    let (per_rank, per_node) = match op {
        Collective::AllReduce => {
            let v = if c.node.in_switch_reduction {
                1.0
            } else {
                2.0 * (n - 1.0) / n
            };
            (v * s, 2.0 * (nn - 1.0) / nn * s / r)
        }
        Collective::AllGather | Collective::ReduceScatter => {
            ((n - 1.0) / n * s, (nn - 1.0) / nn * s / r)
        }
        Collective::AllToAll => ((n - 1.0) / n * s, (n - r) / n * s),
        Collective::Scatter | Collective::Gather => ((n - 1.0) / n * s, 0.0),
        Collective::Broadcast | Collective::Reduce | Collective::SendRecv => (s, 0.0),
        Collective::Barrier => (0.0, 0.0),
    };
    let inter = if g.nodes > 1 { per_node / be } else { 0.0 };
    (per_rank / egress).max(inter)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn non_decreasing_in_bytes(c in any_cluster(), op in op(), g in group(),
                               s in 0.0..1e10f64, k in 1.0..100.0f64) {
        let m = CostModel::new(&c);
        for &a in algorithms_of(op) {
            if let (Some(t1), Some(t2)) = (m.time_of(op, a, g, s), m.time_of(op, a, g, s * k)) {
                prop_assert!(t2.time >= t1.time, "{op:?} {a:?} {g:?}: {} > {}", t1.time, t2.time);
            }
        }
        for mode in [AlgoMode::Cheapest, AlgoMode::NcclTuner] {
            let t1 = m.collective(op, g, s, mode).time;
            let t2 = m.collective(op, g, s * k, mode).time;
            prop_assert!(t2 >= t1);
        }
    }

    /// More nodes with the same ranks per node and the same per-rank data never get faster
    /// (every algorithm; halving-doubling on powers of two, since folding a non-power of two
    /// costs extra), nor more ranks inside an NVSwitch node (except in-switch reduction).
    #[test]
    fn non_decreasing_in_group_size(c in any_cluster(), op in op(), r in 1u32..=8,
                                    n1 in 1u32..=32, extra in 1u32..=32, shard in 1e3..1e9f64) {
        // Physics: with more nodes each peer's share of a fixed per-rank buffer shrinks, so
        // traffic moves from node-mates to the NICs; that is only never faster when the
        // slowest intra-node path (one full-mesh link, or a multi-hop ring path) is at least
        // as fast as a NIC share.
        let worst_intra = match c.node.fabric {
            IntraFabric::FullMesh => c.node.intra_bw / 7.0,
            IntraFabric::Ring => c.node.intra_bw / 2.0,
            _ => c.node.intra_bw,
        };
        if worst_intra < c.network.inter_bw {
            return Ok(());
        }
        let m = CostModel::new(&c);
        let n2 = n1 + extra;
        let g1 = GroupPlacement { size: r * n1, ranks_per_node: r, nodes: n1 };
        let g2 = GroupPlacement { size: r * n2, ranks_per_node: r, nodes: n2 };
        // Per-rank data fixed: all-gather / reduce-scatter / scatter / gather sizes are n shards.
        let bytes = |g: GroupPlacement| match op {
            Collective::AllGather | Collective::ReduceScatter
            | Collective::Scatter | Collective::Gather => shard * f64::from(g.size),
            _ => shard,
        };
        for &a in algorithms_of(op) {
            if a == Algorithm::HalvingDoubling
                && !(g1.size.is_power_of_two() && g2.size.is_power_of_two()) {
                continue;
            }
            if let (Some(t1), Some(t2)) = (m.time_of(op, a, g1, bytes(g1)), m.time_of(op, a, g2, bytes(g2))) {
                prop_assert!(t2.time >= t1.time * (1.0 - 1e-12),
                    "{op:?} {a:?} r={r}: N={n1} {} > N={n2} {}", t1.time, t2.time);
            }
        }
        if c.node.fabric == IntraFabric::Nvswitch && r < 8 {
            let h1 = GroupPlacement { size: r, ranks_per_node: r, nodes: 1 };
            let h2 = GroupPlacement { size: r + 1, ranks_per_node: r + 1, nodes: 1 };
            for &a in algorithms_of(op) {
                // In-switch reduction gets cheaper per rank with more ranks ((n+1)/n·S; NVLS
                // algbw measured rising from 5 to 8 GPUs, nccl#1455): physics says not monotone.
                if a == Algorithm::HalvingDoubling || a == Algorithm::InSwitch { continue; }
                if let (Some(t1), Some(t2)) = (m.time_of(op, a, h1, bytes(h1)), m.time_of(op, a, h2, bytes(h2))) {
                    prop_assert!(t2.time >= t1.time * (1.0 - 1e-12), "{op:?} {a:?} intra {r}");
                }
            }
        }
    }

    #[test]
    fn never_below_bandwidth_lower_bound(c in any_cluster(), op in op(), g in group(),
                                         s in 0.0..1e10f64) {
        let lb = lower_bound(&c, op, g, s);
        for lib in [CollectiveLibrary::Any, CollectiveLibrary::Nccl] {
            let m = CostModel::new(&c).with_library(lib);
            for alt in &m.alternatives(op, g, s) {
                prop_assert!(alt.time >= lb * (1.0 - 1e-9),
                    "{lib:?} {op:?} {:?} {g:?}: {} < bound {lb}", alt.algorithm, alt.time);
            }
        }
    }

    /// Hierarchical all-reduce and all-gather beat the flat ring at large sizes when
    /// intra_bw / inter_bw exceeds the group size n (the ring's extra network volume,
    /// (r−1)/n·S per NIC share, then outweighs the intra-node phases).
    #[test]
    fn hierarchical_beats_flat_ring_when_network_is_slow(r in 2u32..=8, nodes in 2u32..=16,
            k in 1.5..20.0f64, inter in 5.0..50.0f64, s in 1e9..1e11f64, t in topology()) {
        let n = r * nodes;
        let c = cluster(IntraFabric::Nvswitch, t, 8, 16, inter * f64::from(n) * k, inter, 1.0,
                        false, (1.0, 1.0, 5.0, 5.0));
        let m = CostModel::new(&c);
        let g = GroupPlacement { size: n, ranks_per_node: r, nodes };
        for op in [Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter] {
            let h = m.time_of(op, Algorithm::Hierarchical, g, s).unwrap().time;
            let ring = m.time_of(op, Algorithm::Ring, g, s).unwrap().time;
            prop_assert!(h < ring, "{op:?} {g:?}: hierarchical {h} ≥ ring {ring}");
        }
    }

    /// On an oversubscribed rail-optimised network, the two-level all-to-all (rail-aligned
    /// network phase) beats pairwise at large sizes when NVLink is much faster than the NICs.
    #[test]
    fn hierarchical_alltoall_beats_pairwise_across_rails(r in 2u32..=8, nodes in 2u32..=16,
            oversub in 2.0..4.0f64, s in 1e9..1e11f64) {
        let c = cluster(IntraFabric::Nvswitch, NetTopology::RailOptimized, 8, 16, 400.0, 25.0,
                        oversub, false, (1.0, 1.0, 5.0, 5.0));
        let m = CostModel::new(&c);
        let g = GroupPlacement { size: r * nodes, ranks_per_node: r, nodes };
        let h = m.time_of(Collective::AllToAll, Algorithm::Hierarchical, g, s).unwrap().time;
        let p = m.time_of(Collective::AllToAll, Algorithm::Direct, g, s).unwrap().time;
        prop_assert!(h < p);
    }

    /// Small messages on large groups: Bruck beats the ring all-to-all, the double binary tree
    /// beats the ring all-reduce (log2 n steps against n−1 and 2(n−1)).
    #[test]
    fn log_algorithms_beat_ring_small_messages(c in any_cluster(), r in 1u32..=8,
                                               nodes in 4u32..=64, s in 0.0..1024.0f64) {
        let g = GroupPlacement { size: r * nodes, ranks_per_node: r, nodes };
        prop_assume!(g.size >= 16);
        let m = CostModel::new(&c);
        let t = |op, a| m.time_of(op, a, g, s).unwrap().time;
        prop_assert!(t(Collective::AllToAll, Algorithm::Bruck) < t(Collective::AllToAll, Algorithm::Ring));
        prop_assert!(t(Collective::AllReduce, Algorithm::DoubleBinaryTree) < t(Collective::AllReduce, Algorithm::Ring));
        prop_assert!(t(Collective::AllReduce, Algorithm::Tree) < t(Collective::AllReduce, Algorithm::Ring));
    }

    /// The modes agree with the list of alternatives, under either library: Cheapest is the
    /// minimum of the library's list (the unrolled fast path and the generic one compute the
    /// same numbers), Fixed(a) is a's entry, NcclTuner picks one of NCCL's entries, NcclLike
    /// and Any one of the seeds' full menu, whatever the library.
    #[test]
    fn modes_agree_with_alternatives(c in any_cluster(), op in op(), g in group(), s in 0.0..1e10f64) {
        let base = CostModel::new(&c);
        let nccl = base.with_library(CollectiveLibrary::Nccl).alternatives(op, g, s);
        let seeds = base.with_library(CollectiveLibrary::Any).alternatives(op, g, s);
        for lib in [CollectiveLibrary::Any, CollectiveLibrary::Nccl] {
            let m = base.with_library(lib);
            let alts = m.alternatives(op, g, s);
            let best = m.collective(op, g, s, AlgoMode::Cheapest);
            if g.size > 1 {
                prop_assert_eq!(Some(best), alts.cheapest());
                for alt in &alts {
                    prop_assert_eq!(m.collective(op, g, s, AlgoMode::Fixed(alt.algorithm)), *alt);
                    prop_assert!(library_algorithms(op, lib).contains(&alt.algorithm));
                }
                let t = m.collective(op, g, s, AlgoMode::NcclTuner);
                prop_assert_eq!(nccl.get(t.algorithm), Some(t));
                for mode in [AlgoMode::NcclLike, AlgoMode::Any] {
                    let c = m.collective(op, g, s, mode);
                    prop_assert_eq!(seeds.get(c.algorithm), Some(c));
                }
            } else {
                prop_assert_eq!(best.time, 0.0);
            }
        }
    }

    /// Under NCCL no collective is priced with an algorithm NCCL lacks, and NCCL's ring is the
    /// seeds' ring with one more protocol (LL128) to choose from: never slower.
    #[test]
    fn nccl_is_a_restriction(c in any_cluster(), op in op(), g in group(), s in 0.0..1e10f64) {
        prop_assume!(g.size > 1);
        let m = CostModel::new(&c).with_library(CollectiveLibrary::Nccl);
        let n = m.collective(op, g, s, AlgoMode::Cheapest);
        prop_assert!(nccl_algorithms_of(op).contains(&n.algorithm));
        let seeds = m.with_library(CollectiveLibrary::Any);
        if nccl_algorithms_of(op).contains(&Algorithm::Ring) {
            let nr = m.time_of(op, Algorithm::Ring, g, s).unwrap();
            let sr = seeds.time_of(op, Algorithm::Ring, g, s).unwrap();
            prop_assert!(nr.time <= sr.time * (1.0 + 1e-12), "{op:?} {g:?}: {nr:?} > {sr:?}");
            if nr.protocol != autoplan_cost::Protocol::Ll128 {
                prop_assert_eq!(nr.protocol, sr.protocol);
                prop_assert!((nr.time - sr.time).abs() <= 1e-12 * sr.time, "{nr:?} vs {sr:?}");
            }
        }
    }

    /// Imbalance never helps: the unequal all-to-all with max ≥ mean costs at least the equal
    /// one at the mean, and exactly the equal one (+ cpufetch) when max = mean.
    #[test]
    fn unequal_alltoall_bounds(c in any_cluster(), g in group(), mean in 0.0..1e9f64, skew in 1.0..8.0f64) {
        let m = CostModel::new(&c);
        let eq = m.collective(Collective::AllToAll, g, mean, AlgoMode::Cheapest).time;
        let un = m.alltoall_unequal(g, mean * skew, mean, AlgoMode::Cheapest).time;
        prop_assert!(un >= eq);
        let same = m.alltoall_unequal(g, mean, mean, AlgoMode::Cheapest).time;
        let extra = if g.size > 1 { c.efficiency.cpufetch } else { 0.0 };
        prop_assert!((same - eq - extra).abs() <= 1e-12 * same.max(1.0));
    }
}
