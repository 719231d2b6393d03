//! The α-β collective model: [`CostModel`] holds a cluster's constants; every (collective,
//! algorithm) pair is reduced to a [`Terms`] (latency steps on each fabric + bandwidth seconds),
//! which one function turns into a time for each protocol.
//!
//! Notation in the comments: `S` bytes (nccl-tests "size" convention, see
//! [`CostModel::collective`]), `n` ranks, `r` ranks per node, `N` nodes, `B_i` effective
//! intra-node bandwidth per rank, `B_e` effective NIC share per rank, `α` the per-step latency.

mod allgather;
mod allreduce;
mod alltoall;
mod bandwidth;
mod choose;
mod nccl;
mod p2p;
mod protocol;
mod rooted;

use autoplan_cluster::{Cluster, CollectiveLibrary, GroupPlacement, IntraFabric, NetTopology};

pub use nccl::{library_algorithms, nccl_algorithms_of};

use crate::{AlgoMode, Algorithm, Collective, CollectiveCost};

/// Fraction of the link bandwidth the low-latency protocol carries: NCCL's LL protocol stores
/// 8-byte lines of 4 data bytes + a 4-byte flag (collectives.md §2.5.5, `device.h`).
pub const LL_BANDWIDTH_FRACTION: f64 = 0.5;
/// In-switch (NVLS) reduction efficiency relative to ring bandwidth: NCCL `nvlsEff` for Hopper
/// (tuning.cc, collectives.md §2.3.3). With it, 8×H100 all-reduce predicts algbw ≈ 270 GB/s
/// (measured 273–275, collectives.md §4.1).
pub const IN_SWITCH_EFFICIENCY: f64 = 0.85;
/// NCCL's `nvlsEff` for Blackwell: 0.74 (tuning.cc, collectives.md §2.3.1's NVLS row).
pub const IN_SWITCH_EFFICIENCY_BLACKWELL: f64 = 0.74;
/// Fixed set-up latency of an in-switch (NVLS) collective, seconds: NCCL
/// `hwLat[NVLINK][NVLS][Simple]` = 25 µs (tuning.cc v2.30, collectives.md §2.4).
pub const IN_SWITCH_LATENCY: f64 = 25e-6;
/// Most algorithms any collective has in one library (all-reduce: 7 under `any`, 6 under
/// `nccl`).
pub const MAX_ALGORITHMS: usize = 7;

/// Precomputed per-cluster constants (bandwidths × `bwurate`, latencies). Build once per
/// cluster with [`CostModel::new`]; every query is allocation-free.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostModel {
    gpus_per_node: u32,
    fabric: IntraFabric,
    topology: NetTopology,
    /// `intra_bw × bwurate`, bytes/s per rank per direction.
    b_intra: f64,
    /// `inter_bw × bwurate`, bytes/s per rank per direction (the rank's NIC share).
    b_inter: f64,
    oversubscription: f64,
    /// 1 / `b_intra`, seconds per byte.
    spb_intra: f64,
    /// Seconds per byte of a NIC share for rail-aligned traffic (× oversubscription unless
    /// the network is rail-optimised).
    spb_inter_aligned: f64,
    /// Seconds per byte of a NIC share for cross-rail traffic (× oversubscription).
    spb_inter_cross: f64,
    /// Seconds per byte of in-switch reduction (1 / (`b_intra` × IN_SWITCH_EFFICIENCY), or
    /// its Blackwell value).
    spb_in_switch: f64,
    in_switch: bool,
    /// The network reduces in-switch (SHARP): NCCL's CollNet algorithms.
    in_network: bool,
    /// NCCL enables LL128 (NVLink inside the node, frameworks.md §4.1).
    ll128: bool,
    /// Whose algorithms `AlgoMode::Cheapest` picks from.
    library: CollectiveLibrary,
    start_lat: f64,
    sync_lat: f64,
    hop_intra: f64,
    hop_inter: f64,
    cpufetch: f64,
}

/// Latency and bandwidth terms of one algorithm instance, before the protocol is applied.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Terms {
    /// Sequential steps whose slowest hop is inside a node.
    pub intra_steps: f64,
    /// Sequential steps whose slowest hop crosses the network.
    pub inter_steps: f64,
    /// Bandwidth seconds at the full (Simple-protocol) effective bandwidth.
    pub bw_secs: f64,
    /// Fixed extra latency (in-switch set-up).
    pub extra: f64,
    /// The low-latency protocol can run this algorithm (not for in-switch reduction).
    pub ll: bool,
}

/// How a step uses the intra-node fabric (matters only on full-mesh and ring fabrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pattern {
    /// Neighbour-to-neighbour on a (logical) ring; several edge-disjoint rings where possible.
    Ring,
    /// Every rank talks to all group peers at once.
    AllPeers,
    /// Every rank talks to one (arbitrary) peer per step.
    OnePeer,
}

/// Group shape in the form the formulas use.
#[derive(Debug, Clone, Copy)]
struct Shape {
    n: u32,
    r: u32,
    nodes: u32,
    inv_n: f64,
    inv_r: f64,
    inv_nodes: f64,
}

impl Shape {
    fn of(g: GroupPlacement) -> Shape {
        let n = g.size.max(1);
        let r = g.ranks_per_node.clamp(1, n);
        let nodes = g.nodes.max(1);
        Shape {
            n,
            r,
            nodes,
            inv_n: 1.0 / f64::from(n),
            inv_r: 1.0 / f64::from(r),
            inv_nodes: 1.0 / f64::from(nodes),
        }
    }
    fn nf(self) -> f64 {
        f64::from(self.n)
    }
    fn rf(self) -> f64 {
        f64::from(self.r)
    }
    fn nodes_f(self) -> f64 {
        f64::from(self.nodes)
    }
    fn multi(self) -> bool {
        self.nodes > 1
    }
}

/// ⌈log2 x⌉ for x ≥ 1 (0 for x ≤ 1).
#[inline]
fn ceil_log2(x: u32) -> u32 {
    if x <= 1 {
        0
    } else {
        32 - (x - 1).leading_zeros()
    }
}

/// Largest power of two ≤ x (x ≥ 1).
#[inline]
fn floor_pow2(x: u32) -> u32 {
    if x == 0 {
        1
    } else {
        1 << (31 - x.leading_zeros())
    }
}

/// The algorithms each collective offers, in report order.
pub fn algorithms_of(op: Collective) -> &'static [Algorithm] {
    use Algorithm::*;
    match op {
        Collective::AllReduce => &[
            Ring,
            Direct,
            Tree,
            DoubleBinaryTree,
            HalvingDoubling,
            Hierarchical,
            InSwitch,
        ],
        Collective::AllGather | Collective::ReduceScatter => {
            &[Ring, Direct, HalvingDoubling, Hierarchical, InSwitch]
        }
        Collective::AllToAll => &[Direct, Ring, Bruck, Hierarchical],
        Collective::Broadcast | Collective::Reduce => &[Ring, Tree],
        Collective::Scatter | Collective::Gather => &[Ring, Tree, Direct],
        Collective::SendRecv => &[PointToPoint],
        Collective::Barrier => &[Tree, Direct],
    }
}

/// A small fixed list of (algorithm, time) results; no allocation.
#[derive(Debug, Clone, Copy)]
pub struct Alternatives {
    items: [CollectiveCost; MAX_ALGORITHMS],
    len: usize,
}

impl Alternatives {
    /// The valid algorithms with their times, in [`algorithms_of`] order.
    pub fn as_slice(&self) -> &[CollectiveCost] {
        &self.items[..self.len]
    }
    /// Iterate over the valid algorithms.
    pub fn iter(&self) -> std::slice::Iter<'_, CollectiveCost> {
        self.as_slice().iter()
    }
    /// The cheapest one (ties: the earlier in report order).
    pub fn cheapest(&self) -> Option<CollectiveCost> {
        let (first, rest) = self.as_slice().split_first()?;
        let mut best = *first;
        for c in rest {
            if c.time < best.time {
                best = *c;
            }
        }
        Some(best)
    }
    /// The entry of `algorithm`, if valid here.
    pub fn get(&self, algorithm: Algorithm) -> Option<CollectiveCost> {
        self.iter().find(|c| c.algorithm == algorithm).copied()
    }
}

impl<'a> IntoIterator for &'a Alternatives {
    type Item = &'a CollectiveCost;
    type IntoIter = std::slice::Iter<'a, CollectiveCost>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl CostModel {
    /// Precompute the constants of `cluster`: bandwidths × `bwurate`, latencies.
    pub fn new(cluster: &Cluster) -> CostModel {
        let u = cluster.efficiency.bwurate;
        let b_intra = cluster.node.intra_bw * u;
        let b_inter = cluster.network.inter_bw * u;
        let oversubscription = cluster.network.oversubscription.max(1.0);
        let rail = cluster.network.topology == NetTopology::RailOptimized;
        CostModel {
            // The cost model's "node" is the NVLink domain (a GB200 NVL72 rack, not its tray).
            gpus_per_node: cluster.domain_gpus(),
            fabric: cluster.node.fabric,
            topology: cluster.network.topology,
            b_intra,
            b_inter,
            oversubscription,
            spb_intra: 1.0 / b_intra,
            spb_inter_aligned: if rail {
                1.0 / b_inter
            } else {
                oversubscription / b_inter
            },
            spb_inter_cross: oversubscription / b_inter,
            spb_in_switch: 1.0
                / (b_intra
                    * if cluster.gpu.arch.is_blackwell() {
                        IN_SWITCH_EFFICIENCY_BLACKWELL
                    } else {
                        IN_SWITCH_EFFICIENCY
                    }),
            in_switch: cluster.node.in_switch_reduction,
            in_network: cluster.network.in_network_reduction,
            ll128: cluster.node.fabric != IntraFabric::Pcie,
            library: cluster.library,
            start_lat: cluster.efficiency.start_lat,
            sync_lat: cluster.efficiency.sync_lat,
            hop_intra: cluster.node.intra_latency,
            // A step that crosses the network also crosses the node: never cheaper than a
            // step inside it.
            hop_inter: cluster.network.link_delay.max(cluster.node.intra_latency),
            cpufetch: cluster.efficiency.cpufetch,
        }
    }

    /// The same model with `library`'s algorithms for [`AlgoMode::Cheapest`].
    pub fn with_library(mut self, library: CollectiveLibrary) -> CostModel {
        self.library = library;
        self
    }

    /// The collective library whose algorithms [`AlgoMode::Cheapest`] picks from.
    pub fn library(&self) -> CollectiveLibrary {
        self.library
    }

    /// Effective intra-node bandwidth per rank (`intra_bw × bwurate`), bytes/s.
    pub fn intra_bandwidth(&self) -> f64 {
        self.b_intra
    }

    /// Effective NIC share per rank (`inter_bw × bwurate`), bytes/s.
    pub fn inter_bandwidth(&self) -> f64 {
        self.b_inter
    }

    /// Time of one collective instance with the algorithm picked by `mode`.
    ///
    /// `bytes` follows the nccl-tests "size" convention (collectives.md §1):
    /// AllReduce/Broadcast/Reduce: the buffer each rank holds; AllGather: the full gathered
    /// output; ReduceScatter: the full input per rank; AllToAll: each rank's total send buffer;
    /// Scatter/Gather: the full (root) buffer; SendRecv: the message; Barrier: ignored.
    /// A group of one rank costs nothing.
    #[inline]
    pub fn collective(
        &self,
        op: Collective,
        group: GroupPlacement,
        bytes: f64,
        mode: AlgoMode,
    ) -> CollectiveCost {
        self.choose(op, group, bytes, bytes, mode)
    }

    /// Every valid algorithm of the model's library with its time, in
    /// [`library_algorithms`] order.
    pub fn alternatives(&self, op: Collective, group: GroupPlacement, bytes: f64) -> Alternatives {
        self.alternatives_unequal(op, group, bytes, bytes, 0.0)
    }

    /// Unequal all-to-all (EP with load imbalance): the slowest rank's send/receive volume
    /// `max_rank_bytes` decides every phase a rank does alone; the hierarchical algorithm's
    /// inter-node phase moves a node's aggregate, `max + (r−1)·mean`, over the node's `r` NIC
    /// shares. Adds seed 000 §7.5's `cpufetch` (the host learns the split sizes) once.
    pub fn alltoall_unequal(
        &self,
        group: GroupPlacement,
        max_rank_bytes: f64,
        mean_rank_bytes: f64,
        mode: AlgoMode,
    ) -> CollectiveCost {
        let mut c = self.choose(
            Collective::AllToAll,
            group,
            max_rank_bytes,
            mean_rank_bytes.min(max_rank_bytes),
            mode,
        );
        if group.size > 1 {
            c.time += self.cpufetch;
        }
        c
    }

    /// Every valid algorithm of an unequal all-to-all (see [`CostModel::alltoall_unequal`]).
    pub fn alternatives_alltoall_unequal(
        &self,
        group: GroupPlacement,
        max_rank_bytes: f64,
        mean_rank_bytes: f64,
    ) -> Alternatives {
        let extra = if group.size > 1 { self.cpufetch } else { 0.0 };
        self.alternatives_unequal(
            Collective::AllToAll,
            group,
            max_rank_bytes,
            mean_rank_bytes.min(max_rank_bytes),
            extra,
        )
    }

    /// Time of `algorithm` for this instance, or `None` where it is not valid: NCCL's form
    /// and protocols where the library is NCCL and NCCL has the algorithm, the seeds' form
    /// otherwise.
    #[inline]
    pub fn time_of(
        &self,
        op: Collective,
        algorithm: Algorithm,
        group: GroupPlacement,
        bytes: f64,
    ) -> Option<CollectiveCost> {
        self.eval(op, algorithm, Shape::of(group), bytes, bytes)
    }

    /// The latency/bandwidth terms of one algorithm, or `None` where it is not valid
    /// (for reports and tests).
    pub fn terms(
        &self,
        op: Collective,
        algorithm: Algorithm,
        group: GroupPlacement,
        bytes: f64,
    ) -> Option<Terms> {
        let s = Shape::of(group);
        if s.n <= 1 {
            return None;
        }
        if self.nccl_has(op, algorithm) {
            return self
                .nccl_terms(op, algorithm, s, bytes, bytes)
                .map(|(t, _)| t);
        }
        self.terms_of(op, algorithm, s, bytes, bytes)
    }

    /// The library is NCCL and NCCL has `a` for `op`.
    #[inline]
    fn nccl_has(&self, op: Collective, a: Algorithm) -> bool {
        self.library == CollectiveLibrary::Nccl && nccl_algorithms_of(op).contains(&a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs() {
        assert_eq!(ceil_log2(1), 0);
        assert_eq!(ceil_log2(2), 1);
        assert_eq!(ceil_log2(5), 3);
        assert_eq!(ceil_log2(8), 3);
        assert_eq!(floor_pow2(1), 1);
        assert_eq!(floor_pow2(6), 4);
        assert_eq!(floor_pow2(8), 8);
    }
}
