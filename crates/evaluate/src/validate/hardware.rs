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
    if let Some(cell) = r.intra_node_link.as_deref().filter(|c| pcie_node(c)) {
        return Err(skip(
            id,
            format!(
                "the row's GPUs are joined by PCIe inside the node (`{cell}`); every bundled \
                 cluster of GPU `{}` joins them by NVSwitch",
                r.gpu
            ),
        ));
    }
    let name = cluster_name_of(r);
    let cluster = match name.and_then(|n| cluster_for(n, r.num_gpus, gpn)) {
        Some(c) => c,
        None => {
            // The bundled cluster is there but cannot take the row's GPU count (not whole
            // nodes beyond one): say that, not that its network is unknown.
            let resize = name
                .and_then(|n| autoplan_cluster::resolve_cluster(n).ok())
                .and_then(|c| c.with_gpus(r.num_gpus).err());
            return Err(match resize {
                Some(why) => skip(id, why.to_string()),
                None if cluster_name_for(&r.gpu).is_some() => {
                    let net = r.inter_node_link.as_deref().unwrap_or("");
                    skip(
                        id,
                        format!("no bundled cluster of GPU `{}` on network `{net}`", r.gpu),
                    )
                }
                None => skip(id, format!("no bundled cluster for GPU `{}`", r.gpu)),
            });
        }
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
    with_row_network(r, cluster)
}

/// Whether a node-fabric cell names PCIe as what joins the GPUs and no NVSwitch (`PCIe Gen4`,
/// `PCIe + NVLink bridge`: pairs of cards bridged, the rest over PCIe): every bundled cluster
/// is of SXM parts on NVSwitch (or an NVL72 rack's NVLink switches), whose all-to-all NVLink a
/// PCIe node does not have, as [`cluster_name_for`] refuses a PCIe card by its `gpu` cell.
fn pcie_node(cell: &str) -> bool {
    let c = cell.to_ascii_lowercase();
    c.contains("pcie") && !c.contains("nvswitch") && !c.contains("nvl72")
}

/// The bundled cluster with the row's own inter-node links where its `inter_node_link` cell
/// states a narrower one than the cluster's: a GPU's share of the network is then the row's
/// line rate ([`nic_share`]), not the bundled node's (a cell stating `4 x 200 Gb/s per node`
/// for 8 A100s gives each GPU half a DGX A100's 8 × 200 Gb/s; every public row states its
/// bundled node's rate or none). Only ever narrower: the bundled `inter_bw` is already
/// NCCL's effective figure, the line rate capped by the NIC's PCIe path (`selene-a100.toml`:
/// min(HDR 25 GB/s, PCIe Gen4 24 GB/s)), and a wider NIC than the bundled node's would still
/// pass through that path, so it is priced at the bundled figure. The cluster is renamed to
/// say so (`validate --explain` prints it). A stated rate of zero is a row that contradicts
/// itself: unreadable, naming the column.
fn with_row_network(r: &PublishedRun, mut cluster: Cluster) -> Result<Cluster, Skipped> {
    let Some(cell) = r.inter_node_link.as_deref() else {
        return Ok(cluster);
    };
    let Some(bits) = nic_share(cell, cluster.node.gpus_per_node) else {
        return Ok(cluster);
    };
    if !(bits.is_finite() && bits > 0.0) {
        return Err(super::unreadable(
            &r.id,
            "inter_node_link",
            format!("`{cell}` states {bits:e} bit/s per GPU: not a positive, finite rate"),
        ));
    }
    let bytes = bits / 8.0;
    if bytes < cluster.network.inter_bw {
        cluster.network.inter_bw = bytes;
        cluster.name = format!(
            "{} on the row's network ({:.2} GB/s per GPU off the node)",
            cluster.name,
            bytes / 1e9
        );
    }
    Ok(cluster)
}

/// A GPU's share of the inter-node line rate, bits/s, that a network cell states, or `None`
/// where it states none it scopes. Read: a rate (`400 Gb/s`, `400Gbps`, `400 Gbit/s`, `200G`,
/// `3.2 Tbps`; `50 GB/s` in bytes), optionally `N x` links of it, scoped by the words after it
/// up to the next comma, semicolon or bracket: `per GPU` / `/GPU` is one GPU's; `per node`,
/// `/server`, `per host`, `per tray`, `per VM`, `per instance`, `node-node` is the node's
/// (a cloud VM of 8 GPUs is the node), shared by its
/// `gpus_per_node` GPUs; `N x R` unscoped is N NICs of a node (`InfiniBand 8x400 Gbit/s`),
/// the `N x` anywhere before the rate in its clause (`4x HDR 200 Gb/s per node`). A bare rate
/// (`InfiniBand NDR 400G`, `InfiniBand (50 GB/s)`: one port of an unstated count), or one
/// after another number of its clause (`8 NICs x 400 Gb/s`, a count in words), or in a clause
/// naming a storage, front-end or management network, states nothing. The first scoped rate
/// counts.
pub fn nic_share(cell: &str, gpus_per_node: u32) -> Option<f64> {
    let b = cell.as_bytes();
    let mut i = 0;
    while i < b.len() {
        // A number starts here: not inside a word or another number (`NVL72`, `4th`, `3.2`),
        // but after the `x` of `8x50`.
        let after_x = i >= 2 && matches!(b[i - 1], b'x' | b'X') && b[i - 2].is_ascii_digit();
        let starts = b[i].is_ascii_digit()
            && (i == 0 || after_x || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'.'));
        if !starts {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < b.len() && (b[j].is_ascii_digit() || b[j] == b'.') {
            j += 1;
        }
        let num: f64 = match cell[i..j].parse() {
            Ok(v) => v,
            Err(_) => {
                i = j;
                continue;
            }
        };
        let mut k = j;
        while k < b.len() && b[k] == b' ' {
            k += 1;
        }
        let Some((unit_len, per_unit)) = rate_unit(&cell[k..]) else {
            i = j;
            continue;
        };
        let unit_end = k + unit_len;
        let clause_start = cell[..i].rfind([',', ';', '(', ')']).map_or(0, |d| d + 1);
        let Ok(links) = links_before(&cell[clause_start..i]) else {
            // Another number before the rate in its clause (`8 NICs x 400 Gb/s`,
            // `2 ports of 200 Gb/s`): a count this reading cannot place; nothing stated.
            i = unit_end;
            continue;
        };
        let clause_end = cell[unit_end..]
            .find([',', ';', '(', ')'])
            .map_or(cell.len(), |e| unit_end + e);
        let scope = cell[unit_end..clause_end].to_ascii_lowercase();
        // A storage or front-end network's rate is not the GPUs' NICs'.
        let clause = cell[clause_start..clause_end].to_ascii_lowercase();
        if ["storage", "front-end", "frontend", "management"]
            .iter()
            .any(|w| clause.contains(w))
        {
            i = unit_end;
            continue;
        }
        let per_gpu = ["per gpu", "per-gpu", "/gpu", "each gpu"]
            .iter()
            .any(|w| scope.contains(w));
        let per_node = scope.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| {
            matches!(
                w,
                "node" | "nodes" | "server" | "host" | "tray" | "vm" | "instance" | "machine"
            )
        });
        let rate = num * per_unit * f64::from(links.unwrap_or(1));
        if per_gpu {
            return Some(rate);
        }
        if per_node || links.is_some() {
            return Some(rate / f64::from(gpus_per_node.max(1)));
        }
        i = unit_end;
    }
    None
}

/// The unit a rate is written in at the start of `text` (`Gb/s`, `Gbps`, `Gbit/s`, `G`,
/// `GbE`; `Tb/s`, `Tbps`; `GB/s`, `GBps` in bytes; case as written: `GB/s` is bytes, `Gb/s`
/// bits): its length and bits per second, where the unit ends the word or a `/` follows
/// (`400Gbps/GPU`).
fn rate_unit(text: &str) -> Option<(usize, f64)> {
    const UNITS: &[(&str, f64)] = &[
        ("Gbits/s", 1e9),
        ("Gbit/s", 1e9),
        ("Tbit/s", 1e12),
        ("Gbps", 1e9),
        ("Gbit", 1e9),
        ("Gb/s", 1e9),
        ("GbE", 1e9),
        ("Tbps", 1e12),
        ("Tb/s", 1e12),
        ("GB/s", 8e9),
        ("GBps", 8e9),
        ("TB/s", 8e12),
        ("TBps", 8e12),
        ("Gb", 1e9),
        ("G", 1e9),
        ("T", 1e12),
    ];
    UNITS.iter().find_map(|&(u, bits)| {
        let rest = text.strip_prefix(u)?;
        let ends = rest
            .chars()
            .next()
            .is_none_or(|c| !c.is_ascii_alphanumeric());
        ends.then_some((u.len(), bits))
    })
}

/// The link count `N` of the clause before a rate: `Ok(Some(N))` where the clause's only
/// number before the rate is an `N x` or `N×` (`8x50 GB/s`, `4x HDR 200 Gb/s`), `Ok(None)`
/// where it has no number, `Err(())` where it has another (a count in words this reading
/// does not place).
fn links_before(clause: &str) -> Result<Option<u32>, ()> {
    let b = clause.as_bytes();
    let mut count = None;
    let mut i = 0;
    while i < b.len() {
        let starts = b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_alphanumeric());
        if !starts {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        let rest = clause[j..].trim_start();
        let times = rest.starts_with(['x', 'X', '×'])
            && rest[rest.chars().next().map_or(0, char::len_utf8)..]
                .chars()
                .next()
                .is_none_or(|c| !c.is_ascii_alphabetic() || c.is_ascii_uppercase());
        let n: Option<u32> = clause[i..j].parse().ok().filter(|&n| n > 0);
        match (times, n, count) {
            (true, Some(n), None) => count = Some(n),
            _ => return Err(()),
        }
        i = j;
    }
    Ok(count)
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
///   domains of 4-GPU trays); `B200 (DGX-B200)`: `b200x256`; `B300`: `b300x256` (8-GPU HGX
///   nodes). GB200 and GB300 are tested before B200 and B300 (`gb200` contains `b200`).
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
    } else if g.contains("b300") {
        Some("b300x256")
    } else if g.contains("h800") {
        Some("h800x2048")
    } else if g.contains("h200") {
        Some("h200x128")
    } else if g.contains("h100")
        && (memory_sizes(&g).contains(&96)
            || g.contains("hbm2e")
            || g.replace(' ', "").contains("500w"))
    {
        Some("grand-teton-h100")
    } else if g.contains("h100") {
        Some("dgx-h100")
    } else if g.contains("a100") && {
        // `40GB`, `40 GB`, `SXM4-40G`: the size however it is written.
        let sizes = memory_sizes(&g);
        sizes.contains(&40) && !sizes.contains(&80)
    } {
        Some("dgx-a100-40gb")
    } else if g.contains("a100") || g.contains("ampere") {
        Some("selene-a100")
    } else {
        None
    }
}

/// The memory sizes a GPU cell names, GB: the numbers written before `GB` or `G` (`40GB`,
/// `40 GB`, `SXM4-40G`), not a count (`4096 GPUs`) or a part of one.
fn memory_sizes(gpu: &str) -> Vec<u32> {
    let b = gpu.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !b[i].is_ascii_digit() || (i > 0 && b[i - 1].is_ascii_digit()) {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        let rest = gpu[j..].trim_start().to_ascii_lowercase();
        let unit = rest
            .strip_prefix("gb")
            .or_else(|| rest.strip_prefix('g'))
            .is_some_and(|after| !after.starts_with(|c: char| c.is_ascii_alphabetic()));
        if unit {
            if let Ok(n) = gpu[i..j].parse() {
                out.push(n);
            }
        }
        i = j;
    }
    out
}
