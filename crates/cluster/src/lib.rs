//! The GPU cluster: GPUs, nodes, the intra- and inter-node fabrics, software efficiency
//! parameters (seed 000 §5 names), and where each rank of a parallel group sits.
//!
//! Boundary: this crate describes hardware and placement; it computes no collective time
//! (that is `autoplan-cost`). All quantities are SI: bytes, bytes/s, seconds, FLOP/s. Config
//! files use GB/s, µs, GiB and TFLOP/s and are converted once, when parsed ([`mod@file`]).
//!
//! The principal types are [`Cluster`] and [`GroupPlacement`]. Clusters come from TOML files
//! ([`Cluster::from_toml`]) or the bundled library ([`resolve_cluster`], [`bundled_clusters`]).
//!
//! ```
//! let c = autoplan_cluster::resolve_cluster("h100x256").unwrap();
//! assert_eq!(c.gpus(), 256);
//! assert_eq!(c.node.intra_bw, 370.8e9); // bytes/s per GPU per direction
//! // Tensor parallelism of 8 innermost, then DP = 32: a TP group stays inside one node...
//! assert!(c.group_placement(&[8, 32], &[true, false]).intra_node());
//! // ...and a DP group has one rank on each of 32 nodes.
//! let dp = c.group_placement(&[8, 32], &[false, true]);
//! assert_eq!((dp.ranks_per_node, dp.nodes), (1, 32));
//! // The Megatron runs of published_runs.csv use many sizes of the same machine.
//! assert_eq!(c.with_gpus(1024).unwrap().nodes, 128);
//! ```

pub mod bundled;
pub mod file;
pub mod host;
mod precision;
mod segment;
pub use host::{Host, HostLink};
pub use precision::{Precision, TRAINING_PRECISIONS};

pub use bundled::{bundled_cluster_text, bundled_clusters, resolve_cluster, ResolveError};

/// The GPU of every rank (clusters are homogeneous).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Gpu {
    /// Marketing name, e.g. "A100-SXM4-80GB".
    pub name: String,
    /// Architecture family, used to pick the compute-efficiency constants (one set per GPU type).
    pub arch: GpuArch,
    /// Dense (non-sparse) peak matrix throughput, FLOP/s, per precision the GPU supports.
    pub peak_flops: Vec<(Precision, f64)>,
    /// HBM capacity, bytes.
    pub hbm_bytes: f64,
    /// HBM bandwidth, bytes/s.
    pub hbm_bw: f64,
    /// The part's rated maximum power, W (its TDP), where the cluster file gives it.
    pub rated_power_w: Option<f64>,
    /// The power limit the cluster runs the GPU at, W, where it is set (at most the rating).
    pub power_limit_w: Option<f64>,
}

impl Gpu {
    /// The power limit and the rating, W, where the GPU runs capped below its rating. Its
    /// clocks under the cap are not modelled: the compute constants are one set per
    /// architecture, fitted on runs at the rated power, so a capped GPU's times read as
    /// optimistic (the CLI says so).
    pub fn power_capped(&self) -> Option<(f64, f64)> {
        match (self.power_limit_w, self.rated_power_w) {
            (Some(l), Some(r)) if l < r => Some((l, r)),
            _ => None,
        }
    }

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
    /// Pascal (GP100/GP102: TITAN Xp, P100): no tensor cores.
    Pascal,
    /// Blackwell B200 of HGX/DGX B200 (up to 1,000 W; hardware.md §1.2).
    B200,
    /// Blackwell GPU of a GB200 superchip (NVL72; up to 1,200 W, higher peaks than B200:
    /// hardware.md §1.2 says to model the two as different devices).
    Gb200,
    /// Blackwell Ultra, the GPU of a GB300 superchip (NVL72; hardware.md §1, §1.4) and of an
    /// HGX B300 board (`clusters/b300x256.toml`): one die, one set of compute constants.
    Gb300,
    Other,
}

impl GpuArch {
    /// Blackwell (B200, GB200, GB300): FP4 and block-scaled (MX) tensor cores.
    pub fn is_blackwell(self) -> bool {
        matches!(self, GpuArch::B200 | GpuArch::Gb200 | GpuArch::Gb300)
    }

    /// CUDA compute capability (major, minor) of the family, which the frameworks' kernel
    /// checks compare against; `None` for `other` (not judged: taken to be recent). Pascal is
    /// taken at its lowest, 6.0 (P100; TITAN Xp is 6.1: both below every threshold used).
    pub fn compute_capability(self) -> Option<(u8, u8)> {
        Some(match self {
            GpuArch::Pascal => (6, 0),
            GpuArch::V100 => (7, 0),
            GpuArch::A100 => (8, 0),
            GpuArch::L40s => (8, 9),
            GpuArch::H100 | GpuArch::H800 | GpuArch::H200 => (9, 0),
            GpuArch::B200 | GpuArch::Gb200 => (10, 0),
            GpuArch::Gb300 => (10, 3),
            GpuArch::Other => return None,
        })
    }

    /// Whether the family has compute capability `cc` or newer (`other`: yes).
    pub fn at_least(self, cc: (u8, u8)) -> bool {
        self.compute_capability().is_none_or(|c| c >= cc)
    }

    /// Whether a fused attention kernel (FlashAttention-2/3, cuDNN's fused attention) runs on
    /// this architecture: compute capability 8.0 (Ampere) or newer. Transformer Engine picks
    /// its unfused `UnfusedDotProductAttention` below sm80 — the `s×s` scores computed, masked
    /// and kept for the backward — ("Disabling FlashAttention 2 / FusedAttention for compute
    /// capability < sm80", `pytorch/attention/dot_product_attention/utils.py` @
    /// transformer-engine 2.9.0 L414-421), and so does Megatron-Core's local attention. False
    /// for V100 (SM70) and Pascal.
    pub fn runs_fused_attention(self) -> bool {
        self.at_least((8, 0))
    }
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
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Node {
    pub gpus_per_node: u32,
    pub fabric: IntraFabric,
    /// Seed 000 `intra_bw`: bytes/s per GPU per direction on the intra-node fabric.
    pub intra_bw: f64,
    /// One-hop latency inside the node, seconds.
    pub intra_latency: f64,
    /// The switch can reduce in-network (NVLink SHARP / NVLS).
    pub in_switch_reduction: bool,
    /// GPUs per NVLink (scale-up) domain: GPUs that reach each other over `fabric` at
    /// `intra_bw`. A multiple of `gpus_per_node`; equal to it where NVLink ends at the host (HGX,
    /// DGX), larger where NVLink switches join hosts: a GB200/GB300 NVL72 rack is one 72-GPU
    /// domain of 18 compute trays of 4 GPUs (hardware.md §2). Collectives are priced by domain
    /// ([`Cluster::domain_gpus`]), not by host.
    pub nvlink_domain: u32,
}

/// The network between nodes.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Network {
    pub topology: NetTopology,
    /// Seed 000 `inter_bw`: bytes/s per GPU per direction off the node (its NIC share).
    pub inter_bw: f64,
    pub nics_per_node: u32,
    /// Oversubscription ratio of the upper network tiers (1.0 = full bisection).
    pub oversubscription: f64,
    /// Seed 000 `link_delay`: fixed per-message latency across the network, seconds.
    pub link_delay: f64,
    /// The network reduces in-switch (InfiniBand SHARP), which NCCL's CollNet algorithms use
    /// (frameworks.md §4.1 "CollNet"); `false` unless the cluster file declares it.
    pub in_network_reduction: bool,
}

/// The collective library whose algorithms the cost model may pick (docs/cost-model.md
/// "Collective library").
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum CollectiveLibrary {
    /// What NCCL runs (collectives.md §2.2, frameworks.md §4.1): Ring, Tree, NVLS, NVLSTree,
    /// CollNet Direct/Chain, PAT, and point-to-point for all-to-all, scatter, gather, send/recv.
    #[default]
    Nccl,
    /// The seeds' full menu (direct, halving-doubling, Bruck, the single binary tree, ...).
    Any,
}

impl CollectiveLibrary {
    /// "nccl" or "any".
    pub fn name(self) -> &'static str {
        match self {
            CollectiveLibrary::Nccl => "nccl",
            CollectiveLibrary::Any => "any",
        }
    }
}

impl std::str::FromStr for CollectiveLibrary {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "nccl" => Ok(CollectiveLibrary::Nccl),
            "any" => Ok(CollectiveLibrary::Any),
            other => Err(format!(
                "unknown collective library {other:?}; expected nccl or any"
            )),
        }
    }
}

/// Software efficiency parameters of seed 000 §5.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
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
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Cluster {
    pub name: String,
    pub nodes: u32,
    pub gpu: Gpu,
    pub node: Node,
    pub network: Network,
    pub efficiency: Efficiency,
    /// The collective library the cluster runs (default NCCL).
    pub library: CollectiveLibrary,
    /// The host memory tier of each node (`[host]`); `None`: nothing can be offloaded.
    pub host: Option<Host>,
    /// What one GPU-hour costs, US dollars (the file's `price_usd_per_gpu_hour`; `--price`
    /// overrides): `None` when the file states none (no bundled cluster does: prices are the
    /// user's contract, not a datasheet figure).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub price_usd_per_gpu_hour: Option<f64>,
}

/// The most a GPU-hour may cost, US dollars: 1000, some 100× what a current datacentre GPU
/// rents for (a few dollars per hour). A bound against typos, not a market figure.
pub const MAX_PRICE_USD_PER_GPU_HOUR: f64 = 1000.0;

/// Why a price per GPU-hour is out of range (`(0, MAX_PRICE_USD_PER_GPU_HOUR]`, finite);
/// `None` when it is fine. One rule for the cluster file's field and `--price`.
pub fn price_range(v: f64) -> Option<String> {
    let expected = format!("US dollars per GPU-hour in (0, {MAX_PRICE_USD_PER_GPU_HOUR}]");
    if !v.is_finite() {
        Some(format!("must be a finite number: expected {expected}"))
    } else if v <= 0.0 {
        Some(format!("must be positive: expected {expected}"))
    } else if v > MAX_PRICE_USD_PER_GPU_HOUR {
        Some(format!("too large: expected {expected}"))
    } else {
        None
    }
}

impl Cluster {
    /// Total number of GPUs.
    pub fn gpus(&self) -> u32 {
        self.nodes * self.node.gpus_per_node
    }

    /// Where the members of a parallel group sit on this cluster's nodes.
    ///
    /// `degrees`: the plan's parallel degrees, innermost (consecutive ranks) first, e.g.
    /// `[tp, cp, dp, pp]`; `in_group[i]`: whether dimension `i` belongs to the group (a TP
    /// group: `[true, false, false, false]`; an EP group of MoE layers may span several inner
    /// dimensions). Returns the group's size, ranks per node and nodes spanned; exact when
    /// node boundaries align with the grid (always for powers of two), a pessimistic bound
    /// otherwise — see [`GroupPlacement::of`]. O(number of dimensions).
    pub fn group_placement(&self, degrees: &[u32], in_group: &[bool]) -> GroupPlacement {
        GroupPlacement::of(self.domain_gpus(), degrees, in_group)
    }

    /// GPUs per NVLink domain as this cluster uses them: the node's `nvlink_domain`, at most
    /// every GPU of the cluster (a 64-GPU job on one NVL72 rack is one 64-GPU domain). Every
    /// "node" of the cost model (a group's `ranks_per_node` and `nodes` in
    /// [`GroupPlacement`], intra- versus inter-node bandwidth) is this domain; ranks fill
    /// domains consecutively, the last one possibly partial. Equal to `gpus_per_node` on every
    /// cluster whose NVLink ends at the host.
    ///
    /// ```
    /// let nvl = autoplan_cluster::resolve_cluster("gb200-nvl72x4").unwrap();
    /// assert_eq!((nvl.node.gpus_per_node, nvl.domain_gpus(), nvl.gpus()), (4, 72, 288));
    /// // An 8-way TP group on trays of 4 stays inside the rack's NVLink domain.
    /// assert!(nvl.group_placement(&[8, 36], &[true, false]).intra_node());
    /// assert_eq!(nvl.with_gpus(64).unwrap().domain_gpus(), 64);
    /// ```
    pub fn domain_gpus(&self) -> u32 {
        self.node.nvlink_domain.min(self.gpus()).max(1)
    }

    /// Whether this cluster's NVLink domain, as it uses it ([`Cluster::domain_gpus`]), spans
    /// several nodes (multi-node NVLink, MNNVL: an NVL72 rack of 4-GPU trays): what the cost
    /// model prices inside the domain a framework must run over NVLink across the trays.
    ///
    /// ```
    /// use autoplan_cluster::resolve_cluster;
    /// assert!(resolve_cluster("gb200-nvl72x4").unwrap().multi_node_nvlink());
    /// assert!(!resolve_cluster("gb200-nvl72x4").unwrap().with_gpus(4).unwrap().multi_node_nvlink());
    /// assert!(!resolve_cluster("dgx-h100").unwrap().multi_node_nvlink());
    /// ```
    pub fn multi_node_nvlink(&self) -> bool {
        self.domain_gpus() > self.node.gpus_per_node
    }

    /// The same cluster with `gpus` GPUs: `gpus / gpus_per_node` nodes (more or fewer than
    /// now). Fewer GPUs than one node holds gives one partially used node: a node of `gpus`
    /// GPUs on the same fabric, per-GPU bandwidths unchanged (a DGX-2 running 4 of its 16
    /// V100s). The name is kept, and so is the NVLink domain: an NVL72 cluster resized to 256
    /// GPUs has 64 trays of 4 filling three 72-GPU domains and a fourth of 40
    /// ([`Cluster::domain_gpus`]).
    ///
    /// ```
    /// let dgx2 = autoplan_cluster::resolve_cluster("dgx2-v100").unwrap();
    /// let four = dgx2.with_gpus(4).unwrap();
    /// assert_eq!((four.nodes, four.node.gpus_per_node), (1, 4));
    /// assert!(dgx2.with_gpus(24).is_err()); // 1.5 DGX-2
    /// ```
    pub fn with_gpus(&self, gpus: u32) -> Result<Cluster, ResizeError> {
        let gpn = self.node.gpus_per_node;
        let mut c = self.clone();
        if gpus == 0 {
            return Err(ResizeError::Zero {
                cluster: self.name.clone(),
            });
        } else if gpus > MAX_GPUS {
            return Err(ResizeError::TooMany {
                cluster: self.name.clone(),
                gpus,
            });
        } else if gpus < gpn {
            c.nodes = 1;
            c.node.gpus_per_node = gpus;
            c.node.nvlink_domain = gpus;
        } else if gpus.is_multiple_of(gpn) {
            c.nodes = gpus / gpn;
        } else {
            return Err(ResizeError::NotMultiple {
                cluster: self.name.clone(),
                gpus,
                gpus_per_node: gpn,
            });
        }
        Ok(c)
    }
}

/// Why [`Cluster::with_gpus`] cannot resize a cluster.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResizeError {
    #[error("cluster {cluster}: cannot have 0 GPUs")]
    Zero { cluster: String },
    #[error("cluster {cluster}: {gpus} GPUs: expected at most {MAX_GPUS} (see MAX_GPUS)")]
    TooMany { cluster: String, gpus: u32 },
    #[error(
        "cluster {cluster}: {gpus} GPUs is neither a multiple of its {gpus_per_node} GPUs per node \
         nor fewer than one node"
    )]
    NotMultiple {
        cluster: String,
        gpus: u32,
        gpus_per_node: u32,
    },
}

/// Where the members of one parallel group sit. By symmetry every group of a given dimension
/// set has the same shape, so this is computed once per (degrees, rank order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
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

    /// Where the members of a parallel group sit when consecutive ranks fill nodes of
    /// `gpus_per_node` GPUs.
    ///
    /// The rank grid is mixed-radix: `degrees` lists the plan's parallel degrees innermost
    /// first (e.g. `[tp, cp, dp, pp]`), so dimension `i` has stride `S_i = d_0 ⋯ d_{i-1}`
    /// and rank `r = Σ c_i S_i`. A group is the set of ranks that differ only in the
    /// dimensions with `in_group[i]` (dimensions past the end of `in_group` are not in the
    /// group; a degree of 0 counts as 1). O(number of dimensions), no rank is enumerated.
    ///
    /// **Aligned case (exact).** Node boundaries fall on digit boundaries when some dimension
    /// `m` has `S_m | g` and `(g / S_m) | d_m` with `S_m ≤ g ≤ S_m d_m` (`g` = GPUs per node),
    /// or when the whole grid fits in one node. This always holds when `g` and the degrees
    /// are powers of two, or when `g` is a product of the innermost degrees. Then the node
    /// index is a function of the outer digits only, every group has the same shape, and a
    /// member dimension keeps `min(d_i, max(1, g / S_i))` of its values inside one node.
    ///
    /// **Misaligned case (upper bound).** Otherwise groups differ in shape (TP = 3 on 8-GPU
    /// nodes: ranks {6, 7, 8} straddle a boundary while {0, 1, 2} do not). We then report the
    /// worst case, never an optimistic one: `nodes` is an upper bound on the nodes any group
    /// spans, the least of `size`, the grid's node count, and the nodes a window of the
    /// group's rank span `L = 1 + Σ_{i∈group} (d_i − 1) S_i` can touch (`⌈(L−1)/g⌉ + 1`);
    /// `ranks_per_node = ⌈size / nodes⌉`. A cost model using it never under-counts
    /// inter-node traffic. The search can test [`GroupPlacement::aligned`] to avoid such
    /// layouts. One misaligned case is exact: a group whose dimensions all lie inside an
    /// innermost block of ranks whose size divides `g` never crosses a node boundary.
    ///
    /// ```
    /// use autoplan_cluster::GroupPlacement;
    /// // TP = 16 innermost, DP = 4, on 8-GPU nodes: a TP group spans 2 nodes, 8 ranks on each.
    /// let tp = GroupPlacement::of(8, &[16, 4], &[true, false]);
    /// assert_eq!((tp.size, tp.ranks_per_node, tp.nodes), (16, 8, 2));
    /// ```
    pub fn of(gpus_per_node: u32, degrees: &[u32], in_group: &[bool]) -> GroupPlacement {
        let g = u64::from(gpus_per_node.max(1));
        let member = |i: usize| in_group.get(i).copied().unwrap_or(false);
        // A group of one rank (every member degree 1: no CP, no EP, a dense model's expert
        // groups) is one rank on one node whatever the grid: the evaluator asks for several
        // on every plan.
        if degrees
            .iter()
            .enumerate()
            .all(|(i, &d)| d <= 1 || !member(i))
        {
            return GroupPlacement {
                size: 1,
                ranks_per_node: 1,
                nodes: 1,
            };
        }
        let mut stride: u64 = 1;
        let mut size: u64 = 1;
        let mut per_node: u64 = 1;
        let mut span: u64 = 1;
        for (i, &d) in degrees.iter().enumerate() {
            let d = u64::from(d.max(1));
            if member(i) {
                size = size.saturating_mul(d);
                // Values of this digit that share a node with digit value 0 (aligned case).
                per_node = per_node.saturating_mul(d.min((g / stride).max(1)));
                span = span.saturating_add((d - 1).saturating_mul(stride));
            }
            stride = stride.saturating_mul(d);
        }
        if Self::aligned(gpus_per_node, degrees) {
            return GroupPlacement {
                size: size as u32,
                ranks_per_node: per_node as u32,
                nodes: (size / per_node) as u32,
            };
        }
        // Every group lies in one aligned block of `inner` consecutive ranks (the product of the
        // degrees up to its outermost member dimension); when `inner` divides `g`, node
        // boundaries (multiples of `g`) never cut such a block: the group is inside one node
        // (TP = 8 on 72-GPU NVLink domains with DP = 32: 8 | 72).
        let outer = in_group.iter().rposition(|&b| b).map_or(0, |i| i + 1);
        let inner = degrees[..outer.min(degrees.len())]
            .iter()
            .fold(1u64, |a, &d| a.saturating_mul(u64::from(d.max(1))));
        if g.is_multiple_of(inner) {
            return GroupPlacement {
                size: size as u32,
                ranks_per_node: size as u32,
                nodes: 1,
            };
        }
        // Upper bound on the nodes any group can touch: a window of `span` consecutive ranks
        // crosses at most ⌈(span − 1)/g⌉ node boundaries.
        let window = (span - 1).div_ceil(g) + 1;
        let nodes = size.min(stride.div_ceil(g)).min(window).max(1);
        GroupPlacement {
            size: size as u32,
            ranks_per_node: size.div_ceil(nodes) as u32,
            nodes: nodes as u32,
        }
    }

    /// True when node boundaries fall on digit boundaries of the rank grid `degrees`
    /// (innermost first) for nodes of `gpus_per_node`: every group of every dimension set
    /// then has the same shape and [`GroupPlacement::of`] is exact. See there.
    pub fn aligned(gpus_per_node: u32, degrees: &[u32]) -> bool {
        let g = u64::from(gpus_per_node.max(1));
        let mut stride: u64 = 1;
        for &d in degrees {
            let d = u64::from(d.max(1));
            if stride.saturating_mul(d) >= g {
                // `g` must split this digit evenly: S_m | g and (g / S_m) | d_m.
                return g % stride == 0 && d % (g / stride) == 0;
            }
            stride = stride.saturating_mul(d);
        }
        // The whole grid fits in one node.
        true
    }
}

/// The most GPUs a cluster may have (files, `--gpus`): 2^20 = 1,048,576, ten times the largest
/// training clusters built so far (~100k GPUs), so any real cluster fits, while GPU counts,
/// their products with a model's dimensions and the search's divisor lists stay small.
pub const MAX_GPUS: u32 = 1 << 20;

/// The most GPUs in one node (`node.gpus_per_node`) and in one NVLink domain
/// (`node.nvlink_domain`): 1024, above the largest NVLink domains announced (576 GPUs,
/// hardware.md §2).
pub const MAX_GPUS_PER_NODE: u32 = 1024;
