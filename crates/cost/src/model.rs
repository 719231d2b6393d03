//! The α-β collective model: [`CostModel`] holds a cluster's constants; every (collective,
//! algorithm) pair is reduced to a [`Terms`] (latency steps on each fabric + bandwidth seconds),
//! which one function turns into a time for each protocol.
//!
//! Notation in the comments: `S` bytes (nccl-tests "size" convention, see
//! [`CostModel::collective`]), `n` ranks, `r` ranks per node, `N` nodes, `B_i` effective
//! intra-node bandwidth per rank, `B_e` effective NIC share per rank, `α` the per-step latency.

use autoplan_cluster::{Cluster, GroupPlacement, IntraFabric, NetTopology};

use crate::{AlgoMode, Algorithm, Collective, CollectiveCost, Protocol};

/// Fraction of the link bandwidth the low-latency protocol carries: NCCL's LL protocol stores
/// 8-byte lines of 4 data bytes + a 4-byte flag (collectives.md §2.5.5, `device.h`).
pub const LL_BANDWIDTH_FRACTION: f64 = 0.5;
/// In-switch (NVLS) reduction efficiency relative to ring bandwidth: NCCL `nvlsEff` for Hopper
/// (tuning.cc, collectives.md §2.3.3). With it, 8×H100 all-reduce predicts algbw ≈ 270 GB/s
/// (measured 273–275, collectives.md §4.1).
pub const IN_SWITCH_EFFICIENCY: f64 = 0.85;
/// Fixed set-up latency of an in-switch (NVLS) collective, seconds: NCCL
/// `hwLat[NVLINK][NVLS][Simple]` = 25 µs (tuning.cc v2.30, collectives.md §2.4).
pub const IN_SWITCH_LATENCY: f64 = 25e-6;
/// Most algorithms any collective has (all-reduce: 7).
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
    /// Seconds per byte of in-switch reduction (1 / (`b_intra` × IN_SWITCH_EFFICIENCY)).
    spb_in_switch: f64,
    in_switch: bool,
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
            gpus_per_node: cluster.node.gpus_per_node.max(1),
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
            spb_in_switch: 1.0 / (b_intra * IN_SWITCH_EFFICIENCY),
            in_switch: cluster.node.in_switch_reduction,
            start_lat: cluster.efficiency.start_lat,
            sync_lat: cluster.efficiency.sync_lat,
            hop_intra: cluster.node.intra_latency,
            // A step that crosses the network also crosses the node: never cheaper than a
            // step inside it.
            hop_inter: cluster.network.link_delay.max(cluster.node.intra_latency),
            cpufetch: cluster.efficiency.cpufetch,
        }
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

    /// Every valid algorithm with its time, in [`algorithms_of`] order.
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

    /// Time of `algorithm` for this instance, or `None` where it is not valid.
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
        self.terms_of(op, algorithm, s, bytes, bytes)
    }

    fn alternatives_unequal(
        &self,
        op: Collective,
        group: GroupPlacement,
        smax: f64,
        smean: f64,
        extra: f64,
    ) -> Alternatives {
        let s = Shape::of(group);
        let mut out = Alternatives {
            items: [CollectiveCost::ZERO; MAX_ALGORITHMS],
            len: 0,
        };
        if s.n <= 1 {
            for &a in algorithms_of(op) {
                out.items[out.len] = CollectiveCost {
                    algorithm: a,
                    protocol: Protocol::LowLatency,
                    time: 0.0,
                };
                out.len += 1;
            }
            return out;
        }
        self.visit(
            op,
            s,
            smax,
            smean,
            |_| true,
            |mut c| {
                c.time += extra;
                out.items[out.len] = c;
                out.len += 1;
            },
        );
        out
    }

    #[inline]
    fn choose(
        &self,
        op: Collective,
        group: GroupPlacement,
        smax: f64,
        smean: f64,
        mode: AlgoMode,
    ) -> CollectiveCost {
        let s = Shape::of(group);
        if s.n <= 1 {
            return CollectiveCost {
                algorithm: algorithms_of(op)[0],
                protocol: Protocol::LowLatency,
                time: 0.0,
            };
        }
        match mode {
            AlgoMode::Cheapest => self.cheapest(op, s, smax, smean, |_| true),
            AlgoMode::Fixed(a) => self.only(op, a, s, smax, smean),
            AlgoMode::NcclLike => self.only(op, self.seed_rule(op, s), s, smax, smean),
            AlgoMode::NcclTuner => {
                let c = self.cheapest(op, s, smax, smean, |a| nccl_implements(op, a, s));
                if c.time.is_finite() {
                    c
                } else {
                    self.cheapest(op, s, smax, smean, |_| true)
                }
            }
        }
    }

    /// `a` where it is valid, otherwise the cheapest valid algorithm.
    #[inline]
    fn only(
        &self,
        op: Collective,
        a: Algorithm,
        s: Shape,
        smax: f64,
        smean: f64,
    ) -> CollectiveCost {
        let c = self.cheapest(op, s, smax, smean, |x| x == a);
        if c.algorithm == a && c.time < f64::INFINITY {
            c
        } else {
            self.cheapest(op, s, smax, smean, |_| true)
        }
    }

    /// The cheapest allowed algorithm. Unrolled per collective so that each formula is
    /// inlined with its algorithm known and shared subexpressions are computed once (this is
    /// the search's hot path: `cargo bench --bench cost`). Same list and order as
    /// [`CostModel::visit`] (a property test checks they agree); a shared closure-based
    /// version measured 40% slower.
    #[inline]
    fn cheapest(
        &self,
        op: Collective,
        s: Shape,
        smax: f64,
        smean: f64,
        allowed: impl Fn(Algorithm) -> bool,
    ) -> CollectiveCost {
        use Algorithm::*;
        let mut best = CollectiveCost {
            algorithm: algorithms_of(op)[0],
            protocol: Protocol::Simple,
            time: f64::INFINITY,
        };
        let sz = smax.max(0.0);
        let mean = smean.max(0.0);
        macro_rules! consider {
            ($a:expr, $terms:expr) => {
                if allowed($a) {
                    if let Some(t) = $terms {
                        let (time, protocol) = self.finish(t);
                        if time < best.time {
                            best = CollectiveCost {
                                algorithm: $a,
                                protocol,
                                time,
                            };
                        }
                    }
                }
            };
        }
        // Same order as `algorithms_of` (ties keep the earlier one).
        match op {
            Collective::AllReduce => {
                consider!(Ring, self.allreduce(Ring, s, sz));
                consider!(Direct, self.allreduce(Direct, s, sz));
                consider!(Tree, self.allreduce(Tree, s, sz));
                consider!(DoubleBinaryTree, self.allreduce(DoubleBinaryTree, s, sz));
                consider!(HalvingDoubling, self.allreduce(HalvingDoubling, s, sz));
                consider!(Hierarchical, self.allreduce(Hierarchical, s, sz));
                consider!(InSwitch, self.allreduce(InSwitch, s, sz));
            }
            Collective::AllGather | Collective::ReduceScatter => {
                consider!(Ring, self.allgather(Ring, s, sz));
                consider!(Direct, self.allgather(Direct, s, sz));
                consider!(HalvingDoubling, self.allgather(HalvingDoubling, s, sz));
                consider!(Hierarchical, self.allgather(Hierarchical, s, sz));
                consider!(InSwitch, self.allgather(InSwitch, s, sz));
            }
            Collective::AllToAll => {
                consider!(Direct, self.alltoall(Direct, s, sz, mean));
                consider!(Ring, self.alltoall(Ring, s, sz, mean));
                consider!(Bruck, self.alltoall(Bruck, s, sz, mean));
                consider!(Hierarchical, self.alltoall(Hierarchical, s, sz, mean));
            }
            Collective::Broadcast | Collective::Reduce => {
                consider!(Ring, self.broadcast(Ring, s, sz));
                consider!(Tree, self.broadcast(Tree, s, sz));
            }
            Collective::Scatter | Collective::Gather => {
                consider!(Ring, self.scatter(Ring, s, sz));
                consider!(Tree, self.scatter(Tree, s, sz));
                consider!(Direct, self.scatter(Direct, s, sz));
            }
            Collective::SendRecv => consider!(PointToPoint, self.sendrecv(PointToPoint, s, sz)),
            Collective::Barrier => {
                consider!(Tree, self.barrier(Tree, s));
                consider!(Direct, self.barrier(Direct, s));
            }
        }
        best
    }

    /// Calls `f` with every valid allowed algorithm's cost, in [`algorithms_of`] order
    /// (unrolled like [`CostModel::cheapest`]).
    #[inline(always)]
    fn visit(
        &self,
        op: Collective,
        s: Shape,
        smax: f64,
        smean: f64,
        allowed: impl Fn(Algorithm) -> bool,
        mut f: impl FnMut(CollectiveCost),
    ) {
        use Algorithm::*;
        let sz = smax.max(0.0);
        let mean = smean.max(0.0);
        macro_rules! consider {
            ($a:expr, $terms:expr) => {
                if allowed($a) {
                    if let Some(t) = $terms {
                        let (time, protocol) = self.finish(t);
                        f(CollectiveCost {
                            algorithm: $a,
                            protocol,
                            time,
                        });
                    }
                }
            };
        }
        match op {
            Collective::AllReduce => {
                consider!(Ring, self.allreduce(Ring, s, sz));
                consider!(Direct, self.allreduce(Direct, s, sz));
                consider!(Tree, self.allreduce(Tree, s, sz));
                consider!(DoubleBinaryTree, self.allreduce(DoubleBinaryTree, s, sz));
                consider!(HalvingDoubling, self.allreduce(HalvingDoubling, s, sz));
                consider!(Hierarchical, self.allreduce(Hierarchical, s, sz));
                consider!(InSwitch, self.allreduce(InSwitch, s, sz));
            }
            Collective::AllGather | Collective::ReduceScatter => {
                consider!(Ring, self.allgather(Ring, s, sz));
                consider!(Direct, self.allgather(Direct, s, sz));
                consider!(HalvingDoubling, self.allgather(HalvingDoubling, s, sz));
                consider!(Hierarchical, self.allgather(Hierarchical, s, sz));
                consider!(InSwitch, self.allgather(InSwitch, s, sz));
            }
            Collective::AllToAll => {
                consider!(Direct, self.alltoall(Direct, s, sz, mean));
                consider!(Ring, self.alltoall(Ring, s, sz, mean));
                consider!(Bruck, self.alltoall(Bruck, s, sz, mean));
                consider!(Hierarchical, self.alltoall(Hierarchical, s, sz, mean));
            }
            Collective::Broadcast | Collective::Reduce => {
                consider!(Ring, self.broadcast(Ring, s, sz));
                consider!(Tree, self.broadcast(Tree, s, sz));
            }
            Collective::Scatter | Collective::Gather => {
                consider!(Ring, self.scatter(Ring, s, sz));
                consider!(Tree, self.scatter(Tree, s, sz));
                consider!(Direct, self.scatter(Direct, s, sz));
            }
            Collective::SendRecv => consider!(PointToPoint, self.sendrecv(PointToPoint, s, sz)),
            Collective::Barrier => {
                consider!(Tree, self.barrier(Tree, s));
                consider!(Direct, self.barrier(Direct, s));
            }
        }
    }

    /// Seed 000 §6.6 "选择建议" (AllReduce) and §6.7 "NCCL 的实际选择" (All-to-All); the seed
    /// gives no rule for the other collectives, so they take what NCCL uses: ring (seed §7.2
    /// recommends ring for AllGather/ReduceScatter), tree for Barrier, point-to-point for SendRecv.
    fn seed_rule(&self, op: Collective, s: Shape) -> Algorithm {
        use Algorithm::*;
        let full_mesh =
            !s.multi() && matches!(self.fabric, IntraFabric::Nvswitch | IntraFabric::FullMesh);
        match op {
            Collective::AllReduce => {
                if s.n <= 8 {
                    if full_mesh {
                        Direct
                    } else {
                        Ring
                    }
                } else if s.n <= 32 {
                    if self.topology == NetTopology::FatTree && s.n.is_power_of_two() {
                        HalvingDoubling
                    } else {
                        Ring
                    }
                } else if s.multi() {
                    DoubleBinaryTree
                } else {
                    Ring
                }
            }
            Collective::AllToAll => {
                // "异构网络：拓扑感知算法（NVLink 内用 Pairwise，跨节点用 Ring）" first, then by size.
                if s.multi() && s.r > 1 {
                    Hierarchical
                } else if s.n <= 8 {
                    Direct
                } else if s.n <= 32 {
                    Bruck
                } else {
                    Ring
                }
            }
            Collective::SendRecv => PointToPoint,
            Collective::Barrier => Tree,
            _ => Ring,
        }
    }

    #[inline]
    fn eval(
        &self,
        op: Collective,
        a: Algorithm,
        s: Shape,
        smax: f64,
        smean: f64,
    ) -> Option<CollectiveCost> {
        if s.n <= 1 {
            return if algorithms_of(op).contains(&a) {
                Some(CollectiveCost {
                    algorithm: a,
                    protocol: Protocol::LowLatency,
                    time: 0.0,
                })
            } else {
                None
            };
        }
        let t = self.terms_of(op, a, s, smax, smean)?;
        let (time, protocol) = self.finish(t);
        Some(CollectiveCost {
            algorithm: a,
            protocol,
            time,
        })
    }

    /// Terms → time. Every call pays `start_lat` once (seed §5.5: "通信操作启动的软件开销", the
    /// software cost of starting a communication operation). Every step pays its hop latency
    /// (`intra_latency` inside a node, `link_delay` across the network, seed §5.4); the Simple
    /// protocol also pays `sync_lat` per step (seed §5.5: "Tree等多步算法的固定成本累加", the
    /// per-step synchronisation), which the LL protocol avoids by carrying its flag inline, at
    /// half the bandwidth (NCCL, collectives.md §2.5.5). The cheaper protocol wins, as in
    /// NCCL's tuner. Seed §6.4 charges `start_lat + sync_lat` on every tree step; measured
    /// A100 ring latencies (collectives_measured.csv c15–c17: 10 / 16.9 / 33.7 µs for 2 / 6 /
    /// 14 steps) show one fixed ≈6 µs plus ≈2 µs per step, so start is charged once.
    #[inline(always)]
    fn finish(&self, t: Terms) -> (f64, Protocol) {
        let simple = self.start_lat
            + t.intra_steps * (self.hop_intra + self.sync_lat)
            + t.inter_steps * (self.hop_inter + self.sync_lat)
            + t.extra
            + t.bw_secs;
        if t.ll {
            let ll = self.start_lat
                + t.intra_steps * self.hop_intra
                + t.inter_steps * self.hop_inter
                + t.bw_secs / LL_BANDWIDTH_FRACTION;
            if ll < simple {
                return (ll, Protocol::LowLatency);
            }
        }
        (simple, Protocol::Simple)
    }

    // ---------------------------------------------------------------- bandwidths

    /// Seconds per byte (inverse bandwidth) per rank inside a node for a traffic pattern among
    /// `r` ranks. NVSwitch and PCIe (switched): every pattern gets `B_i`. Full mesh:
    /// `intra_bw` is the GPU's total over `g−1` links, so a pattern reaching `p` peers at once
    /// gets `B_i·p/(g−1)` (rings: edge-disjoint rings over the group's links). Ring fabric:
    /// neighbour traffic gets `B_i`; other patterns cross ≈ r/4 hops on average
    /// (bidirectional ring), dividing the bandwidth.
    #[inline]
    fn spb_intra(&self, p: Pattern, r: u32) -> f64 {
        match self.fabric {
            IntraFabric::Nvswitch | IntraFabric::Pcie => self.spb_intra,
            IntraFabric::FullMesh => {
                let g = f64::from(self.gpus_per_node.max(2) - 1);
                match p {
                    Pattern::Ring | Pattern::AllPeers => {
                        self.spb_intra * (g / f64::from(r.max(2) - 1)).max(1.0)
                    }
                    Pattern::OnePeer => self.spb_intra * g,
                }
            }
            IntraFabric::Ring => match p {
                Pattern::Ring => self.spb_intra,
                _ => self.spb_intra * (f64::from(r) * 0.25).max(1.0),
            },
        }
    }

    /// Seconds per byte of a rank's NIC share. `rail_aligned`: every rank talks to ranks of
    /// the same local index on other nodes (rings, trees, hierarchical inter phases), which on
    /// a rail-optimised network stays on its rail switch; other traffic (direct, pairwise,
    /// Bruck) climbs to the upper tiers and is divided by `oversubscription`. On fat-tree,
    /// spine-leaf and torus networks every inter-node transfer is assumed to cross the upper
    /// tiers (no leaf size is known), so all of it pays `oversubscription`.
    #[inline]
    fn spb_inter(&self, rail_aligned: bool) -> f64 {
        if rail_aligned {
            self.spb_inter_aligned
        } else {
            self.spb_inter_cross
        }
    }

    /// Seconds per byte of a channelised ring/tree (NCCL: one ring or tree per channel, the
    /// channels of a node use all its NICs, collectives.md §2.3.3): inside a node `B_i`;
    /// across nodes `min(B_i, r·B_e)` — the group's `r` ranks of a node own `r` NIC shares.
    #[inline]
    fn spb_flat(&self, s: Shape) -> f64 {
        if !s.multi() {
            self.spb_intra(Pattern::Ring, s.r)
        } else if s.r == 1 {
            self.spb_inter(true)
        } else {
            self.spb_intra(Pattern::Ring, s.r)
                .max(s.inv_r * self.spb_inter(true))
        }
    }

    /// Steps of a flat ring with `total` steps: NCCL counts `per_pass·(N−1)` of them as
    /// network steps (`nInterSteps`, tuning.cc, collectives.md §2.4), the rest intra-node.
    #[inline]
    fn ring_steps(s: Shape, total: f64, passes: f64) -> (f64, f64) {
        if s.multi() {
            let inter = (passes * (s.nodes_f() - 1.0)).min(total);
            (total - inter, inter)
        } else {
            (total, 0.0)
        }
    }

    /// Steps of a locality-aware binary tree: ⌈log2 r⌉ levels inside the node, ⌈log2 N⌉ across.
    #[inline]
    fn tree_levels(s: Shape) -> (f64, f64) {
        (f64::from(ceil_log2(s.r)), f64::from(ceil_log2(s.nodes)))
    }

    /// One step that is a network step when the group spans nodes.
    #[inline]
    fn one_step(s: Shape) -> (f64, f64) {
        if s.multi() {
            (0.0, 1.0)
        } else {
            (1.0, 0.0)
        }
    }

    /// Bandwidth seconds of a "send `intra` bytes to node-mates and `inter` bytes off-node at
    /// once" phase: the two fabrics work in parallel, the slower decides.
    #[inline]
    fn split(&self, s: Shape, intra: f64, inter: f64, p: Pattern, rail_aligned: bool) -> f64 {
        let ti = if intra > 0.0 {
            intra * self.spb_intra(p, s.r)
        } else {
            0.0
        };
        let te = if inter > 0.0 {
            inter * self.spb_inter(rail_aligned)
        } else {
            0.0
        };
        ti.max(te)
    }

    // ---------------------------------------------------------------- formulas

    fn terms_of(
        &self,
        op: Collective,
        a: Algorithm,
        s: Shape,
        smax: f64,
        smean: f64,
    ) -> Option<Terms> {
        let bytes = smax.max(0.0);
        match op {
            Collective::AllReduce => self.allreduce(a, s, bytes),
            Collective::AllGather | Collective::ReduceScatter => self.allgather(a, s, bytes),
            Collective::AllToAll => self.alltoall(a, s, bytes, smean.max(0.0)),
            Collective::Broadcast | Collective::Reduce => self.broadcast(a, s, bytes),
            Collective::Scatter | Collective::Gather => self.scatter(a, s, bytes),
            Collective::SendRecv => self.sendrecv(a, s, bytes),
            Collective::Barrier => self.barrier(a, s),
        }
    }

    #[inline(always)]
    fn allreduce(&self, a: Algorithm, s: Shape, sz: f64) -> Option<Terms> {
        let (n, nf, rf, nn) = (s.n, s.nf(), s.rf(), s.nodes_f());
        let t = match a {
            // Seed §6.2: T = 2(n−1)/n·S/(bw·bwurate) + 2(n−1)·latency.
            Algorithm::Ring => {
                let (i, e) = Self::ring_steps(s, 2.0 * (nf - 1.0), 2.0);
                Terms {
                    intra_steps: i,
                    inter_steps: e,
                    bw_secs: 2.0 * (nf - 1.0) * s.inv_n * sz * self.spb_flat(s),
                    extra: 0.0,
                    ll: true,
                }
            }
            // Seed §6.3 (full-mesh reduce + broadcast): every rank sends its whole buffer to
            // each of the n−1 others in one round. The seed writes 2(n−1)·S/bw, counting the
            // received bytes against the same one-direction bandwidth, while its ring formula
            // (§6.2) counts only sent bytes; links are full duplex, so we count one direction:
            // (n−1)·S, of which (r−1)·S stays in the node and (n−r)·S leaves it.
            Algorithm::Direct => {
                let (i, e) = Self::one_step(s);
                Terms {
                    intra_steps: i,
                    inter_steps: e,
                    bw_secs: self.split(
                        s,
                        (rf - 1.0) * sz,
                        (nf - rf) * sz,
                        Pattern::AllPeers,
                        false,
                    ),
                    extra: 0.0,
                    ll: true,
                }
            }
            // Seed §6.4 (single tree): latency 2⌈log2 n⌉ steps (reduce up, broadcast down).
            // Bandwidth: the seed writes 2S/bw from a leaf's view; the bottleneck is an inner
            // rank with two children, which receives 2S in the reduce and sends 2S in the
            // broadcast, hence 4S/bw. We double the seed's leaf figure for both trees so that
            // its stated relation (double tree = half the single tree's time, §6.5) holds.
            Algorithm::Tree | Algorithm::DoubleBinaryTree => {
                let (li, le) = Self::tree_levels(s);
                let factor = if a == Algorithm::Tree { 4.0 } else { 2.0 };
                Terms {
                    intra_steps: 2.0 * li,
                    inter_steps: 2.0 * le,
                    // Seed §6.5 (double binary tree): the prose gives S/bw + 2⌈log2 n⌉·latency
                    // (the code line's stray sqrt over the latency term is a typo; we follow the
                    // prose's latency). S/bw would beat the all-reduce lower bound
                    // 2(n−1)/n·S/bw for n > 2 (Patarasuk & Yuan 2009); each rank sends S and
                    // receives S in *each* phase, hence 2S/bw — NCCL's own model
                    // (tuning.cc: Tree all-reduce algBw = busBw/2).
                    bw_secs: factor * sz * self.spb_flat(s),
                    extra: 0.0,
                    ll: true,
                }
            }
            // Seed §6.6: T = 2(n−1)/n·S/bw + 2·log2 n·latency, for n a power of two. Steps at
            // distance 1, 2, 4, … (partners inside the node first, with the biggest halves),
            // so the network carries only S·(1/r − 1/n) per phase — locality-aware like
            // hierarchical. Not a power of two: the n − n' extra ranks (n' the largest power
            // of two ≤ n) first fold their buffer into a partner and get the result back at
            // the end (Thakur, Rabenseifner & Gropp 2005): +2 steps and +2·S/bw.
            Algorithm::HalvingDoubling => {
                let np = floor_pow2(n);
                let rp = floor_pow2(s.r.min(np));
                let npf = f64::from(np);
                let rpf = f64::from(rp);
                let li = f64::from(ceil_log2(rp));
                let le = f64::from(ceil_log2(np / rp));
                let intra = sz * (1.0 - 1.0 / rpf) * self.spb_intra(Pattern::OnePeer, s.r);
                let inter = if le > 0.0 {
                    sz * (1.0 / rpf - 1.0 / npf) * self.spb_inter(true)
                } else {
                    0.0
                };
                let mut t = Terms {
                    intra_steps: 2.0 * li,
                    inter_steps: 2.0 * le,
                    bw_secs: 2.0 * (intra + inter),
                    extra: 0.0,
                    ll: true,
                };
                if np != n {
                    let fold_spb = if s.multi() {
                        self.spb_inter(false)
                    } else {
                        self.spb_intra(Pattern::OnePeer, s.r)
                    };
                    let (i, e) = Self::one_step(s);
                    t.intra_steps += 2.0 * i;
                    t.inter_steps += 2.0 * e;
                    t.bw_secs += 2.0 * sz * fold_spb;
                }
                t
            }
            // Reduce-scatter inside the node (ring over r) → all-reduce of S/r across nodes
            // (ring over N, each rank on its own NIC share, rail-aligned) → all-gather inside
            // the node. Phases run one after another; one launch.
            Algorithm::Hierarchical => {
                if !s.multi() || s.r < 2 {
                    return None;
                }
                let spb_i = self.spb_intra(Pattern::Ring, s.r);
                Terms {
                    intra_steps: 2.0 * (rf - 1.0),
                    inter_steps: 2.0 * (nn - 1.0),
                    bw_secs: 2.0 * (rf - 1.0) * s.inv_r * sz * spb_i
                        + 2.0 * (nn - 1.0) * s.inv_nodes * (sz * s.inv_r) * self.spb_inter(true),
                    extra: 0.0,
                    ll: true,
                }
            }
            // NVLS: each rank pushes its S into the switch, which reduces and multicasts; a rank
            // sends S + S/r and receives S/r + S (Calculon's all_reduce [1, 1] coefficient,
            // calculon.md), at IN_SWITCH_EFFICIENCY of the link. Across nodes (NCCL NVLSTree):
            // in-switch inside the node + ring all-reduce of S/r between nodes.
            Algorithm::InSwitch => {
                if !self.in_switch || s.r < 2 {
                    return None;
                }
                let spb_sw = self.spb_in_switch;
                let mut t = Terms {
                    intra_steps: 2.0,
                    inter_steps: 0.0,
                    bw_secs: (rf + 1.0) * s.inv_r * sz * spb_sw,
                    extra: IN_SWITCH_LATENCY,
                    ll: false,
                };
                if s.multi() {
                    t.inter_steps = 2.0 * (nn - 1.0);
                    t.bw_secs +=
                        2.0 * (nn - 1.0) * s.inv_nodes * (sz * s.inv_r) * self.spb_inter(true);
                }
                t
            }
            Algorithm::Bruck | Algorithm::PointToPoint => return None,
        };
        Some(t)
    }

    /// AllGather (S = full output) and ReduceScatter (S = full input): mirror images with the
    /// same cost (seed §2.4/§2.6: per-rank volume (n−1)/n·S each way).
    #[inline(always)]
    fn allgather(&self, a: Algorithm, s: Shape, sz: f64) -> Option<Terms> {
        let (n, nf, rf, nn) = (s.n, s.nf(), s.rf(), s.nodes_f());
        let t = match a {
            // Ring: n−1 steps of S/n (seed §6.2, one phase).
            Algorithm::Ring => {
                let (i, e) = Self::ring_steps(s, nf - 1.0, 1.0);
                Terms {
                    intra_steps: i,
                    inter_steps: e,
                    bw_secs: (nf - 1.0) * s.inv_n * sz * self.spb_flat(s),
                    extra: 0.0,
                    ll: true,
                }
            }
            // Direct: each rank sends its S/n shard to all n−1 peers at once (one round).
            Algorithm::Direct => {
                let (i, e) = Self::one_step(s);
                Terms {
                    intra_steps: i,
                    inter_steps: e,
                    bw_secs: self.split(
                        s,
                        (rf - 1.0) * s.inv_n * sz,
                        (nf - rf) * s.inv_n * sz,
                        Pattern::AllPeers,
                        false,
                    ),
                    extra: 0.0,
                    ll: true,
                }
            }
            // Recursive doubling (AG) / halving (RS), far partners with the small blocks first,
            // so the network carries (N'−1)/n'·S and the node (n'−N')/n'·S. Not a power of two:
            // extra ranks hand their shard to a partner first and receive the result at the
            // end: +2 steps, +(1/n + 1)·S.
            Algorithm::HalvingDoubling => {
                let np = floor_pow2(n);
                let rp = floor_pow2(s.r.min(np));
                let npf = f64::from(np);
                let nodes_p = f64::from(np / rp);
                let li = f64::from(ceil_log2(rp));
                let le = f64::from(ceil_log2(np / rp));
                let intra = sz * (npf - nodes_p) / npf * self.spb_intra(Pattern::OnePeer, s.r);
                let inter = if le > 0.0 {
                    sz * (nodes_p - 1.0) / npf * self.spb_inter(true)
                } else {
                    0.0
                };
                let mut t = Terms {
                    intra_steps: li,
                    inter_steps: le,
                    bw_secs: intra + inter,
                    extra: 0.0,
                    ll: true,
                };
                if np != n {
                    let fold_spb = if s.multi() {
                        self.spb_inter(false)
                    } else {
                        self.spb_intra(Pattern::OnePeer, s.r)
                    };
                    let (i, e) = Self::one_step(s);
                    t.intra_steps += 2.0 * i;
                    t.inter_steps += 2.0 * e;
                    t.bw_secs += (s.inv_n + 1.0) * sz * fold_spb;
                }
                t
            }
            // AG: across nodes among same-local-index ranks first (rail-aligned, S/r per rank
            // gathered from N nodes), then inside the node; RS the reverse. Sequential phases.
            Algorithm::Hierarchical => {
                if !s.multi() || s.r < 2 {
                    return None;
                }
                Terms {
                    intra_steps: rf - 1.0,
                    inter_steps: nn - 1.0,
                    bw_secs: (nn - 1.0) * s.inv_nodes * (sz * s.inv_r) * self.spb_inter(true)
                        + (rf - 1.0) * s.inv_r * sz * self.spb_intra(Pattern::Ring, s.r),
                    extra: 0.0,
                    ll: true,
                }
            }
            // NVLS all-gather / reduce-scatter (NCCL, one node): one multicast step, (n−1)/n·S
            // received per rank at IN_SWITCH_EFFICIENCY.
            Algorithm::InSwitch => {
                if !self.in_switch || s.multi() {
                    return None;
                }
                Terms {
                    intra_steps: 1.0,
                    inter_steps: 0.0,
                    bw_secs: (nf - 1.0) * s.inv_n * sz * self.spb_in_switch,
                    extra: IN_SWITCH_LATENCY,
                    ll: false,
                }
            }
            _ => return None,
        };
        Some(t)
    }

    /// All-to-all, S = each rank's send buffer (S/n per peer); `mean` = mean rank's buffer
    /// (equal to S unless called through `alltoall_unequal`).
    #[inline(always)]
    fn alltoall(&self, a: Algorithm, s: Shape, sz: f64, mean: f64) -> Option<Terms> {
        let (nf, rf, nn) = (s.nf(), s.rf(), s.nodes_f());
        let t = match a {
            // Seed §6.7a pairwise: T = (n−1)/n·S/bw + latency, one round; (r−1)/n·S to node-mates
            // and (n−r)/n·S through the rank's own NIC share (NCCL: all-to-all cannot aggregate
            // NICs, collectives.md §1), cross-rail.
            Algorithm::Direct => {
                let (i, e) = Self::one_step(s);
                Terms {
                    intra_steps: i,
                    inter_steps: e,
                    bw_secs: self.split(
                        s,
                        (rf - 1.0) * s.inv_n * sz,
                        (nf - rf) * s.inv_n * sz,
                        Pattern::AllPeers,
                        false,
                    ),
                    extra: 0.0,
                    ll: true,
                }
            }
            // Seed §6.7b ring: n−1 rounds, each rank sends one S/n block per round:
            // T = (n−1)·(S/n/bw + latency). Round k sends to rank i+k (one connection per rank,
            // "N 条连接"); across nodes every round has ranks whose partner is off-node.
            Algorithm::Ring => {
                let spb = if s.multi() {
                    self.spb_inter(false)
                } else {
                    self.spb_intra(Pattern::OnePeer, s.r)
                };
                let (i, e) = if s.multi() {
                    (0.0, nf - 1.0)
                } else {
                    (nf - 1.0, 0.0)
                };
                Terms {
                    intra_steps: i,
                    inter_steps: e,
                    bw_secs: (nf - 1.0) * (sz * s.inv_n) * spb,
                    extra: 0.0,
                    ll: true,
                }
            }
            // Seed §6.7c Bruck: ⌈log2 n⌉ rounds of ≈S/2: T = log2 n·(S/2/bw + latency).
            Algorithm::Bruck => {
                let k = f64::from(ceil_log2(s.n));
                let spb = if s.multi() {
                    self.spb_inter(false)
                } else {
                    self.spb_intra(Pattern::OnePeer, s.r)
                };
                let (i, e) = if s.multi() { (0.0, k) } else { (k, 0.0) };
                Terms {
                    intra_steps: i,
                    inter_steps: e,
                    bw_secs: k * (sz / 2.0) * spb,
                    extra: 0.0,
                    ll: true,
                }
            }
            // Two-level (Tutel 2DH, DeepEP): inside the node, regroup by destination local index
            // ((r−1)/r·S per rank over NVLink); then each rank exchanges with the same local
            // index on the other N−1 nodes ((N−1)/N of the node's aggregate per NIC share,
            // rail-aligned). With imbalance the node aggregate is max + (r−1)·mean.
            Algorithm::Hierarchical => {
                if !s.multi() || s.r < 2 {
                    return None;
                }
                let node_share = (sz + (rf - 1.0) * mean) * s.inv_r;
                Terms {
                    intra_steps: 1.0,
                    inter_steps: 1.0,
                    bw_secs: (rf - 1.0) * s.inv_r * sz * self.spb_intra(Pattern::AllPeers, s.r)
                        + (nn - 1.0) * s.inv_nodes * node_share * self.spb_inter(true),
                    extra: 0.0,
                    ll: true,
                }
            }
            _ => return None,
        };
        Some(t)
    }

    /// Broadcast / Reduce, S = the buffer.
    #[inline(always)]
    fn broadcast(&self, a: Algorithm, s: Shape, sz: f64) -> Option<Terms> {
        let nf = s.nf();
        let t = match a {
            // Pipelined chain (NCCL ring broadcast): n−1 hops of latency, S/bw.
            Algorithm::Ring => {
                let (i, e) = Self::ring_steps(s, nf - 1.0, 1.0);
                Terms {
                    intra_steps: i,
                    inter_steps: e,
                    bw_secs: sz * self.spb_flat(s),
                    extra: 0.0,
                    ll: true,
                }
            }
            // Pipelined binary tree: ⌈log2 n⌉ levels, inner ranks forward to two children: 2S/bw.
            Algorithm::Tree => {
                let (li, le) = Self::tree_levels(s);
                Terms {
                    intra_steps: li,
                    inter_steps: le,
                    bw_secs: 2.0 * sz * self.spb_flat(s),
                    extra: 0.0,
                    ll: true,
                }
            }
            _ => return None,
        };
        Some(t)
    }

    /// Scatter / Gather, S = the root's full buffer; the root's link is the bottleneck.
    #[inline(always)]
    fn scatter(&self, a: Algorithm, s: Shape, sz: f64) -> Option<Terms> {
        let (nf, rf) = (s.nf(), s.rf());
        let t = match a {
            // Pipelined chain: (n−1)/n·S leaves the root; n−1 hops.
            Algorithm::Ring => {
                let (i, e) = Self::ring_steps(s, nf - 1.0, 1.0);
                Terms {
                    intra_steps: i,
                    inter_steps: e,
                    bw_secs: (nf - 1.0) * s.inv_n * sz * self.spb_flat(s),
                    extra: 0.0,
                    ll: true,
                }
            }
            // Binomial tree, far halves first: the root sends S(1 − 1/N) through its own NIC
            // share, then S(1/N − 1/n) inside the node; ⌈log2 n⌉ rounds.
            Algorithm::Tree => {
                let (li, le) = Self::tree_levels(s);
                let inter = if s.multi() {
                    sz * (1.0 - s.inv_nodes) * self.spb_inter(true)
                } else {
                    0.0
                };
                let intra = sz * (s.inv_nodes - s.inv_n) * self.spb_intra(Pattern::OnePeer, s.r);
                Terms {
                    intra_steps: li,
                    inter_steps: le,
                    bw_secs: inter + intra,
                    extra: 0.0,
                    ll: true,
                }
            }
            // Direct: the root sends every peer its block at once, one round.
            Algorithm::Direct => {
                let (i, e) = Self::one_step(s);
                Terms {
                    intra_steps: i,
                    inter_steps: e,
                    bw_secs: self.split(
                        s,
                        (rf - 1.0) * s.inv_n * sz,
                        (nf - rf) * s.inv_n * sz,
                        Pattern::AllPeers,
                        false,
                    ),
                    extra: 0.0,
                    ll: true,
                }
            }
            _ => return None,
        };
        Some(t)
    }

    /// Send/Recv between two ranks (seed §2.9): one step, S over the link between them.
    #[inline(always)]
    fn sendrecv(&self, a: Algorithm, s: Shape, sz: f64) -> Option<Terms> {
        if a != Algorithm::PointToPoint {
            return None;
        }
        let (i, e) = Self::one_step(s);
        let spb = if s.multi() {
            self.spb_inter(true)
        } else {
            self.spb_intra(Pattern::OnePeer, s.r)
        };
        Some(Terms {
            intra_steps: i,
            inter_steps: e,
            bw_secs: sz * spb,
            extra: 0.0,
            ll: true,
        })
    }

    /// Barrier (seed §1.1): no payload. Tree = dissemination barrier, ⌈log2 n⌉ rounds
    /// (Hensgen, Finkel & Manber 1988); Direct = one round of n−1 zero-byte messages.
    #[inline(always)]
    fn barrier(&self, a: Algorithm, s: Shape) -> Option<Terms> {
        let (i, e) = match a {
            Algorithm::Tree => Self::tree_levels(s),
            Algorithm::Direct => Self::one_step(s),
            _ => return None,
        };
        Some(Terms {
            intra_steps: i,
            inter_steps: e,
            bw_secs: 0.0,
            extra: 0.0,
            ll: true,
        })
    }
}

/// The algorithms NCCL itself implements for a collective (collectives.md §2.2): Ring and Tree
/// (double binary tree, inter-node only; intra-node NCCL's tree is a chain) and NVLS for
/// all-reduce; Ring and NVLS for all-gather/reduce-scatter; Ring for broadcast/reduce;
/// point-to-point (pairwise) for all-to-all, scatter, gather and send/recv.
fn nccl_implements(op: Collective, a: Algorithm, s: Shape) -> bool {
    use Algorithm::*;
    match op {
        Collective::AllReduce => {
            matches!(a, Ring | InSwitch) || (a == DoubleBinaryTree && s.multi())
        }
        Collective::AllGather | Collective::ReduceScatter => matches!(a, Ring | InSwitch),
        Collective::AllToAll | Collective::Scatter | Collective::Gather => a == Direct,
        Collective::Broadcast | Collective::Reduce => a == Ring,
        Collective::SendRecv => a == PointToPoint,
        Collective::Barrier => true,
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
