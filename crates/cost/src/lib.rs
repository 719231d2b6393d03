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
pub mod fit;
mod model;
pub mod validation;

pub mod nccl;

pub use autoplan_cluster::CollectiveLibrary;
pub use model::{
    algorithms_of, library_algorithms, nccl_algorithms_of, Alternatives, CostModel, Terms,
    IN_SWITCH_EFFICIENCY, IN_SWITCH_EFFICIENCY_BLACKWELL, IN_SWITCH_LATENCY, LL_BANDWIDTH_FRACTION,
    MAX_ALGORITHMS,
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
    /// NCCL NVLSTree: NVLink SHARP inside the node, a double binary tree across nodes
    /// (collectives.md §2.2).
    NvlsTree,
    /// NCCL CollNetDirect: in-network (SHARP) reduction, every local rank talks to the
    /// network directly (collectives.md §2.2).
    CollNetDirect,
    /// NCCL CollNetChain: in-network (SHARP) reduction behind a chain through the node.
    CollNetChain,
    /// NCCL PAT ("Parallel Aggregated Trees"): all-gather / reduce-scatter at one rank per
    /// node (collectives.md §2.2, frameworks.md §4.1).
    Pat,
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
    /// implements for this collective, priced by NCCL's tuning model, whatever the cluster's
    /// library.
    NcclTuner,
    /// The cheapest of the seeds' full menu (library `any`), whatever the cluster's library.
    Any,
}

/// Wire protocol of an algorithm instance (NCCL's LL, LL128 and Simple, collectives.md
/// §2.5.5): the cheapest the algorithm and library allow is taken for every instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    /// Low latency: flags inline with data, no per-step synchronisation, half the bandwidth.
    #[serde(rename = "ll")]
    LowLatency,
    /// NCCL LL128: 128-byte lines with an 8-byte flag, near-Simple bandwidth, little
    /// per-step synchronisation (library `nccl` on NVLink nodes only).
    #[serde(rename = "ll128")]
    Ll128,
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

/// A name that is not a known collective or algorithm (for command-line and file parsing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownName {
    /// What was being parsed: "collective" or "algorithm".
    pub kind: &'static str,
    /// The text given.
    pub value: String,
    /// The accepted names.
    pub expected: &'static str,
}

impl std::fmt::Display for UnknownName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "unknown {} {:?}; expected one of: {}",
            self.kind, self.value, self.expected
        )
    }
}

impl std::error::Error for UnknownName {}

/// Lower-case, without '-', '_' or spaces: "All-Reduce" and "all_reduce" both give "allreduce".
fn squash(s: &str) -> String {
    s.chars()
        .filter(|c| !matches!(c, '-' | '_' | ' '))
        .flat_map(char::to_lowercase)
        .collect()
}

impl Collective {
    /// Kebab-case name (as serialized).
    pub fn name(self) -> &'static str {
        match self {
            Collective::Broadcast => "broadcast",
            Collective::Scatter => "scatter",
            Collective::Gather => "gather",
            Collective::Reduce => "reduce",
            Collective::AllGather => "all-gather",
            Collective::ReduceScatter => "reduce-scatter",
            Collective::AllReduce => "all-reduce",
            Collective::AllToAll => "all-to-all",
            Collective::SendRecv => "send-recv",
            Collective::Barrier => "barrier",
        }
    }
}

impl std::fmt::Display for Collective {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Collective {
    type Err = UnknownName;
    /// Case, '-' and '_' are ignored: "allreduce", "all-reduce", "AllReduce"; also "alltoall",
    /// "a2a", "sendrecv", "p2p".
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match squash(s).as_str() {
            "broadcast" | "bcast" => Collective::Broadcast,
            "scatter" => Collective::Scatter,
            "gather" => Collective::Gather,
            "reduce" => Collective::Reduce,
            "allgather" => Collective::AllGather,
            "reducescatter" => Collective::ReduceScatter,
            "allreduce" => Collective::AllReduce,
            "alltoall" | "a2a" => Collective::AllToAll,
            "sendrecv" | "p2p" => Collective::SendRecv,
            "barrier" => Collective::Barrier,
            _ => {
                return Err(UnknownName {
                    kind: "collective",
                    value: s.to_string(),
                    expected: "broadcast, scatter, gather, reduce, allgather, reducescatter, \
                               allreduce, alltoall, sendrecv, barrier",
                })
            }
        })
    }
}

impl Algorithm {
    /// Every algorithm, in declaration order.
    pub const ALL: [Algorithm; 13] = [
        Algorithm::Ring,
        Algorithm::Direct,
        Algorithm::Tree,
        Algorithm::DoubleBinaryTree,
        Algorithm::HalvingDoubling,
        Algorithm::Bruck,
        Algorithm::Hierarchical,
        Algorithm::InSwitch,
        Algorithm::PointToPoint,
        Algorithm::NvlsTree,
        Algorithm::CollNetDirect,
        Algorithm::CollNetChain,
        Algorithm::Pat,
    ];

    /// Kebab-case name (as serialized).
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Ring => "ring",
            Algorithm::Direct => "direct",
            Algorithm::Tree => "tree",
            Algorithm::DoubleBinaryTree => "double-binary-tree",
            Algorithm::HalvingDoubling => "halving-doubling",
            Algorithm::Bruck => "bruck",
            Algorithm::Hierarchical => "hierarchical",
            Algorithm::InSwitch => "in-switch",
            Algorithm::PointToPoint => "point-to-point",
            Algorithm::NvlsTree => "nvls-tree",
            Algorithm::CollNetDirect => "collnet-direct",
            Algorithm::CollNetChain => "collnet-chain",
            Algorithm::Pat => "pat",
        }
    }
}

impl std::fmt::Display for Algorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Algorithm {
    type Err = UnknownName;
    /// Case, '-' and '_' are ignored; aliases: "pairwise"/"fullmesh" (direct), "dbt",
    /// "hd"/"recursive" (halving-doubling), "2d"/"twolevel" (hierarchical), "nvls", "p2p".
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match squash(s).as_str() {
            "ring" => Algorithm::Ring,
            "direct" | "pairwise" | "fullmesh" => Algorithm::Direct,
            "tree" | "binarytree" => Algorithm::Tree,
            "doublebinarytree" | "dbt" => Algorithm::DoubleBinaryTree,
            "halvingdoubling" | "hd" | "recursive" | "recursivedoubling" | "recursivehalving" => {
                Algorithm::HalvingDoubling
            }
            "bruck" => Algorithm::Bruck,
            "hierarchical" | "2d" | "twolevel" | "2dh" => Algorithm::Hierarchical,
            "inswitch" | "nvls" => Algorithm::InSwitch,
            "pointtopoint" | "p2p" | "sendrecv" => Algorithm::PointToPoint,
            "nvlstree" => Algorithm::NvlsTree,
            "collnetdirect" => Algorithm::CollNetDirect,
            "collnetchain" => Algorithm::CollNetChain,
            "pat" => Algorithm::Pat,
            _ => {
                return Err(UnknownName {
                    kind: "algorithm",
                    value: s.to_string(),
                    expected: "ring, direct (pairwise), tree, double-binary-tree (dbt), \
                               halving-doubling (hd), bruck, hierarchical, in-switch (nvls), \
                               point-to-point (p2p), nvls-tree, collnet-direct, collnet-chain, \
                               pat",
                })
            }
        })
    }
}

impl Protocol {
    /// Every protocol, in declaration order.
    pub const ALL: [Protocol; 3] = [Protocol::LowLatency, Protocol::Ll128, Protocol::Simple];

    /// Short name: "ll", "ll128" or "simple" (NCCL's names, lower case).
    pub fn name(self) -> &'static str {
        match self {
            Protocol::LowLatency => "ll",
            Protocol::Ll128 => "ll128",
            Protocol::Simple => "simple",
        }
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for c in Collective::ALL {
            assert_eq!(c.name().parse::<Collective>(), Ok(c));
        }
        for a in Algorithm::ALL {
            assert_eq!(a.name().parse::<Algorithm>(), Ok(a));
        }
        assert_eq!("AllReduce".parse::<Collective>(), Ok(Collective::AllReduce));
        assert_eq!("pairwise".parse::<Algorithm>(), Ok(Algorithm::Direct));
        let e = "allreduse".parse::<Collective>().unwrap_err();
        assert!(e.to_string().contains("allreduse"));
    }
}
