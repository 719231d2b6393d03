//! Cluster files (TOML): the raw, unchecked shape ([`RawClusterFile`]) and its validation into a
//! [`Cluster`] in SI units ("parse, don't validate": only a validated `Cluster` leaves here).
//!
//! ```toml
//! name = "a100x64"
//! library = "nccl"            # optional: nccl (default) | any (the seeds' full menu of
//!                             # collective algorithms, docs/cost-model.md)
//!
//! [gpu]
//! name = "A100-SXM4-80GB"
//! arch = "a100"               # v100 | a100 | h100 | h800 | h200 | l40s | pascal |
//!                             # b200 | gb200 | gb300 | other
//! tflops = { bf16 = 312, fp16 = 312, tf32 = 156, fp32 = 19.5 }   # dense peak, TFLOP/s
//!                             # keys: fp32, tf32, fp16, bf16, fp8, fp4
//! hbm_gib = 80                # GiB
//! hbm_gbps = 2039             # GB/s
//! rated_power_w = 400         # optional: the part's rated maximum power (TDP), W
//! power_limit_w = 300         # optional: a lower limit the cluster runs it at, W (not
//!                             # priced: `evaluate`/`search` say its times read as optimistic)
//!
//! [node]
//! gpus_per_node = 8
//! fabric = "nvswitch"         # nvswitch | full-mesh | ring | pcie
//! intra_bw_gbps = 240         # seed 000 intra_bw: GB/s per GPU per direction
//! intra_latency_us = 2.0      # per hop, µs
//! in_switch_reduction = false # NVLink SHARP (NVLS)
//! nvlink_domain = 8           # optional: GPUs per NVLink (scale-up) domain, a multiple of
//!                             # gpus_per_node (default: gpus_per_node). NVL72: gpus_per_node
//!                             # = 4 (a compute tray), nvlink_domain = 72 (the rack)
//!
//! [network]
//! nodes = 8                   # or: gpus = 64 (a multiple of gpus_per_node)
//! topology = "fat-tree"       # fat-tree | rail-optimized | spine-leaf | torus-2d
//! inter_bw_gbps = 24          # seed 000 inter_bw: GB/s per GPU per direction
//! nics_per_node = 8
//! nic_gbit = 200              # optional: NIC line rate, Gb/s; checked against inter_bw
//! oversubscription = 1.0      # ≥ 1 (1 = full bisection)
//! link_delay_us = 2.7         # seed 000 link_delay, µs
//! in_network_reduction = false # optional: InfiniBand SHARP (NCCL CollNet); default false
//!
//! [efficiency]                # seed 000 §5
//! bwurate = 0.96              # [0.01, 1]
//! start_lat_us = 6.0
//! sync_lat_us = 8.0
//! cpufetch_us = 5.0
//! ```
//!
//! `[host]` (optional: the host memory tier for offload) is documented in `host.rs`.
//!
//! Every field is required except `library`, `[host]`, `nic_gbit`, `nvlink_domain` and
//! `in_network_reduction`, and exactly one of `nodes` /
//! `gpus`.
//!
//! `[node]` describes the host (`gpus_per_node` GPUs, and `nics_per_node` NICs in
//! `[network]`) and the NVLink fabric its GPUs are on. Where NVLink switches join several hosts
//! into one domain (GB200/GB300 NVL72: 18 trays of 4 GPUs, hardware.md §2), `nvlink_domain`
//! gives its size: a parallel group inside one domain is priced on `intra_bw` even when it
//! spans hosts, a group across domains on the network (`Cluster::domain_gpus`).

use autoplan_input::{InputError, Source};
use serde::Deserialize;

use crate::{
    Cluster, Efficiency, Gpu, GpuArch, IntraFabric, NetTopology, Network, Node, Precision,
};

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
/// GB/s → bytes/s (1 GB = 1e9 B, the convention of vendor link specs and nccl-tests).
const GBPS: f64 = 1e9;
/// s per µs (divide by it: `5.0 / 1e6` is exactly the double nearest 5e-6, `5.0 * 1e-6` is not).
const US_PER_S: f64 = 1e6;
/// TFLOP/s → FLOP/s.
const TFLOPS: f64 = 1e12;

/// A cluster file as written, before any check.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawClusterFile {
    pub name: String,
    pub gpu: RawGpu,
    pub node: RawNode,
    pub network: RawNetwork,
    pub efficiency: RawEfficiency,
    #[serde(default)]
    pub library: Option<crate::CollectiveLibrary>,
    /// `[host]`: the host memory tier (`host.rs`); optional.
    #[serde(default)]
    pub host: Option<crate::host::RawHost>,
    /// The default `--price`: US dollars per GPU-hour (absent: no dollar figures).
    #[serde(default)]
    pub price_usd_per_gpu_hour: Option<f64>,
}

/// `[gpu]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawGpu {
    pub name: String,
    pub arch: GpuArch,
    pub tflops: RawTflops,
    pub hbm_gib: f64,
    pub hbm_gbps: f64,
    /// The part's rated maximum power, W (its datasheet's TDP); optional.
    #[serde(default)]
    pub rated_power_w: Option<f64>,
    /// The power limit the cluster runs the GPU at, W, where it is set below the rating
    /// (Meta's Grand Teton H100s: 500 W); needs `rated_power_w`, at most it.
    #[serde(default)]
    pub power_limit_w: Option<f64>,
}

/// `[gpu] tflops = { ... }`: dense peak TFLOP/s per precision; at least one.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTflops {
    pub fp32: Option<f64>,
    pub tf32: Option<f64>,
    pub fp16: Option<f64>,
    pub bf16: Option<f64>,
    pub fp8: Option<f64>,
    pub fp4: Option<f64>,
}

/// `[node]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawNode {
    pub gpus_per_node: u32,
    pub fabric: IntraFabric,
    pub intra_bw_gbps: f64,
    pub intra_latency_us: f64,
    pub in_switch_reduction: bool,
    pub nvlink_domain: Option<u32>,
}

/// `[network]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawNetwork {
    pub nodes: Option<u32>,
    pub gpus: Option<u32>,
    pub topology: NetTopology,
    pub inter_bw_gbps: f64,
    pub nics_per_node: u32,
    pub nic_gbit: Option<f64>,
    pub oversubscription: f64,
    pub link_delay_us: f64,
    #[serde(default)]
    pub in_network_reduction: Option<bool>,
}

/// `[efficiency]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEfficiency {
    pub bwurate: f64,
    pub start_lat_us: f64,
    pub sync_lat_us: f64,
    pub cpufetch_us: f64,
}

/// Why a value is outside `[lo, hi]` (or `(lo, hi]` when `open_low`); `None` when it is fine.
/// Every number of a cluster file has such a range: finite, and physically plausible, so that
/// nothing computed from it overflows to infinity or divides by a subnormal.
fn range(v: f64, lo: f64, open_low: bool, hi: f64) -> Option<String> {
    let l = if open_low { "(" } else { "[" };
    let expected = format!("a finite number in {l}{lo}, {hi}]");
    if !v.is_finite() {
        Some(format!("must be {expected}"))
    } else if lo == 0.0 && !open_low && v < 0.0 {
        Some(format!("must not be negative: expected {expected}"))
    } else if if open_low { v <= lo } else { v < lo } {
        let what = if v <= 0.0 {
            "must be positive"
        } else {
            "too small"
        };
        Some(format!("{what}: expected {expected}"))
    } else if v > hi {
        Some(format!("too large: expected {expected}"))
    } else {
        None
    }
}

/// Dense peak TFLOP/s of one precision: [0.1, 1e6]. 0.1 is below any GPU's FP32 peak (a V100
/// has 15.7); 1e6 (an exaFLOP/s per GPU) is 400× a B200's dense FP8 peak.
const TFLOPS_RANGE: (f64, f64) = (0.1, 1e6);
/// HBM per GPU, GiB: (0, 16384]. 16 TiB is 50× the largest HBM stack shipped (288 GiB).
const HBM_GIB_MAX: f64 = 16384.0;
/// Bandwidths in GB/s (HBM, NVLink, the network share): [0.01, 1e6]. 10 MB/s is slower than
/// any link a GPU cluster uses; 1 PB/s is 100× HBM3e (8 TB/s).
const GBPS_RANGE: (f64, f64) = (0.01, 1e6);
/// A NIC's line rate, Gb/s: [0.1, 1e6] (a 100 Mb/s NIC to 1 Pb/s; 800 Gb/s ships today).
const NIC_GBIT_RANGE: (f64, f64) = (0.1, 1e6);
/// Latencies and delays in µs: [0, 1e6]. One second per hop or per collective start is already
/// far beyond any fabric (µs for NVLink, tens of µs across a data-centre network).
const LATENCY_US_MAX: f64 = 1e6;
/// Network oversubscription: [1, 1024] (1 = full bisection; real fabrics are ≤ 8:1).
const OVERSUBSCRIPTION_MAX: f64 = 1024.0;
/// A GPU's power, W: [1, 10000] (a B200 is rated up to 1000 W, a GB300 1400 W; hardware.md §1).
const POWER_W_RANGE: (f64, f64) = (1.0, 1e4);
/// NICs per node: at most 1024 (8–16 today).
const NICS_MAX: u32 = 1024;

impl Cluster {
    /// Parse and validate a cluster file. Syntax errors, unknown fields and missing fields come
    /// with their line and column; impossible values name the field, the value and why.
    ///
    /// ```
    /// use autoplan_input::Source;
    /// let text = autoplan_cluster::bundled_cluster_text("a100x64").unwrap();
    /// let bad = text.replace("bwurate = 0.96", "bwurate = 1.5");
    /// let err = autoplan_cluster::Cluster::from_toml(&Source::new("x.toml", bad)).unwrap_err();
    /// assert!(err.to_string().contains("efficiency.bwurate = 1.5"), "{err}");
    /// ```
    pub fn from_toml(src: &Source) -> Result<Cluster, InputError> {
        let raw: RawClusterFile = src.parse()?;
        raw.validate(src)
    }
}

/// `Ok(v)` when `why` is `None`, else the error naming `path`, the value and the reason.
fn check(src: &Source, path: &[&str], v: f64, why: Option<String>) -> Result<f64, InputError> {
    match why {
        Some(reason) => Err(src.invalid_number(path, v, reason)),
        None => Ok(v),
    }
}

impl RawClusterFile {
    /// Check every value and convert to SI. `src` locates the errors.
    pub fn validate(self, src: &Source) -> Result<Cluster, InputError> {
        let RawClusterFile {
            name,
            gpu,
            node,
            network,
            efficiency,
            library,
            host,
            price_usd_per_gpu_hour,
        } = self;

        if name.trim().is_empty() {
            return Err(src.invalid(&["name"], "\"\"", "must not be empty"));
        }
        let gpu = gpu.validate(src)?;
        let node = node.validate(src)?;
        let (nodes, network) = network.validate(node.gpus_per_node, src)?;
        let efficiency = efficiency.validate(src)?;
        let host = host
            .map(|h| h.validate(src, node.gpus_per_node, gpu.hbm_bw))
            .transpose()?;
        let price_usd_per_gpu_hour = match price_usd_per_gpu_hour {
            Some(v) => Some(check(
                src,
                &["price_usd_per_gpu_hour"],
                v,
                crate::price_range(v),
            )?),
            None => None,
        };
        Ok(Cluster {
            name,
            nodes,
            gpu,
            node,
            network,
            efficiency,
            library: library.unwrap_or_default(),
            host,
            price_usd_per_gpu_hour,
        })
    }
}

impl RawGpu {
    /// `[gpu]`, checked and in SI units.
    fn validate(self, src: &Source) -> Result<Gpu, InputError> {
        let gpu = self;
        if gpu.name.trim().is_empty() {
            return Err(src.invalid(&["gpu", "name"], "\"\"", "must not be empty"));
        }

        let t = &gpu.tflops;
        let mut peak_flops = Vec::new();
        for (key, p, v) in [
            ("fp4", Precision::Fp4, t.fp4),
            ("fp8", Precision::Fp8, t.fp8),
            ("bf16", Precision::Bf16, t.bf16),
            ("fp16", Precision::Fp16, t.fp16),
            ("tf32", Precision::Tf32, t.tf32),
            ("fp32", Precision::Fp32, t.fp32),
        ] {
            if let Some(v) = v {
                let (lo, hi) = TFLOPS_RANGE;
                check(src, &["gpu", "tflops", key], v, range(v, lo, false, hi))?;
                peak_flops.push((p, v * TFLOPS));
            }
        }
        if peak_flops.is_empty() {
            return Err(src.invalid(
                &["gpu", "tflops"],
                "{}",
                "give the dense peak of at least one precision (fp32, tf32, fp16, bf16, fp8, fp4)",
            ));
        }
        let hbm_gib = gpu.hbm_gib;
        check(
            src,
            &["gpu", "hbm_gib"],
            hbm_gib,
            range(hbm_gib, 0.0, true, HBM_GIB_MAX),
        )?;
        let (lo, hi) = GBPS_RANGE;
        let hbm_gbps = check(
            src,
            &["gpu", "hbm_gbps"],
            gpu.hbm_gbps,
            range(gpu.hbm_gbps, lo, false, hi),
        )?;

        let (lo, hi) = POWER_W_RANGE;
        let watts = |key: &str, v: Option<f64>| match v {
            Some(v) => check(src, &["gpu", key], v, range(v, lo, false, hi)).map(Some),
            None => Ok(None),
        };
        let rated_power_w = watts("rated_power_w", gpu.rated_power_w)?;
        let power_limit_w = watts("power_limit_w", gpu.power_limit_w)?;
        match (power_limit_w, rated_power_w) {
            (Some(l), None) => {
                return Err(src.invalid_number(
                    &["gpu", "power_limit_w"],
                    l,
                    "a power limit needs the part's rating beside it (`rated_power_w`)",
                ))
            }
            (Some(l), Some(r)) if l > r => {
                return Err(src.invalid_number(
                    &["gpu", "power_limit_w"],
                    l,
                    format!("above the part's rating, rated_power_w = {r}: a limit caps it"),
                ))
            }
            _ => {}
        }

        Ok(Gpu {
            name: gpu.name,
            arch: gpu.arch,
            peak_flops,
            hbm_bytes: hbm_gib * GIB,
            hbm_bw: hbm_gbps * GBPS,
            rated_power_w,
            power_limit_w,
        })
    }
}

impl RawNode {
    /// `[node]`, checked and in SI units.
    fn validate(self, src: &Source) -> Result<Node, InputError> {
        let node = self;
        let (lo, hi) = GBPS_RANGE;
        let gpn = node.gpus_per_node;
        if gpn == 0 {
            return Err(src.invalid(
                &["node", "gpus_per_node"],
                0,
                "a node needs at least one GPU",
            ));
        }
        if gpn > crate::MAX_GPUS_PER_NODE {
            return Err(src.invalid(
                &["node", "gpus_per_node"],
                gpn,
                format!("must be in [1, {}]", crate::MAX_GPUS_PER_NODE),
            ));
        }
        let intra_bw = node.intra_bw_gbps;
        check(
            src,
            &["node", "intra_bw_gbps"],
            intra_bw,
            range(intra_bw, lo, false, hi),
        )?;
        let intra_lat = node.intra_latency_us;
        check(
            src,
            &["node", "intra_latency_us"],
            intra_lat,
            range(intra_lat, 0.0, false, LATENCY_US_MAX),
        )?;

        let domain = node.nvlink_domain.unwrap_or(gpn);
        if domain < gpn || !domain.is_multiple_of(gpn) || domain > crate::MAX_GPUS_PER_NODE {
            return Err(src.invalid(
                &["node", "nvlink_domain"],
                domain,
                format!(
                    "GPUs per NVLink domain: a multiple of node.gpus_per_node = {gpn} (whole \
                     hosts), at most {}",
                    crate::MAX_GPUS_PER_NODE
                ),
            ));
        }

        Ok(Node {
            gpus_per_node: gpn,
            fabric: node.fabric,
            intra_bw: intra_bw * GBPS,
            intra_latency: intra_lat / US_PER_S,
            in_switch_reduction: node.in_switch_reduction,
            nvlink_domain: domain,
        })
    }
}

impl RawNetwork {
    /// `[network]`, checked and in SI units, with the number of nodes; `gpn` is
    /// `node.gpus_per_node`, already checked.
    fn validate(self, gpn: u32, src: &Source) -> Result<(u32, Network), InputError> {
        let network = self;
        let nodes = network.node_count(gpn, src)?;
        let (lo, hi) = GBPS_RANGE;
        let inter_bw = network.inter_bw_gbps;
        check(
            src,
            &["network", "inter_bw_gbps"],
            inter_bw,
            range(inter_bw, lo, false, hi),
        )?;
        if network.nics_per_node > NICS_MAX {
            return Err(src.invalid(
                &["network", "nics_per_node"],
                network.nics_per_node,
                format!("must be in [0, {NICS_MAX}]"),
            ));
        }
        if network.nics_per_node == 0 && nodes > 1 {
            return Err(src.invalid(
                &["network", "nics_per_node"],
                0,
                format!("{nodes} nodes cannot talk without a NIC"),
            ));
        }
        if let Some(nic) = network.nic_gbit {
            let (nlo, nhi) = NIC_GBIT_RANGE;
            check(
                src,
                &["network", "nic_gbit"],
                nic,
                range(nic, nlo, false, nhi),
            )?;
            // The GPU's share of the node's NIC line rate (Gb/s → GB/s: ÷ 8).
            let share = nic / 8.0 * f64::from(network.nics_per_node) / f64::from(gpn);
            if inter_bw > share * (1.0 + 1e-9) {
                return Err(src.invalid(
                    &["network", "inter_bw_gbps"],
                    inter_bw,
                    format!(
                        "exceeds the GPU's share of the NIC line rate: {} NICs × {nic} Gb/s / 8 / {gpn} GPUs = {share} GB/s",
                        network.nics_per_node
                    ),
                ));
            }
        }
        let over = network.oversubscription;
        if !(over.is_finite() && (1.0..=OVERSUBSCRIPTION_MAX).contains(&over)) {
            return Err(src.invalid_number(
                &["network", "oversubscription"],
                over,
                format!(
                    "must be at least 1 (1 = full bisection bandwidth) and at most \
                     {OVERSUBSCRIPTION_MAX}"
                ),
            ));
        }
        let delay = network.link_delay_us;
        check(
            src,
            &["network", "link_delay_us"],
            delay,
            range(delay, 0.0, false, LATENCY_US_MAX),
        )?;

        Ok((
            nodes,
            Network {
                topology: network.topology,
                inter_bw: inter_bw * GBPS,
                nics_per_node: network.nics_per_node,
                oversubscription: over,
                link_delay: delay / US_PER_S,
                in_network_reduction: network.in_network_reduction.unwrap_or(false),
            },
        ))
    }

    /// The number of nodes, from `nodes` or `gpus` (exactly one given), within the GPU limit.
    fn node_count(&self, gpn: u32, src: &Source) -> Result<u32, InputError> {
        let network = self;
        let nodes = match (network.nodes, network.gpus) {
            (Some(_), Some(g)) => {
                return Err(src.invalid(
                    &["network", "gpus"],
                    g,
                    "give either network.nodes or network.gpus, not both",
                ))
            }
            (None, None) => {
                return Err(src.invalid(
                    &["network"],
                    "(no size)",
                    "missing the cluster size: give network.nodes or network.gpus",
                ))
            }
            (Some(0), None) => {
                return Err(src.invalid(
                    &["network", "nodes"],
                    0,
                    "a cluster needs at least one node",
                ))
            }
            (Some(n), None) => n,
            (None, Some(0)) => {
                return Err(src.invalid(
                    &["network", "gpus"],
                    0,
                    "a cluster needs at least one GPU",
                ))
            }
            (None, Some(g)) if !g.is_multiple_of(gpn) => {
                return Err(src.invalid(
                    &["network", "gpus"],
                    g,
                    format!("not a multiple of node.gpus_per_node = {gpn}"),
                ))
            }
            (None, Some(g)) => g / gpn,
        };
        if nodes.checked_mul(gpn).is_none_or(|g| g > crate::MAX_GPUS) {
            let field = if network.gpus.is_some() {
                "gpus"
            } else {
                "nodes"
            };
            return Err(src.invalid(
                &["network", field],
                network.gpus.unwrap_or(nodes),
                format!(
                    "{nodes} nodes × {gpn} GPUs: a cluster has at most {} GPUs",
                    crate::MAX_GPUS
                ),
            ));
        }
        Ok(nodes)
    }
}

impl RawEfficiency {
    /// `[efficiency]`, checked and in SI units.
    fn validate(self, src: &Source) -> Result<Efficiency, InputError> {
        let e = &self;
        // 1 % is far below any measured link utilisation (0.8–0.97); a smaller fraction only
        // turns bandwidths into subnormals and times into infinity.
        if !(e.bwurate >= 0.01 && e.bwurate <= 1.0) {
            return Err(src.invalid_number(
                &["efficiency", "bwurate"],
                e.bwurate,
                "a fraction of the nominal bandwidth: must be in [0.01, 1]",
            ));
        }
        for (key, v) in [
            ("start_lat_us", e.start_lat_us),
            ("sync_lat_us", e.sync_lat_us),
            ("cpufetch_us", e.cpufetch_us),
        ] {
            check(
                src,
                &["efficiency", key],
                v,
                range(v, 0.0, false, LATENCY_US_MAX),
            )?;
        }

        Ok(Efficiency {
            bwurate: e.bwurate,
            start_lat: e.start_lat_us / US_PER_S,
            sync_lat: e.sync_lat_us / US_PER_S,
            cpufetch: e.cpufetch_us / US_PER_S,
        })
    }
}
