//! `autoplan collective --fit FILE`: the cluster parameters that best reproduce measured
//! timings (`autoplan_cost::fit`), from nccl-tests output, a per-pair CSV
//! (`src,dst,bytes,time_us`) or `collectives_measured.csv` rows; `--write` emits a cluster
//! TOML with them.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context};
use autoplan_cluster::{Cluster, GroupPlacement};
use autoplan_cost::fit::{fit, fit_pairs, Observation};
use autoplan_cost::{AlgoMode, Collective};

/// What `--fit` needs besides the file.
pub struct FitArgs<'a> {
    pub file: &'a Path,
    /// Base cluster (fabric, topology, hop latencies, `bwurate`) and its TOML text, if any.
    pub cluster: Cluster,
    pub cluster_text: Option<String>,
    /// nccl-tests output: the collective and the group it ran on.
    pub op: Option<Collective>,
    pub group: Option<GroupPlacement>,
    /// `collectives_measured.csv`: keep the rows whose `hardware` contains this.
    pub hardware: Option<&'a str>,
    pub write: Option<&'a Path>,
}

/// Runs the fit and prints it.
pub fn run(a: FitArgs<'_>) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(a.file)
        .with_context(|| format!("cannot read {}", a.file.display()))?;
    let file = a.file.display().to_string();
    let gpn = a.cluster.node.gpus_per_node.max(1);
    let mut pairs = None;
    let obs = if text.lines().any(|l| l.trim_start().starts_with('#')) {
        let (Some(op), Some(group)) = (a.op, a.group) else {
            bail!("{file}: nccl-tests output: give --op and --ranks (and --ranks-per-node)");
        };
        nccl_tests(&text, op, group).with_context(|| file.clone())?
    } else {
        let header = text.lines().next().unwrap_or("").to_ascii_lowercase();
        if header.contains("src") && header.contains("dst") {
            let rows = pair_rows(&text).with_context(|| file.clone())?;
            pairs = Some(fit_pairs(&rows).with_context(|| file.clone())?);
            rows.iter()
                .map(|&(s, d, b, t)| Observation {
                    op: Collective::SendRecv,
                    group: if s / gpn == d / gpn {
                        GroupPlacement {
                            size: 2,
                            ranks_per_node: 2,
                            nodes: 1,
                        }
                    } else {
                        GroupPlacement {
                            size: 2,
                            ranks_per_node: 1,
                            nodes: 2,
                        }
                    },
                    bytes: b,
                    time: t,
                })
                .collect()
        } else if header.contains("collective") {
            measured_rows(&text, a.hardware).with_context(|| file.clone())?
        } else {
            bail!(
                "{file}: not nccl-tests output (`#` header lines), a pair CSV \
                 (src,dst,bytes,time_us) or a collectives_measured.csv"
            );
        }
    };
    let f = fit(&a.cluster, &obs, AlgoMode::NcclTuner).with_context(|| file.clone())?;
    let mark = |k: usize| {
        if f.determined[k] {
            ""
        } else {
            "  (undetermined: kept)"
        }
    };
    println!(
        "fit of {} timings on base cluster {}:",
        obs.len(),
        a.cluster.name
    );
    println!("  intra_bw   {:>10.3} GB/s{}", f.intra_bw / 1e9, mark(0));
    println!("  inter_bw   {:>10.3} GB/s{}", f.inter_bw / 1e9, mark(1));
    println!("  start_lat  {:>10.3} µs{}", f.start_lat * 1e6, mark(2));
    println!("  sync_lat   {:>10.3} µs{}", f.sync_lat * 1e6, mark(3));
    println!(
        "  bwurate    {:>10.3}  (held at the base cluster's: timings fix only bw × bwurate)",
        f.bwurate
    );
    println!(
        "residual: rms {:.2}% (log ratio), worst {:.2}%",
        f.rms_log_residual * 100.0,
        f.max_rel_residual * 100.0
    );
    if let Some(p) = pairs {
        println!("per-pair α-β matrix (place-experts --alpha-beta format):");
        println!("src,dst,alpha_us,bw_gbps");
        for x in p {
            println!(
                "{},{},{:.3},{:.4}",
                x.src,
                x.dst,
                x.alpha * 1e6,
                x.beta / 1e9
            );
        }
    }
    if let Some(out) = a.write {
        let Some(base) = a.cluster_text else {
            bail!("--write needs a base cluster given as a TOML (bundled name or file)");
        };
        let toml = rewrite(&base, &f);
        std::fs::write(out, toml).with_context(|| format!("cannot write {}", out.display()))?;
        println!("wrote {}", out.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// nccl-tests data lines: `size count type redop root time algbw busbw #wrong time …`; the
/// out-of-place time (µs, the sixth column) of each size.
fn nccl_tests(
    text: &str,
    op: Collective,
    group: GroupPlacement,
) -> anyhow::Result<Vec<Observation>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let t: Vec<&str> = l.split_whitespace().collect();
        let Ok(bytes) = t[0].parse::<f64>() else {
            continue;
        };
        let time = t
            .get(5)
            .and_then(|x| x.parse::<f64>().ok())
            .with_context(|| format!("line {}: no out-of-place time (sixth column)", i + 1))?;
        if bytes > 0.0 && time > 0.0 {
            out.push(Observation {
                op,
                group,
                bytes,
                time: time * 1e-6,
            });
        }
    }
    Ok(out)
}

/// `src,dst,bytes,time_us` rows.
fn pair_rows(text: &str) -> anyhow::Result<Vec<(u32, u32, f64, f64)>> {
    #[derive(serde::Deserialize)]
    struct Row {
        src: u32,
        dst: u32,
        bytes: f64,
        time_us: f64,
    }
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let mut out = Vec::new();
    for (i, row) in r.deserialize::<Row>().enumerate() {
        let row = row.with_context(|| format!("row {}", i + 2))?;
        if row.src == row.dst || !(row.bytes > 0.0 && row.time_us > 0.0) {
            bail!(
                "row {}: need src ≠ dst and positive bytes and time_us",
                i + 2
            );
        }
        out.push((row.src, row.dst, row.bytes, row.time_us * 1e-6));
    }
    Ok(out)
}

/// `collectives_measured.csv` rows with a collective, group, size and a time (or a bus
/// bandwidth: time = bytes × busbw factor / busbw, the nccl-tests convention), of one
/// hardware.
fn measured_rows(text: &str, hardware: Option<&str>) -> anyhow::Result<Vec<Observation>> {
    use autoplan_cost::validation::MeasuredRow;
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let rows: Vec<MeasuredRow> = r
        .deserialize()
        .enumerate()
        .map(|(i, x)| x.with_context(|| format!("row {}", i + 2)))
        .collect::<anyhow::Result<_>>()?;
    let kept: Vec<&MeasuredRow> = rows
        .iter()
        .filter(|x| hardware.is_none_or(|h| x.hardware.contains(h)))
        .collect();
    let mut kinds: Vec<&str> = kept.iter().map(|x| x.hardware.as_str()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    if kinds.len() > 1 {
        bail!(
            "rows of {} machines: pick one with --hardware (a part of the `hardware` cell): {}",
            kinds.len(),
            kinds.join(" | ")
        );
    }
    let mut out = Vec::new();
    for x in kept {
        let op = match x.collective.split_whitespace().next().unwrap_or("") {
            "allreduce" => Collective::AllReduce,
            "allgather" => Collective::AllGather,
            "reducescatter" => Collective::ReduceScatter,
            "alltoall" => Collective::AllToAll,
            "broadcast" => Collective::Broadcast,
            "sendrecv" => Collective::SendRecv,
            _ => continue,
        };
        let (Some(nodes), Some(gpn), Some(bytes)) = (x.nodes, x.gpus_per_node, x.bytes) else {
            continue;
        };
        let ranks = x.ranks.unwrap_or(nodes * gpn);
        let time = match (x.time_us, x.busbw_gbps) {
            (Some(t), _) => t * 1e-6,
            (None, Some(bw)) if bw > 0.0 => bytes * op.busbw_factor(ranks) / (bw * 1e9),
            _ => continue,
        };
        out.push(Observation {
            op,
            group: GroupPlacement {
                size: ranks,
                ranks_per_node: (ranks / nodes.max(1)).max(1),
                nodes,
            },
            bytes,
            time,
        });
    }
    Ok(out)
}

/// The base cluster TOML with the fitted values in place of `intra_bw_gbps`, `inter_bw_gbps`,
/// `start_lat_us` and `sync_lat_us` (undetermined ones kept); a `nic_gbit` line is dropped
/// (the fitted share may exceed the nominal line rate's) and the name gets `-fit`.
fn rewrite(base: &str, f: &autoplan_cost::fit::Fit) -> String {
    let mut out = String::from("# Fitted by `autoplan collective --fit` (autoplan_cost::fit).\n");
    for line in base.lines() {
        let key = line.split('=').next().unwrap_or("").trim();
        let value = match key {
            "intra_bw_gbps" if f.determined[0] => Some(format!("{:.4}", f.intra_bw / 1e9)),
            "inter_bw_gbps" if f.determined[1] => Some(format!("{:.4}", f.inter_bw / 1e9)),
            "start_lat_us" if f.determined[2] => Some(format!("{:.4}", f.start_lat * 1e6)),
            "sync_lat_us" if f.determined[3] => Some(format!("{:.4}", f.sync_lat * 1e6)),
            "nic_gbit" => {
                out.push_str("# nic_gbit dropped: the fitted inter_bw replaces it\n");
                continue;
            }
            "name" => {
                let v = line
                    .split('=')
                    .nth(1)
                    .unwrap_or("")
                    .trim()
                    .trim_matches('"');
                Some(format!("\"{v}-fit\""))
            }
            _ => None,
        };
        match value {
            Some(v) => out.push_str(&format!("{key} = {v}\n")),
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}
