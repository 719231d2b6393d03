//! Collectives as NCCL runs them (library `nccl`): NCCL's algorithms per collective
//! (collectives.md §2.2, frameworks.md §4.1) and its three protocols priced with the
//! per-protocol bandwidth factors and latencies of NCCL's tuning model (collectives.md
//! §2.3.3, §2.4), on the cluster's calibrated bandwidths and latencies.
//!
//! The α-β structure is the seeds' ([`Terms`]: steps on each fabric + bandwidth seconds at
//! the Simple protocol's bandwidth); what NCCL adds is which algorithms exist, how each
//! protocol scales the bandwidth, and what a step costs under each protocol.

use autoplan_cluster::{CollectiveLibrary, IntraFabric};

use super::{ceil_log2, CostModel, Pattern, Shape, Terms, IN_SWITCH_LATENCY};
use crate::{Algorithm, Collective, CollectiveCost, Protocol};

/// Ring + LL: busBw × 0.5 (8-byte lines of 4 data bytes and a 4-byte flag; collectives.md
/// §2.3.3, tuning.cc).
pub const RING_LL_FACTOR: f64 = 0.5;
/// Ring + LL128: busBw × 0.92 (120 of 128 bytes payload; collectives.md §2.3.3).
pub const RING_LL128_FACTOR: f64 = 0.92;
/// Tree all-reduce, any protocol: busBw × 0.92 (collectives.md §2.3.3).
pub const TREE_FACTOR: f64 = 0.92;
/// Tree + LL: a further busBw / 3.8 (collectives.md §2.3.3).
pub const TREE_LL_FACTOR: f64 = 1.0 / 3.8;
/// Tree + LL128 across nodes: a further × 120/128 (collectives.md §2.3.3).
pub const TREE_LL128_FACTOR: f64 = 120.0 / 128.0;
/// PAT: busBw × 0.75 (collectives.md §2.3.3).
pub const PAT_FACTOR: f64 = 0.75;
/// LL128's per-step synchronisation as a fraction of Simple's, inside a node: NCCL's ring
/// `hwLat[NVLINK]` LL / LL128 / Simple = 0.6 / 1.9 / 3.4 µs puts LL128 at
/// (1.9 − 0.6) / (3.4 − 0.6) of the way from LL (no synchronisation) to Simple
/// (collectives.md §2.4).
pub const LL128_SYNC_INTRA: f64 = (1.9 - 0.6) / (3.4 - 0.6);
/// The same across the network: ring `hwLat[NET]` 2.7 / 4.0 / 14.0 µs (collectives.md §2.4).
pub const LL128_SYNC_INTER: f64 = (4.0 - 2.7) / (14.0 - 2.7);
/// LL128's extra fixed latency over Simple: NCCL `baseLat` LL128 14.0 µs vs Simple 8.4 µs
/// (Ring and Tree rows, collectives.md §2.4), seconds.
pub const LL128_EXTRA_BASE: f64 = (14.0 - 8.4) * 1e-6;
/// CollNetDirect runs only with at most this many local ranks per node (collectives.md §2.2).
const COLLNET_DIRECT_MAX_LOCAL: u32 = 8;

/// How an algorithm's [`Terms`] become a time under NCCL.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Pricing {
    /// Point-to-point and the barrier: not in NCCL's tuning model (collectives.md §2.2:
    /// all-to-all, scatter, gather are expanded into send/recv), priced as under `any`.
    Seed,
    /// Ring: LL, LL128 and Simple.
    Ring,
    /// Tree all-reduce: LL, LL128 and Simple, each with the tree's factors.
    Tree,
    /// Simple only, busBw × the factor (NVLS, NVLSTree, CollNet, PAT: collectives.md §2.2).
    SimpleOnly(f64),
}

/// The algorithms NCCL has for a collective, in report order (collectives.md §2.2,
/// frameworks.md §4.1): Ring, Tree, NVLS, NVLSTree, CollNet Direct/Chain for all-reduce; Ring,
/// PAT, NVLS for all-gather/reduce-scatter; Ring only for broadcast/reduce; point-to-point
/// (direct, pairwise) for all-to-all, scatter and gather (enqueue.cc expands them into
/// send/recv); send/recv itself. NCCL has no barrier; the cost model's barrier (no payload)
/// keeps the seeds' dissemination and direct forms.
pub fn nccl_algorithms_of(op: Collective) -> &'static [Algorithm] {
    use Algorithm::*;
    match op {
        Collective::AllReduce => &[
            Ring,
            DoubleBinaryTree,
            InSwitch,
            NvlsTree,
            CollNetDirect,
            CollNetChain,
        ],
        Collective::AllGather | Collective::ReduceScatter => &[Ring, Pat, InSwitch],
        Collective::Broadcast | Collective::Reduce => &[Ring],
        Collective::AllToAll | Collective::Scatter | Collective::Gather => &[Direct],
        Collective::SendRecv => &[PointToPoint],
        Collective::Barrier => &[Tree, Direct],
    }
}

/// The algorithms `library` has for `op`, in report order.
pub fn library_algorithms(op: Collective, library: CollectiveLibrary) -> &'static [Algorithm] {
    match library {
        CollectiveLibrary::Nccl => nccl_algorithms_of(op),
        CollectiveLibrary::Any => super::algorithms_of(op),
    }
}

impl CostModel {
    /// NCCL's form of algorithm `a` for `op`, with how it is priced; `None` where NCCL does not
    /// run it on this group.
    #[inline(always)]
    pub(super) fn nccl_terms(
        &self,
        op: Collective,
        a: Algorithm,
        s: Shape,
        sz: f64,
        mean: f64,
    ) -> Option<(Terms, Pricing)> {
        use Algorithm::*;
        match (op, a) {
            (Collective::AllReduce, Ring) => Some((self.allreduce(Ring, s, sz)?, Pricing::Ring)),
            (Collective::AllReduce, DoubleBinaryTree) => {
                Some((self.nccl_tree(s, sz)?, Pricing::Tree))
            }
            (Collective::AllReduce, InSwitch) => {
                Some((self.nccl_nvls(s, sz)?, Pricing::SimpleOnly(1.0)))
            }
            (Collective::AllReduce, NvlsTree) => {
                Some((self.nccl_nvls_tree(s, sz)?, Pricing::SimpleOnly(1.0)))
            }
            (Collective::AllReduce, CollNetDirect) => {
                Some((self.collnet_direct(s, sz)?, Pricing::SimpleOnly(1.0)))
            }
            (Collective::AllReduce, CollNetChain) => {
                Some((self.collnet_chain(s, sz)?, Pricing::SimpleOnly(1.0)))
            }
            (Collective::AllGather | Collective::ReduceScatter, Ring) => {
                Some((self.allgather(Ring, s, sz)?, Pricing::Ring))
            }
            (Collective::AllGather | Collective::ReduceScatter, Pat) => {
                Some((self.pat(s, sz)?, Pricing::SimpleOnly(PAT_FACTOR)))
            }
            // NVLS all-gather / reduce-scatter: one node (multi-node NVLS needs CollNet and
            // one local rank per CollNet head, collectives.md §2.5.1, not modelled).
            (Collective::AllGather | Collective::ReduceScatter, InSwitch) => {
                Some((self.allgather(InSwitch, s, sz)?, Pricing::SimpleOnly(1.0)))
            }
            (Collective::Broadcast | Collective::Reduce, Ring) => {
                Some((self.broadcast(Ring, s, sz)?, Pricing::Ring))
            }
            (Collective::AllToAll, Direct) => {
                Some((self.alltoall(Direct, s, sz, mean)?, Pricing::Seed))
            }
            (Collective::Scatter | Collective::Gather, Direct) => {
                Some((self.scatter(Direct, s, sz)?, Pricing::Seed))
            }
            (Collective::SendRecv, PointToPoint) => {
                Some((self.sendrecv(PointToPoint, s, sz)?, Pricing::Seed))
            }
            (Collective::Barrier, Tree | Direct) => Some((self.barrier(a, s)?, Pricing::Seed)),
            _ => None,
        }
    }

    /// NCCL Tree all-reduce across nodes: a chain through the node's r ranks and a double
    /// binary tree across the N nodes (trees.cc; collectives.md §2.2). Latency
    /// `2·((r−1)·intra + log2 N·inter)` steps (collectives.md §2.4, "Tree AR"); bandwidth: each
    /// rank sends and receives S in each of the reduce and broadcast halves, algBw = busBw/2
    /// (collectives.md §2.3.4), busBw per rank on the node's NICs as a ring's. NCCL's Tree on
    /// one node is a plain chain and never beats its ring there: not offered (`None`).
    #[inline(always)]
    fn nccl_tree(&self, s: Shape, sz: f64) -> Option<Terms> {
        if !s.multi() {
            return None;
        }
        Some(Terms {
            intra_steps: 2.0 * (s.rf() - 1.0),
            inter_steps: 2.0 * f64::from(ceil_log2(s.nodes)),
            bw_secs: 2.0 * sz * self.spb_flat(s),
            extra: 0.0,
            ll: true,
        })
    }

    /// NVLS all-reduce: one node as under `any`; across nodes only with CollNet (NCCL turns
    /// multi-node NVLS off unless CollNet is enabled, frameworks.md §4.1), where the network
    /// reduces each node's S/r shard per rank and the two phases pipeline (the slower one
    /// decides: NCCL's bw = min(intraBw, interBw), collectives.md §2.3.3).
    #[inline(always)]
    fn nccl_nvls(&self, s: Shape, sz: f64) -> Option<Terms> {
        if !s.multi() {
            return self.allreduce(Algorithm::InSwitch, s, sz);
        }
        if !(self.in_switch && self.in_network) || s.r < 2 {
            return None;
        }
        let intra = (s.rf() + 1.0) * s.inv_r * sz * self.spb_in_switch;
        let inter = sz * s.inv_r * self.spb_inter(true);
        Some(Terms {
            intra_steps: 2.0,
            inter_steps: 1.0,
            bw_secs: intra.max(inter),
            extra: IN_SWITCH_LATENCY,
            ll: false,
        })
    }

    /// NVLSTree all-reduce (several nodes, NVLink SHARP, r ≥ 2): NVLS inside the node and a
    /// double binary tree of the node's S/r shard per rank across nodes, pipelined (NCCL
    /// bw = min(intraBw, bwInter × (2 if N ≤ 2)), collectives.md §2.3.3); latency
    /// `intra + 2·log2 N·inter` steps plus NVLS set-up (collectives.md §2.4). Off on one node
    /// (frameworks.md §4.1).
    #[inline(always)]
    fn nccl_nvls_tree(&self, s: Shape, sz: f64) -> Option<Terms> {
        if !self.in_switch || !s.multi() || s.r < 2 {
            return None;
        }
        let intra = (s.rf() + 1.0) * s.inv_r * sz * self.spb_in_switch;
        let two_nodes = if s.nodes <= 2 { 2.0 } else { 1.0 };
        let inter = 2.0 * sz * s.inv_r * self.spb_inter(true) / two_nodes;
        Some(Terms {
            intra_steps: 2.0,
            inter_steps: 2.0 * f64::from(ceil_log2(s.nodes)),
            bw_secs: intra.max(inter),
            extra: IN_SWITCH_LATENCY,
            ll: false,
        })
    }

    /// CollNetDirect all-reduce (IB SHARP; NVSwitch nodes with at most 8 local ranks,
    /// collectives.md §2.2): inside the node every rank reduce-scatters and all-gathers with
    /// all its peers at once (2(r−1)/r·S each way), across nodes each rank sends its S/r shard
    /// once to the switch and receives the reduced shard; the two pipeline. Latency
    /// `2·min(1, r−1)` intra steps + one network step (collectives.md §2.4).
    #[inline(always)]
    fn collnet_direct(&self, s: Shape, sz: f64) -> Option<Terms> {
        if !self.in_network
            || !s.multi()
            || self.fabric != IntraFabric::Nvswitch
            || s.r > COLLNET_DIRECT_MAX_LOCAL
        {
            return None;
        }
        let rf = s.rf();
        let intra = 2.0 * (rf - 1.0) * s.inv_r * sz * self.spb_intra(Pattern::AllPeers, s.r);
        let inter = sz * s.inv_r * self.spb_inter(true);
        Some(Terms {
            intra_steps: 2.0 * (rf - 1.0).min(1.0),
            inter_steps: 1.0,
            bw_secs: intra.max(inter),
            extra: 0.0,
            ll: false,
        })
    }

    /// CollNetChain all-reduce (IB SHARP): a chain through the node's ranks (each sends S up
    /// and S down), the chain's head exchanging with the switch on the node's NICs; pipelined.
    /// Latency `2·(r−1)` intra steps + one network step (collectives.md §2.4).
    #[inline(always)]
    fn collnet_chain(&self, s: Shape, sz: f64) -> Option<Terms> {
        if !self.in_network || !s.multi() {
            return None;
        }
        let rf = s.rf();
        let intra = if s.r > 1 {
            2.0 * sz * self.spb_intra(Pattern::Ring, s.r)
        } else {
            0.0
        };
        let inter = sz * s.inv_r * self.spb_inter(true);
        Some(Terms {
            intra_steps: 2.0 * (rf - 1.0),
            inter_steps: 1.0,
            bw_secs: intra.max(inter),
            extra: 0.0,
            ll: false,
        })
    }

    /// PAT all-gather / reduce-scatter: NCCL uses it only at one rank per node (nNodes ==
    /// nRanks, frameworks.md §4.1): ⌈log2 n⌉ network steps of aggregated trees, the ring's
    /// (n−1)/n·S per rank at busBw × 0.75 (collectives.md §2.3.3).
    #[inline(always)]
    fn pat(&self, s: Shape, sz: f64) -> Option<Terms> {
        if s.r != 1 || !s.multi() {
            return None;
        }
        Some(Terms {
            intra_steps: 0.0,
            inter_steps: f64::from(ceil_log2(s.n)),
            bw_secs: (s.nf() - 1.0) * s.inv_n * sz * self.spb_inter(true),
            extra: 0.0,
            ll: false,
        })
    }

    /// Terms → time under `pricing`: the cheapest protocol the algorithm has. Every protocol
    /// pays `start_lat` once and the hop latency per step; Simple pays `sync_lat` per step
    /// (as under `any`), LL none at a reduced bandwidth, LL128 a fraction of `sync_lat` per
    /// step ([`LL128_SYNC_INTRA`], [`LL128_SYNC_INTER`]) and [`LL128_EXTRA_BASE`] once, where
    /// NCCL enables LL128 (NVLink inside the node, frameworks.md §4.1). Ties keep Simple.
    #[inline(always)]
    pub(super) fn finish_nccl(&self, t: Terms, pricing: Pricing) -> (f64, Protocol) {
        let (ll_f, ll128_f, simple_f) = match pricing {
            Pricing::Seed => return self.finish(t),
            Pricing::SimpleOnly(f) => (0.0, 0.0, f),
            Pricing::Ring => (RING_LL_FACTOR, RING_LL128_FACTOR, 1.0),
            Pricing::Tree => (
                TREE_FACTOR * TREE_LL_FACTOR,
                TREE_FACTOR * TREE_LL128_FACTOR,
                TREE_FACTOR,
            ),
        };
        let hops = t.intra_steps * self.hop_intra + t.inter_steps * self.hop_inter;
        let mut best = (
            self.start_lat
                + hops
                + (t.intra_steps + t.inter_steps) * self.sync_lat
                + t.extra
                + t.bw_secs / simple_f,
            Protocol::Simple,
        );
        if ll128_f > 0.0 && self.ll128 {
            let ll128 = self.start_lat
                + LL128_EXTRA_BASE
                + hops
                + (t.intra_steps * LL128_SYNC_INTRA + t.inter_steps * LL128_SYNC_INTER)
                    * self.sync_lat
                + t.extra
                + t.bw_secs / ll128_f;
            if ll128 < best.0 {
                best = (ll128, Protocol::Ll128);
            }
        }
        if ll_f > 0.0 {
            let ll = self.start_lat + hops + t.extra + t.bw_secs / ll_f;
            if ll < best.0 {
                best = (ll, Protocol::LowLatency);
            }
        }
        best
    }

    /// The cheapest allowed NCCL algorithm (unrolled over [`nccl_algorithms_of`] like
    /// [`CostModel::cheapest`]; the same order, ties keep the earlier).
    #[inline]
    pub(super) fn nccl_cheapest(
        &self,
        op: Collective,
        s: Shape,
        smax: f64,
        smean: f64,
        allowed: impl Fn(Algorithm) -> bool,
    ) -> CollectiveCost {
        let mut best = CollectiveCost {
            algorithm: nccl_algorithms_of(op)[0],
            protocol: Protocol::Simple,
            time: f64::INFINITY,
        };
        self.nccl_visit(op, s, smax, smean, allowed, |c| {
            if c.time < best.time {
                best = c;
            }
        });
        best
    }

    /// Calls `f` with every valid allowed NCCL algorithm's cost, in [`nccl_algorithms_of`]
    /// order.
    #[inline(always)]
    pub(super) fn nccl_visit(
        &self,
        op: Collective,
        s: Shape,
        smax: f64,
        smean: f64,
        allowed: impl Fn(Algorithm) -> bool,
        mut f: impl FnMut(CollectiveCost),
    ) {
        let sz = smax.max(0.0);
        let mean = smean.max(0.0);
        for &a in nccl_algorithms_of(op) {
            if allowed(a) {
                if let Some((t, p)) = self.nccl_terms(op, a, s, sz, mean) {
                    let (time, protocol) = self.finish_nccl(t, p);
                    f(CollectiveCost {
                        algorithm: a,
                        protocol,
                        time,
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use autoplan_cluster::{GroupPlacement, IntraFabric};

    use super::*;
    use crate::{calibration, AlgoMode};

    fn g(r: u32, nodes: u32) -> GroupPlacement {
        GroupPlacement {
            size: r * nodes,
            ranks_per_node: r,
            nodes,
        }
    }

    fn algos(m: &CostModel, op: Collective, grp: GroupPlacement, s: f64) -> Vec<Algorithm> {
        m.alternatives(op, grp, s)
            .iter()
            .map(|c| c.algorithm)
            .collect()
    }

    #[test]
    fn menus_follow_the_hardware() {
        use Algorithm::*;
        let h100 = CostModel::new(&calibration::dgx_h100(4));
        let ar = Collective::AllReduce;
        // One node: ring and NVLS; several: the tree and NVLSTree join, NVLS needs CollNet.
        assert_eq!(algos(&h100, ar, g(8, 1), 1e8), [Ring, InSwitch]);
        assert_eq!(
            algos(&h100, ar, g(8, 4), 1e8),
            [Ring, DoubleBinaryTree, NvlsTree]
        );
        // PAT only at one rank per node.
        let ag = Collective::AllGather;
        assert_eq!(algos(&h100, ag, g(1, 4), 1e8), [Ring, Pat]);
        assert_eq!(algos(&h100, ag, g(2, 4), 1e8), [Ring]);
        // No NVLink SHARP on A100: no NVLS.
        let a100 = CostModel::new(&calibration::dgx_a100(4));
        assert_eq!(algos(&a100, ar, g(8, 4), 1e8), [Ring, DoubleBinaryTree]);
        // In-network reduction declared: CollNet, and NVLS across nodes.
        let mut c = calibration::dgx_h100(4);
        c.network.in_network_reduction = true;
        let sharp = CostModel::new(&c);
        assert_eq!(
            algos(&sharp, ar, g(8, 4), 1e8),
            [
                Ring,
                DoubleBinaryTree,
                InSwitch,
                NvlsTree,
                CollNetDirect,
                CollNetChain
            ]
        );
        // At 4 nodes SHARP halves the network volume of a large all-reduce: CollNet or NVLS
        // beats ring and tree.
        let best = sharp.collective(ar, g(8, 4), 1e10, AlgoMode::Cheapest);
        assert!(
            matches!(best.algorithm, InSwitch | CollNetDirect | NvlsTree),
            "{best:?}"
        );
    }

    #[test]
    fn protocols_follow_size_and_fabric() {
        let m = CostModel::new(&calibration::dgx_a100(1));
        let ar = Collective::AllReduce;
        let small = m.collective(ar, g(8, 1), 8.0, AlgoMode::Cheapest);
        let mid = m.collective(ar, g(8, 1), 16.0 * 1024.0 * 1024.0, AlgoMode::Cheapest);
        let large = m.collective(ar, g(8, 1), 8e9, AlgoMode::Cheapest);
        assert_eq!(small.protocol, Protocol::LowLatency);
        assert_eq!(mid.protocol, Protocol::Ll128);
        assert_eq!(large.protocol, Protocol::Simple);
        // LL128 needs NVLink: not on a PCIe node.
        let mut c = calibration::dgx_a100(1);
        c.node.fabric = IntraFabric::Pcie;
        let pcie = CostModel::new(&c);
        for s in [8.0, 1e5, 1e7, 1e9] {
            let p = pcie.collective(ar, g(8, 1), s, AlgoMode::Cheapest).protocol;
            assert_ne!(p, Protocol::Ll128, "{s}");
        }
    }
}
