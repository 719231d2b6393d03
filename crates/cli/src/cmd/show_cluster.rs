//! `autoplan show --cluster Y` (the cluster's hardware in file units, or JSON in SI units) and
//! `autoplan clusters` (the bundled library, a line each).

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use autoplan_cluster::{bundled_clusters, resolve_cluster, Cluster};

use super::Format;
use crate::fmt::serde_name;

pub fn run(name: &str, format: Format) -> anyhow::Result<ExitCode> {
    let c = resolve_cluster(name).with_context(|| format!("cannot load cluster `{name}`"))?;
    let mut out = std::io::stdout().lock();
    match format {
        Format::Table => table(&mut out, &c)?,
        Format::Json => {
            serde_json::to_writer_pretty(&mut out, &json(&c))?;
            writeln!(out)?;
        }
        Format::Csv => {
            writeln!(out, "field,value")?;
            flatten(&mut out, "", &json(&c))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Human units, as in cluster files: GB/s, µs, GiB, TFLOP/s.
fn table(out: &mut impl Write, c: &Cluster) -> anyhow::Result<()> {
    let (g, n, w, e) = (&c.gpu, &c.node, &c.network, &c.efficiency);
    writeln!(
        out,
        "cluster {}: {} GPUs = {} node{} x {} {}",
        c.name,
        c.gpus(),
        c.nodes,
        if c.nodes == 1 { "" } else { "s" },
        n.gpus_per_node,
        g.name
    )?;
    let peaks: Vec<String> = g
        .peak_flops
        .iter()
        .map(|(p, f)| format!("{} {}", serde_name(p), f / 1e12))
        .collect();
    // The compute capability the frameworks' kernel checks read (`GpuArch::
    // compute_capability`: fused attention from 8.0, block-scaled FP8 from 9.0).
    let cc = g.arch.compute_capability().map_or(String::new(), |(a, b)| {
        format!(", compute capability {a}.{b}")
    });
    writeln!(out, "gpu       {} ({}{cc})", g.name, serde_name(&g.arch))?;
    writeln!(out, "  peak    {} TFLOP/s (dense)", peaks.join(", "))?;
    writeln!(
        out,
        "  memory  {} GiB at {} GB/s",
        g.hbm_bytes / f64::from(1u32 << 30),
        g.hbm_bw / 1e9
    )?;
    // Capped only below the rating (`Gpu::power_capped`, as the CLI's caveat says).
    match (g.power_capped(), g.rated_power_w) {
        (Some((l, r)), _) => writeln!(
            out,
            "  power   {r} W rated, run at a {l} W limit (clocks under the cap not modelled)"
        )?,
        (None, Some(r)) => writeln!(out, "  power   {r} W rated")?,
        _ => {}
    }
    writeln!(
        out,
        "node      {} GPUs on {}{}",
        n.gpus_per_node,
        serde_name(&n.fabric),
        domain_note(c)
    )?;
    writeln!(
        out,
        "  intra   {} GB/s per GPU per direction, {} us per hop{}",
        n.intra_bw / 1e9,
        n.intra_latency * 1e6,
        if n.in_switch_reduction {
            ", in-switch reduction"
        } else {
            ""
        }
    )?;
    writeln!(
        out,
        "network   {} nodes, {}, {} NIC(s) per node, oversubscription {}",
        c.nodes,
        serde_name(&w.topology),
        w.nics_per_node,
        w.oversubscription
    )?;
    writeln!(
        out,
        "  inter   {} GB/s per GPU per direction, link delay {} us",
        w.inter_bw / 1e9,
        w.link_delay * 1e6
    )?;
    writeln!(
        out,
        "efficiency bwurate {}, start_lat {} us, sync_lat {} us, cpufetch {} us",
        e.bwurate,
        e.start_lat * 1e6,
        e.sync_lat * 1e6,
        e.cpufetch * 1e6
    )?;
    if let Some(h) = &c.host {
        writeln!(
            out,
            "host      {} GiB per node at {} GB/s; {} at {} GB/s per direction, {} GPU(s) per link",
            h.memory_bytes / f64::from(1u32 << 30),
            h.memory_bw / 1e9,
            h.link.name(),
            h.link_bw / 1e9,
            h.gpus_per_link
        )?;
    }
    Ok(())
}

/// SI units throughout (bytes, bytes/s, seconds, FLOP/s); field names carry the unit.
fn json(c: &Cluster) -> serde_json::Value {
    let (g, n, w, e) = (&c.gpu, &c.node, &c.network, &c.efficiency);
    let peaks: serde_json::Map<String, serde_json::Value> = g
        .peak_flops
        .iter()
        .map(|(p, f)| (serde_name(p), serde_json::json!(f)))
        .collect();
    serde_json::json!({
        "name": c.name,
        "gpus": c.gpus(),
        "nodes": c.nodes,
        "gpus_per_node": n.gpus_per_node,
        "gpu": {
            "name": g.name,
            "arch": serde_name(&g.arch),
            "peak_flop_per_s": peaks,
            "hbm_bytes": g.hbm_bytes,
            "hbm_bytes_per_s": g.hbm_bw,
        },
        "node": {
            "fabric": serde_name(&n.fabric),
            "intra_bw_bytes_per_s": n.intra_bw,
            "intra_latency_s": n.intra_latency,
            "in_switch_reduction": n.in_switch_reduction,
            "nvlink_domain_gpus": c.domain_gpus(),
        },
        "network": {
            "topology": serde_name(&w.topology),
            "inter_bw_bytes_per_s": w.inter_bw,
            "nics_per_node": w.nics_per_node,
            "oversubscription": w.oversubscription,
            "link_delay_s": w.link_delay,
        },
        "efficiency": {
            "bwurate": e.bwurate,
            "start_lat_s": e.start_lat,
            "sync_lat_s": e.sync_lat,
            "cpufetch_s": e.cpufetch,
        },
        "host": c.host.map(|h| serde_json::json!({
            "memory_bytes": h.memory_bytes,
            "memory_bytes_per_s": h.memory_bw,
            "link": serde_name(&h.link),
            "link_bytes_per_s": h.link_bw,
            "gpus_per_link": h.gpus_per_link,
        })),
    })
}

/// `", NVLink domains of N GPUs"` where NVLink joins several nodes into one scale-up domain
/// (NVL72), empty where it ends at the node (then nothing printed changes).
pub(crate) fn domain_note(c: &Cluster) -> String {
    if c.domain_gpus() > c.node.gpus_per_node {
        format!(", NVLink domains of {} GPUs", c.domain_gpus())
    } else {
        String::new()
    }
}

/// `a.b.c,value` lines for the CSV format.
fn flatten(out: &mut impl Write, prefix: &str, v: &serde_json::Value) -> anyhow::Result<()> {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(out, &key, v)?;
            }
        }
        serde_json::Value::String(s) => writeln!(out, "{prefix},{s}")?,
        other => writeln!(out, "{prefix},{other}")?,
    }
    Ok(())
}

/// One line per bundled cluster: name, size, GPU, and each fabric with its per-GPU bandwidth.
pub fn list() -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{:<17} {:>6} {:>9}  {:<21} {:>6} {:<9} {:>6} network",
        "name", "GPUs", "nodes", "GPU", "intra", "fabric", "inter"
    )?;
    for (name, _) in bundled_clusters() {
        let c = resolve_cluster(name).with_context(|| format!("bundled cluster `{name}`"))?;
        writeln!(
            out,
            "{:<17} {:>6} {:>9}  {:<21} {:>6} {:<9} {:>6} {}{}",
            c.name,
            c.gpus(),
            format!("{}x{}", c.nodes, c.node.gpus_per_node),
            c.gpu.name,
            c.node.intra_bw / 1e9,
            serde_name(&c.node.fabric),
            c.network.inter_bw / 1e9,
            serde_name(&c.network.topology),
            if c.domain_gpus() > c.node.gpus_per_node {
                format!(" (NVLink domain {})", c.domain_gpus())
            } else {
                String::new()
            },
        )?;
    }
    writeln!(
        out,
        "intra/inter: GB/s per GPU per direction (NCCL effective figures, see the files)"
    )?;
    Ok(ExitCode::SUCCESS)
}
