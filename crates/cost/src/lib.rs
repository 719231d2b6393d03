//! The shared cost crate: α-β time of every collective and algorithm of seed 000, placed on
//! the real topology (which ranks share a node), plus GEMM and memory-bound compute time.
//!
//! Boundary: pure, allocation-free functions of (cluster, group placement, bytes) and
//! (GPU, FLOPs, shape); no IO, no plan or model knowledge — callers say which collective of
//! which size runs on which group.
//!
//! The principal type is [`CostModel`]: build it once per cluster, then ask
//! [`CostModel::collective`] (the chosen algorithm and its time), [`CostModel::alternatives`]
//! (every valid algorithm, for reports) or [`CostModel::alltoall_unequal`] (EP with load
//! imbalance). Compute time is in [`compute`]. Calibrated link and software constants, with
//! their sources, are in [`calibration`].
//!
//! ```
//! use autoplan_cluster::GroupPlacement;
//! use autoplan_cost::{calibration, AlgoMode, Collective, CostModel};
//!
//! let model = CostModel::new(&calibration::dgx_h100(8));
//! let tp_intra = GroupPlacement { size: 8, ranks_per_node: 8, nodes: 1 };
//! let tp_inter = GroupPlacement { size: 8, ranks_per_node: 1, nodes: 8 };
//! let bytes = 64.0 * 1024.0 * 1024.0;
//! let a = model.collective(Collective::AllReduce, tp_intra, bytes, AlgoMode::Cheapest);
//! let b = model.collective(Collective::AllReduce, tp_inter, bytes, AlgoMode::Cheapest);
//! assert!(b.time > 3.0 * a.time); // the same TP=8 all-reduce, on NVLink vs across NICs
//! for alt in &model.alternatives(Collective::AllReduce, tp_intra, bytes) {
//!     println!("{:?} {:?} {:.1} µs", alt.algorithm, alt.protocol, alt.time * 1e6);
//! }
//! ```

pub mod calibration;
pub mod compute;
mod model;
pub mod validation;

pub use model::{
    algorithms_of, Alternatives, CostModel, Terms, IN_SWITCH_EFFICIENCY, IN_SWITCH_LATENCY,
    LL_BANDWIDTH_FRACTION, MAX_ALGORITHMS,
};

use serde::{Deserialize, Serialize};

/// Communication primitive (seed 000 §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Collective {
    Broadcast,
    Scatter,
    Gather,
    Reduce,
    AllGather,
    ReduceScatter,
    AllReduce,
    AllToAll,
    SendRecv,
    Barrier,
}

/// Algorithm implementing a collective (seed 000 §6, NCCL).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Algorithm {
    Ring,
    /// Full-mesh / pairwise direct exchange.
    Direct,
    Tree,
    DoubleBinaryTree,
    /// Recursive halving-doubling (recursive doubling for all-gather).
    HalvingDoubling,
    Bruck,
    /// Two-level: intra-node phase, inter-node phase, intra-node phase.
    Hierarchical,
    /// NVLS-style in-switch reduction.
    InSwitch,
    /// Point-to-point (send/recv).
    PointToPoint,
}

/// How the algorithm of each collective instance is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AlgoMode {
    /// The cheapest valid algorithm for this instance.
    Cheapest,
    /// Seed 000's NCCL-like selection rule.
    NcclLike,
    /// This algorithm where valid, otherwise the cheapest valid one.
    Fixed(Algorithm),
    /// NCCL's own tuner (collectives.md §2.5): the cheapest among the algorithms NCCL
    /// implements for this collective (ring, double binary tree across nodes, NVLS; pairwise
    /// point-to-point for all-to-all, scatter and gather).
    NcclTuner,
}

/// Wire protocol of an algorithm instance (NCCL's LL vs Simple, collectives.md §2.5.5): the
/// cheaper one is taken for every instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    /// Low latency: flags inline with data, no per-step synchronisation, half the bandwidth.
    LowLatency,
    /// Bulk copies: full bandwidth, `sync_lat` per step.
    Simple,
}

/// The time of one collective instance and the algorithm (and protocol) that achieves it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CollectiveCost {
    pub algorithm: Algorithm,
    pub protocol: Protocol,
    /// Seconds.
    pub time: f64,
}

impl CollectiveCost {
    /// No communication (a group of one rank).
    pub const ZERO: CollectiveCost = CollectiveCost {
        algorithm: Algorithm::Ring,
        protocol: Protocol::LowLatency,
        time: 0.0,
    };
}

impl Collective {
    /// Every collective, in declaration order.
    pub const ALL: [Collective; 10] = [
        Collective::Broadcast,
        Collective::Scatter,
        Collective::Gather,
        Collective::Reduce,
        Collective::AllGather,
        Collective::ReduceScatter,
        Collective::AllReduce,
        Collective::AllToAll,
        Collective::SendRecv,
        Collective::Barrier,
    ];

    /// nccl-tests bus-bandwidth factor F(n) = busbw / algbw (collectives.md §1): 2(n−1)/n for
    /// all-reduce, (n−1)/n for all-gather, reduce-scatter, all-to-all, scatter and gather, 1
    /// for broadcast, reduce and send/recv (0 for barrier, which moves no data).
    pub fn busbw_factor(self, n: u32) -> f64 {
        let nf = f64::from(n.max(1));
        match self {
            Collective::AllReduce => 2.0 * (nf - 1.0) / nf,
            Collective::AllGather
            | Collective::ReduceScatter
            | Collective::AllToAll
            | Collective::Scatter
            | Collective::Gather => (nf - 1.0) / nf,
            Collective::Broadcast | Collective::Reduce | Collective::SendRecv => 1.0,
            Collective::Barrier => 0.0,
        }
    }
}
