//! The shared cost crate: α-β time of every collective and algorithm of seed 000 placed on the
//! real topology, plus compute time.
//!
//! Boundary: pure functions of (cluster, group placement, bytes) and (cluster, FLOPs); no IO.

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
}
