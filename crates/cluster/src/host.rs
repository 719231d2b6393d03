//! The host memory tier of a node: its capacity, its bandwidth (what bounds a CPU optimizer
//! step) and the link between the host and each GPU (PCIe or NVLink-C2C), for offload to host
//! memory (optimizer state, Megatron-Core `--optimizer-cpu-offload`).
//!
//! ```toml
//! [host]                      # optional; without it nothing can be offloaded
//! memory_gib = 2048           # host memory per node, GiB
//! memory_gbps = 409.6         # host memory bandwidth per node, GB/s (all sockets)
//! link = "pcie-gen4"          # pcie-gen3 | pcie-gen4 | pcie-gen5 | nvlink-c2c
//! link_gbps = 26.3            # one host link, GB/s per direction (measured H2D where known)
//! gpus_per_link = 2           # GPUs that share one link (a PCIe switch, a Grace CPU)
//! ```
//!
//! Figures and their sources are in each bundled cluster file (hardware.md §3 of the
//! reference notes: DGX host memory, Grace LPDDR5X and NVLink-C2C; collectives.md §3: PCIe H2D
//! measured rates).

use autoplan_input::{InputError, Source};
use serde::{Deserialize, Serialize};

/// How the host reaches the GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostLink {
    PcieGen3,
    PcieGen4,
    PcieGen5,
    /// Grace-Hopper/Blackwell's coherent chip-to-chip link (hardware.md §3).
    NvlinkC2c,
}

impl HostLink {
    /// The line rate of one link per direction, GB/s, the bound a `link_gbps` may not pass:
    /// PCIe x16 Gen3 15.75 (8 GT/s, 128b/130b; collectives.md §2.3.1 via the thesis clusters),
    /// Gen4 31.5, Gen5 63.0 (128b/130b, hardware.md §3 "PCIe x16 bandwidth");
    /// NVLink-C2C 450 (900 GB/s bidirectional, hardware.md §3).
    pub fn line_rate_gbps(self) -> f64 {
        match self {
            HostLink::PcieGen3 => 15.75,
            HostLink::PcieGen4 => 31.5,
            HostLink::PcieGen5 => 63.0,
            HostLink::NvlinkC2c => 450.0,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            HostLink::PcieGen3 => "PCIe Gen3 x16",
            HostLink::PcieGen4 => "PCIe Gen4 x16",
            HostLink::PcieGen5 => "PCIe Gen5 x16",
            HostLink::NvlinkC2c => "NVLink-C2C",
        }
    }
}

/// A node's host memory tier, SI units.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Host {
    /// Host memory of one node, bytes.
    pub memory_bytes: f64,
    /// Host memory bandwidth of one node, bytes/s.
    pub memory_bw: f64,
    pub link: HostLink,
    /// One host link, bytes/s per direction.
    pub link_bw: f64,
    /// GPUs sharing one link.
    pub gpus_per_link: u32,
}

impl Host {
    /// Host memory per GPU of a node of `gpus_per_node` (each GPU's process offloads its own
    /// state; the node's memory is shared evenly), bytes.
    pub fn memory_per_gpu(&self, gpus_per_node: u32) -> f64 {
        self.memory_bytes / gpus_per_node.max(1) as f64
    }

    /// Host memory bandwidth per GPU when every GPU of the node runs its CPU optimizer step at
    /// once, bytes/s.
    pub fn memory_bw_per_gpu(&self, gpus_per_node: u32) -> f64 {
        self.memory_bw / gpus_per_node.max(1) as f64
    }

    /// Link bandwidth per GPU per direction when the GPUs sharing a link transfer at once,
    /// bytes/s.
    pub fn link_bw_per_gpu(&self) -> f64 {
        self.link_bw / self.gpus_per_link.max(1) as f64
    }
}

/// `[host]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHost {
    pub memory_gib: f64,
    pub memory_gbps: f64,
    pub link: HostLink,
    pub link_gbps: f64,
    pub gpus_per_link: u32,
}

/// Host memory per node, GiB: (0, 65536]. 64 TiB is 16× the largest DGX option (4 TB,
/// hardware.md §3).
const MEMORY_GIB_MAX: f64 = 65536.0;
/// Host memory bandwidth per node, GB/s: [1, 100000] (a 12-channel DDR5 socket gives a few
/// hundred; a GB300 rack's 36 Graces 14 TB/s in all, hardware.md §3).
const MEMORY_GBPS_RANGE: (f64, f64) = (1.0, 1e5);
/// GPUs sharing one host link: at most 64.
const GPUS_PER_LINK_MAX: u32 = 64;

impl RawHost {
    /// `[host]`, checked and in SI units. `gpus_per_node` bounds `gpus_per_link`; `hbm_bw`
    /// (bytes/s) bounds the per-GPU host bandwidth: host memory faster than the GPU's own HBM
    /// is not a host tier (and would make an offloaded optimizer step cheaper than the GPU's).
    pub fn validate(
        self,
        src: &Source,
        gpus_per_node: u32,
        hbm_bw: f64,
    ) -> Result<Host, InputError> {
        let err =
            |field: &str, v: f64, why: String| Err(src.invalid_number(&["host", field], v, why));
        let m = self.memory_gib;
        if !m.is_finite() || m <= 0.0 || m > MEMORY_GIB_MAX {
            return err(
                "memory_gib",
                m,
                format!("must be a finite number in (0, {MEMORY_GIB_MAX}] (GiB per node)"),
            );
        }
        let (lo, hi) = MEMORY_GBPS_RANGE;
        let bw = self.memory_gbps;
        if !bw.is_finite() || !(lo..=hi).contains(&bw) {
            return err(
                "memory_gbps",
                bw,
                format!("must be a finite number in [{lo}, {hi}] (GB/s per node)"),
            );
        }
        if bw * 1e9 / gpus_per_node.max(1) as f64 > hbm_bw {
            return err(
                "memory_gbps",
                bw,
                format!(
                    "per GPU ({:.1} GB/s over {gpus_per_node} GPUs) exceeds the GPU's HBM \
                     bandwidth ({:.0} GB/s): not a host memory",
                    bw / gpus_per_node.max(1) as f64,
                    hbm_bw / 1e9
                ),
            );
        }
        let line = self.link.line_rate_gbps();
        let l = self.link_gbps;
        if !l.is_finite() || l <= 0.0 || l > line {
            return err(
                "link_gbps",
                l,
                format!(
                    "must be a finite number in (0, {line}] GB/s per direction (the {} line \
                     rate)",
                    self.link.name()
                ),
            );
        }
        let g = self.gpus_per_link;
        if g == 0 || g > GPUS_PER_LINK_MAX || g > gpus_per_node {
            return Err(src.invalid(
                &["host", "gpus_per_link"],
                g,
                format!(
                    "must be in [1, {}] (at most the node's {gpus_per_node} GPUs)",
                    gpus_per_node.min(GPUS_PER_LINK_MAX)
                ),
            ));
        }
        Ok(Host {
            memory_bytes: m * 1024.0 * 1024.0 * 1024.0,
            memory_bw: bw * 1e9,
            link: self.link,
            link_bw: l * 1e9,
            gpus_per_link: g,
        })
    }
}
