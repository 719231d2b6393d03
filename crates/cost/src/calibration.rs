//! Calibrated link and software constants, with their sources, and the reference machines of
//! `collectives_measured.csv` built from them.
//!
//! Link bandwidths are NCCL's *effective* per-GPU figures (`topo.h`, collectives.md §2.3.1:
//! NVLink 20 GB/s per link on SM80, 20.6 on SM90; NICs limited by their PCIe slot), not line
//! rates. On them a single `bwurate` fits every fabric of the measured table; on line rates it
//! would have to be ≈0.77 for NVLink3 and ≈0.96 for HDR, which one `bwurate` per cluster
//! cannot express. Cluster files should therefore give `intra_bw`/`inter_bw` as these effective
//! values (or scale `bwurate` accordingly).
//!
//! Which rows fixed which constant (the rest of `collectives_measured.csv` is out of sample):
//! - [`START_LAT`], [`HOP_NVLINK`]: c15 and c17 (A100 1-channel LL ring, 2 and 14 steps:
//!   10.0 and 33.7 µs → 1.98 µs per step, 6.05 µs fixed).
//! - [`SYNC_LAT`]: c03–c05 (A100 all-reduce 64 MB–1 GB, where the Simple protocol's per-step
//!   cost is what separates measurement from the bandwidth term; any value in 5–24 µs keeps
//!   c02–c05 within 20%).
//! - [`BWURATE`]: c06 (A100 all-reduce 8 GB: 231.6 / 240 = 0.965).
//!
//! H100, H800 and multi-node rows (c07–c14, c18–c20) are predictions with these constants.

use autoplan_cluster::{
    Cluster, Efficiency, Gpu, GpuArch, IntraFabric, NetTopology, Network, Node, Precision,
};

/// One fabric's calibrated constants.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FabricPreset {
    /// Short name.
    pub name: &'static str,
    /// Effective bandwidth per GPU per direction, bytes/s (before `bwurate`).
    pub bandwidth: f64,
    /// Per-step hop latency, seconds (`intra_latency` or `link_delay`).
    pub hop_latency: f64,
    /// Where the numbers come from.
    pub source: &'static str,
}

/// Per-step hop latency on NVLink/NVSwitch: 1.98 µs (c15/c17 fit; NCCL's model has 0.6 µs of
/// hardware + the LL protocol's flag round trip).
pub const HOP_NVLINK: f64 = 2.0e-6;
/// Per-step network latency: NCCL `hwLat[NET][Ring][LL]` = 2.7 µs (tuning.cc,
/// collectives.md §2.4); seed 000 §5.4 gives 0.5–2 µs for the switches and cables alone.
pub const HOP_NET: f64 = 2.7e-6;

/// A100 SXM4, NVLink3 through NVSwitch: 12 links × 20 GB/s = 240 GB/s (NCCL SM80, topo.h).
pub const NVLINK3_A100: FabricPreset = FabricPreset {
    name: "nvlink3-a100",
    bandwidth: 240e9,
    hop_latency: HOP_NVLINK,
    source: "NCCL topo.h SM80 20 GB/s x 12 links (collectives.md §2.3.1)",
};
/// H100 SXM5, NVLink4 through NVSwitch: 18 × 20.6 = 370.8 GB/s (NCCL SM90).
pub const NVLINK4_H100: FabricPreset = FabricPreset {
    name: "nvlink4-h100",
    bandwidth: 370.8e9,
    hop_latency: HOP_NVLINK,
    source: "NCCL topo.h SM90 20.6 GB/s x 18 links (collectives.md §2.3.1)",
};
/// H800, NVLink4 with 8 links: 8 × 20.6 = 164.8 GB/s (DeepSeek measured ≈160).
pub const NVLINK_H800: FabricPreset = FabricPreset {
    name: "nvlink-h800",
    bandwidth: 164.8e9,
    hop_latency: HOP_NVLINK,
    source:
        "NCCL topo.h SM90 20.6 GB/s x 8 links; DeepSeek-V3#28 ~160 (collectives.md §2.3.1, §4.6)",
};
/// InfiniBand HDR 200 Gb/s behind PCIe Gen4 x16: min(25, 24) = 24 GB/s per NIC.
pub const IB_HDR: FabricPreset = FabricPreset {
    name: "ib-hdr",
    bandwidth: 24e9,
    hop_latency: HOP_NET,
    source: "NCCL NIC 25 GB/s limited by PCIe Gen4 24 GB/s (collectives.md §2.3.1; nccl#812: 8 x 24 = 192)",
};
/// InfiniBand NDR 400 Gb/s (ConnectX-7) behind PCIe Gen5 x16: min(50, 48) = 48 GB/s per NIC.
pub const IB_NDR: FabricPreset = FabricPreset {
    name: "ib-ndr",
    bandwidth: 48e9,
    hop_latency: HOP_NET,
    source: "NCCL NIC 50 GB/s limited by PCIe Gen5 48 GB/s (collectives.md §2.3.1, §3)",
};

/// Bandwidth utilisation on the effective link figures above (c06: 231.6 / 240).
pub const BWURATE: f64 = 0.96;
/// Software start-up cost, once per collective call (c15/c17 intercept 6.05 µs; NCCL
/// `baseLat[Ring][LL]` = 6.6 µs).
pub const START_LAT: f64 = 6.0e-6;
/// Per-step synchronisation of the Simple protocol (fit on c03–c05; NCCL's Simple step costs
/// 3.4 µs on NVLink and 14 µs on the network in its own model).
pub const SYNC_LAT: f64 = 8.0e-6;
/// Host round trip for the split sizes of a variable all-to-all (seed 000 §7.5 `cpufetch`).
/// Not calibrated: no measured row isolates it; a device-to-host copy + stream sync is a few µs.
pub const CPUFETCH: f64 = 5.0e-6;

/// The software efficiency block with the calibrated defaults.
pub fn default_efficiency() -> Efficiency {
    Efficiency {
        bwurate: BWURATE,
        start_lat: START_LAT,
        sync_lat: SYNC_LAT,
        cpufetch: CPUFETCH,
    }
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// A100-SXM4-80GB: dense 312 TFLOP/s BF16/FP16, 156 TF32, 19.5 FP32; 2039 GB/s HBM2e
/// (NVIDIA A100 datasheet).
pub fn gpu_a100() -> Gpu {
    Gpu {
        name: "A100-SXM4-80GB".into(),
        arch: GpuArch::A100,
        peak_flops: vec![
            (Precision::Bf16, 312e12),
            (Precision::Fp16, 312e12),
            (Precision::Tf32, 156e12),
            (Precision::Fp32, 19.5e12),
        ],
        hbm_bytes: 80.0 * GIB,
        hbm_bw: 2039e9,
        rated_power_w: None,
        power_limit_w: None,
    }
}

/// H100-SXM5-80GB: dense 989 TFLOP/s BF16/FP16, 1979 FP8, 494.7 TF32, 67 FP32; 3350 GB/s
/// HBM3 (NVIDIA H100 datasheet). `arch` lets H800 reuse it.
pub fn gpu_h100(name: &str, arch: GpuArch) -> Gpu {
    Gpu {
        name: name.into(),
        arch,
        peak_flops: vec![
            (Precision::Fp8, 1979e12),
            (Precision::Bf16, 989e12),
            (Precision::Fp16, 989e12),
            (Precision::Tf32, 494.7e12),
            (Precision::Fp32, 67e12),
        ],
        hbm_bytes: 80.0 * GIB,
        hbm_bw: 3350e9,
        rated_power_w: None,
        power_limit_w: None,
    }
}

fn node(fabric: &FabricPreset, in_switch: bool) -> Node {
    Node {
        gpus_per_node: 8,
        fabric: IntraFabric::Nvswitch,
        intra_bw: fabric.bandwidth,
        intra_latency: fabric.hop_latency,
        in_switch_reduction: in_switch,
        nvlink_domain: 8,
    }
}

fn network(nic: &FabricPreset) -> Network {
    Network {
        topology: NetTopology::FatTree,
        inter_bw: nic.bandwidth,
        nics_per_node: 8,
        oversubscription: 1.0,
        link_delay: nic.hop_latency,
        in_network_reduction: false,
    }
}

/// `nodes` × DGX A100 (8 × A100 on NVSwitch, 8 × HDR 200 Gb/s), full fat-tree.
pub fn dgx_a100(nodes: u32) -> Cluster {
    Cluster {
        name: format!("dgx-a100x{nodes}"),
        nodes,
        gpu: gpu_a100(),
        node: node(&NVLINK3_A100, false),
        network: network(&IB_HDR),
        efficiency: default_efficiency(),
        library: autoplan_cluster::CollectiveLibrary::Nccl,
        host: None,
        price_usd_per_gpu_hour: None,
    }
}

/// `nodes` × DGX H100 (8 × H100 on NVSwitch with NVLink SHARP, 8 × NDR 400 Gb/s), full fat-tree.
pub fn dgx_h100(nodes: u32) -> Cluster {
    Cluster {
        name: format!("dgx-h100x{nodes}"),
        nodes,
        gpu: gpu_h100("H100-SXM5-80GB", GpuArch::H100),
        node: node(&NVLINK4_H100, true),
        network: network(&IB_NDR),
        efficiency: default_efficiency(),
        library: autoplan_cluster::CollectiveLibrary::Nccl,
        host: None,
        price_usd_per_gpu_hour: None,
    }
}

/// `nodes` × HGX H800 (8 × H800 on NVSwitch, 8 × CX7 400 Gb/s), full fat-tree (DeepSeek's).
pub fn hgx_h800(nodes: u32) -> Cluster {
    Cluster {
        name: format!("hgx-h800x{nodes}"),
        nodes,
        gpu: gpu_h100("H800-SXM5-80GB", GpuArch::H800),
        node: node(&NVLINK_H800, true),
        network: network(&IB_NDR),
        efficiency: default_efficiency(),
        library: autoplan_cluster::CollectiveLibrary::Nccl,
        host: None,
        price_usd_per_gpu_hour: None,
    }
}
