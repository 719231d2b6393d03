//! Which bundled cluster a published row ran on: its GPU, and its network where that is not
//! the GPU's usual one; rows on hardware autoplan does not bundle are skipped with the reason,
//! never priced on other hardware.

use autoplan_cluster::Cluster;

use super::{skip, PublishedRun, Skipped};

/// The cluster of row `r` from `cluster_for` (its bundled cluster's name, the row's GPU count
/// and GPUs per node: [`super::case_of`]'s lookup), or why there is none: no bundled cluster of
/// its GPU (or of its GPU on its network), or a run over several nodes of another size than the
/// bundled cluster's (a node's NVLink and NICs are the cluster's facts, not the row's; an NVL72
/// row may count its rack or its tray as the node; a run inside one of its nodes is priced).
pub(super) fn case_cluster(
    r: &PublishedRun,
    cluster_for: &dyn Fn(&str, u32, u32) -> Option<Cluster>,
) -> Result<Cluster, Skipped> {
    let id = r.id.as_str();
    let gpn = r.gpus_per_node.unwrap_or(8);
    let cluster = match cluster_name_of(r).and_then(|name| cluster_for(name, r.num_gpus, gpn)) {
        Some(c) => c,
        None if cluster_name_for(&r.gpu).is_some() => {
            let net = r.inter_node_link.as_deref().unwrap_or("");
            return Err(skip(
                id,
                format!("no bundled cluster of GPU `{}` on network `{net}`", r.gpu),
            ));
        }
        None => return Err(skip(id, format!("no bundled cluster for GPU `{}`", r.gpu))),
    };
    if let Some(stated) = r.gpus_per_node {
        let (node, domain) = (cluster.node.gpus_per_node, cluster.node.nvlink_domain);
        if r.num_gpus > stated && stated != node && stated != domain {
            return Err(skip(
                id,
                format!(
                    "the row's nodes hold {stated} GPUs, the bundled cluster `{}`'s {node}: no \
                     bundled cluster of its node",
                    cluster.name
                ),
            ));
        }
    }
    Ok(cluster)
}

/// The bundled cluster of a row (resized to its GPU count by the caller with
/// `Cluster::with_gpus`): by the network its `inter_node_link` cell names where that network is
/// not its GPU's usual one, else by its GPU ([`cluster_name_for`]).
///
/// - An A100 run on Omni-Path (BLOOM's Jean Zay: "4 OPA links/node") is `jean-zay-a100`: 4 ×
///   100 Gb/s per node, not the 8 × 200 Gb/s HDR of `selene-a100`; another GPU's Omni-Path
///   run has no bundled cluster (`None`).
pub fn cluster_name_of(r: &PublishedRun) -> Option<&'static str> {
    let by_gpu = cluster_name_for(&r.gpu)?;
    let net = r
        .inter_node_link
        .as_deref()
        .unwrap_or("")
        .to_ascii_lowercase();
    let omni_path = net.contains("omni-path") || net.contains("omnipath") || net.contains("opa ");
    match by_gpu {
        "selene-a100" if omni_path => Some("jean-zay-a100"),
        // No other GPU's Omni-Path cluster is bundled: not priced on InfiniBand.
        _ if omni_path => None,
        other => Some(other),
    }
}

/// The bundled cluster `name` resized to `gpus` GPUs: [`super::case_of`]'s `cluster_for` over the
/// bundled library (`None` where the name is not bundled or the count does not fill whole
/// nodes).
pub fn bundled_cluster(name: &str, gpus: u32, _gpus_per_node: u32) -> Option<Cluster> {
    autoplan_cluster::resolve_cluster(name)
        .ok()?
        .with_gpus(gpus)
        .ok()
}

/// The bundled cluster of a row's `gpu` cell, by the GPU it names:
///
/// - `GB200 (NVL72)`, `GB300 (NVL72)`: `gb200-nvl72x4`, `gb300-nvl72x4` (72-GPU NVLink
///   domains of 4-GPU trays); `B200 (DGX-B200)`: `b200x256`. GB200 and GB300 are tested before
///   B200 (`gb200` contains `b200`).
/// - `H800`: `h800x2048`; `H200`: `h200x128`.
/// - H100: Meta's 96 GB HBM2e part at 500 W (`96GB`, `HBM2e`, `500W`: torchtitan's Grand Teton
///   rows) is `grand-teton-h100`; every other H100 (SXM5 80 GB HBM3, 700 W: DGX H100, Eos, and
///   Llama 3's Grand Teton servers, Llama 3 paper §3.3.1) is `dgx-h100`.
/// - A100: `dgx-a100-40gb` where the cell names 40 GB and not 80 GB, else `selene-a100`
///   (80 GB; MT-NLG's cell names both, its sources say 80). MegaScale's GPUs are named only "NVIDIA Ampere"; its Megatron
///   MFUs reproduce with the A100's 312 TFLOP/s peak (published_runs_2_SOURCES.md, `megascale_*`),
///   so an Ampere GPU of a training cluster is read as the A100.
/// - V100: `dgx2-v100`.
/// - None for a PCIe card (an H100 or H200 "NVL" too: a PCIe card with NVLink bridges, not
///   NVL72's rack) or a GH200 superchip: the bundled clusters hold SXM parts on NVSwitch.
pub fn cluster_name_for(gpu: &str) -> Option<&'static str> {
    let g = gpu.to_ascii_lowercase();
    // "NVL" as a card's name, not "NVLink" or a rack's "NVL72"/"NVL36".
    let nvl_card = g.match_indices("nvl").any(|(i, _)| {
        let rest = &g[i + 3..];
        !rest.starts_with("ink") && !rest.starts_with(|c: char| c.is_ascii_digit())
    });
    if g.contains("pcie") || g.contains("gh200") || nvl_card {
        // Every bundled cluster of these GPUs is of SXM parts on NVSwitch; a PCIe card (no
        // NVSwitch, lower clocks and power) or a Grace Hopper superchip (its own HBM size and
        // host link) is none of them.
        None
    } else if g.contains("v100") {
        Some("dgx2-v100")
    } else if g.contains("gb300") {
        Some("gb300-nvl72x4")
    } else if g.contains("gb200") {
        Some("gb200-nvl72x4")
    } else if g.contains("b200") {
        Some("b200x256")
    } else if g.contains("h800") {
        Some("h800x2048")
    } else if g.contains("h200") {
        Some("h200x128")
    } else if g.contains("h100")
        && (g.contains("96gb") || g.contains("hbm2e") || g.contains("500w"))
    {
        Some("grand-teton-h100")
    } else if g.contains("h100") {
        Some("dgx-h100")
    } else if g.contains("a100") && g.contains("40gb") && !g.contains("80gb") {
        Some("dgx-a100-40gb")
    } else if g.contains("a100") || g.contains("ampere") {
        Some("selene-a100")
    } else {
        None
    }
}
