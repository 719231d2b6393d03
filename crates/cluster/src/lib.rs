//! The GPU cluster: GPUs, nodes, the intra- and inter-node fabrics, software efficiency
//! parameters (seed 000 §5 names), and where each rank of a parallel group sits.
//!
//! Boundary: this crate describes hardware and placement; it computes no collective time
//! (that is `autoplan-cost`). All quantities are SI: bytes, bytes/s, seconds, FLOP/s. Config
//! files use GB/s, µs, GiB and TFLOP/s and are converted once, when parsed.
//!
//! The principal types are [`Cluster`] and [`GroupPlacement`].

/// Numeric precision of a GEMM or a tensor.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Fp32,
    Tf32,
    Fp16,
    Bf16,
    Fp8,
}

/// The GPU of every rank (clusters are homogeneous).
#[derive(Debug, Clone, PartialEq)]
pub struct Gpu {
    /// Marketing name, e.g. "A100-SXM4-80GB".
    pub name: String,
    /// Architecture family, used to pick the compute-efficiency curve (one per GPU type).
    pub arch: GpuArch,
    /// Dense (non-sparse) peak matrix throughput, FLOP/s, per precision the GPU supports.
    pub peak_flops: Vec<(Precision, f64)>,
    /// HBM capacity, bytes.
    pub hbm_bytes: f64,
    /// HBM bandwidth, bytes/s.
    pub hbm_bw: f64,
}

impl Gpu {
    /// Dense peak FLOP/s at `p`, if the GPU supports it.
    pub fn peak(&self, p: Precision) -> Option<f64> {
        self.peak_flops
            .iter()
            .find(|(q, _)| *q == p)
            .map(|(_, f)| *f)
    }
}

/// GPU architecture family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuArch {
    V100,
    A100,
    H100,
    H800,
    H200,
    L40s,
    Other,
}

/// Intra-node interconnect (seed 000 §3/§4 topologies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IntraFabric {
    /// Every GPU reaches every other at full `intra_bw` through NVSwitch.
    Nvswitch,
    /// Direct point-to-point links between every pair; `intra_bw` is the GPU's total.
    FullMesh,
    /// GPUs on a ring: each talks only to its two neighbours.
    Ring,
    /// PCIe (through the host bridge / PCIe switch); no NVLink.
    Pcie,
}

/// Inter-node network topology.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetTopology {
    FatTree,
    RailOptimized,
    SpineLeaf,
    Torus2d,
}

/// One node: its GPUs and the fabric that joins them.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub gpus_per_node: u32,
    pub fabric: IntraFabric,
    /// Seed 000 `intra_bw`: bytes/s per GPU per direction on the intra-node fabric.
    pub intra_bw: f64,
    /// One-hop latency inside the node, seconds.
    pub intra_latency: f64,
    /// The switch can reduce in-network (NVLink SHARP / NVLS).
    pub in_switch_reduction: bool,
}

/// The network between nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct Network {
    pub topology: NetTopology,
    /// Seed 000 `inter_bw`: bytes/s per GPU per direction off the node (its NIC share).
    pub inter_bw: f64,
    pub nics_per_node: u32,
    /// Oversubscription ratio of the upper network tiers (1.0 = full bisection).
    pub oversubscription: f64,
    /// Seed 000 `link_delay`: fixed per-message latency across the network, seconds.
    pub link_delay: f64,
}

/// Software efficiency parameters of seed 000 §5.
#[derive(Debug, Clone, PartialEq)]
pub struct Efficiency {
    /// Achievable fraction of nominal link bandwidth (0, 1].
    pub bwurate: f64,
    /// Software start-up cost of one collective step, seconds.
    pub start_lat: f64,
    /// Multi-node synchronisation cost of one step, seconds.
    pub sync_lat: f64,
    /// CPU instruction fetch/response latency paid by EP all-to-all, seconds.
    pub cpufetch: f64,
}

/// A homogeneous GPU cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct Cluster {
    pub name: String,
    pub nodes: u32,
    pub gpu: Gpu,
    pub node: Node,
    pub network: Network,
    pub efficiency: Efficiency,
}

impl Cluster {
    /// Total number of GPUs.
    pub fn gpus(&self) -> u32 {
        self.nodes * self.node.gpus_per_node
    }
}

/// Where the members of one parallel group sit. By symmetry every group of a given dimension
/// set has the same shape, so this is computed once per (degrees, rank order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GroupPlacement {
    /// Members of the group.
    pub size: u32,
    /// Members that share one node (the same for every node the group touches).
    pub ranks_per_node: u32,
    /// Distinct nodes the group spans (`size / ranks_per_node`).
    pub nodes: u32,
}

impl GroupPlacement {
    /// True when the whole group is inside one node.
    pub fn intra_node(&self) -> bool {
        self.nodes <= 1
    }
}
