//! `autoplan collective`: cost one collective with every valid algorithm on a cluster, or
//! compare the model with measured collectives (`--validate FILE.csv`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use autoplan_cluster::{Cluster, GroupPlacement};
use autoplan_cost::validation::{predict, MeasuredRow, Metric};
use autoplan_cost::{
    calibration, nccl_algorithms_of, AlgoMode, Algorithm, Collective, CollectiveLibrary, CostModel,
};

use super::Format;
use crate::fmt::bytes_2dp;
use autoplan_evaluate::runs::SkipKind;
use autoplan_input::table::{self, CellError, CellErrorKind, Table};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A bundled cluster name, a cluster TOML, or a reference machine of the calibration
    /// (`dgx-a100xN`, `dgx-h100xN`, `hgx-h800xN`).
    #[arg(long, required_unless_present = "validate")]
    pub cluster: Option<String>,
    /// The collective: allreduce, allgather, reducescatter, alltoall, broadcast, reduce,
    /// scatter, gather, sendrecv, barrier.
    #[arg(long, required_unless_present_any = ["validate", "fit"], value_parser = parse_collective)]
    pub op: Option<Collective>,
    /// Ranks in the group.
    #[arg(long, required_unless_present_any = ["validate", "fit"])]
    pub ranks: Option<u32>,
    /// Group ranks on each node (default: fill nodes, min(ranks, GPUs per node)).
    #[arg(long)]
    pub ranks_per_node: Option<u32>,
    /// Message size in the nccl-tests convention: "4096", "256MB" (10^6), "1GiB" (2^30);
    /// K/M/G/T alone are binary, as in nccl-tests.
    #[arg(long, required_unless_present_any = ["validate", "fit"], value_parser = parse_bytes)]
    pub bytes: Option<f64>,
    /// Force this algorithm (falls back to the cheapest valid one where it is not valid).
    #[arg(long, value_parser = parse_algorithm, conflicts_with = "mode")]
    pub algo: Option<Algorithm>,
    /// How the algorithm is chosen.
    #[arg(long, value_enum, default_value_t = Mode::Cheapest)]
    pub mode: Mode,
    /// Whose algorithms `cheapest` picks from and the table lists: nccl (Ring, Tree, NVLS,
    /// NVLSTree, CollNet, PAT with LL/LL128/Simple) or any (the seeds' full menu). Default:
    /// the cluster's `library` (nccl unless the cluster file says otherwise).
    #[arg(long, value_parser = parse_library)]
    pub library: Option<CollectiveLibrary>,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Compare the model with a measured-collectives CSV (`collectives_measured.csv` format).
    #[arg(long, value_name = "CSV", conflicts_with_all = ["cluster", "op", "ranks", "bytes"])]
    pub validate: Option<PathBuf>,
    /// Fit the cluster parameters to measured timings: nccl-tests output (with --op, --ranks),
    /// a per-pair CSV `src,dst,bytes,time_us`, or collectives_measured.csv rows; the rest of
    /// the cluster comes from --cluster.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["validate", "bytes"], requires = "cluster")]
    pub fit: Option<PathBuf>,
    /// With --fit on collectives_measured.csv: the rows whose `hardware` contains this.
    #[arg(long, requires = "fit")]
    pub hardware: Option<String>,
    /// With --fit: write the fitted cluster TOML here.
    #[arg(long, value_name = "TOML", requires = "fit")]
    pub write: Option<PathBuf>,
}

/// Algorithm choice (see `autoplan_cost::AlgoMode`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The cheapest valid algorithm.
    Cheapest,
    /// Seed 000's NCCL-like selection rule.
    NcclLike,
    /// NCCL's own tuner: the cheapest among the algorithms NCCL implements.
    NcclTuner,
    /// The cheapest of the seeds' full menu, whatever the library.
    Any,
}

fn parse_library(s: &str) -> Result<CollectiveLibrary, String> {
    s.parse()
}

fn parse_collective(s: &str) -> Result<Collective, String> {
    s.parse()
        .map_err(|e: autoplan_cost::UnknownName| e.to_string())
}

fn parse_algorithm(s: &str) -> Result<Algorithm, String> {
    s.parse()
        .map_err(|e: autoplan_cost::UnknownName| e.to_string())
}

/// The largest message costed, 1 PiB: a thousand times the largest message a training step
/// sends (a full-model gradient all-reduce is ~1 TB), and every time stays finite.
const MAX_BYTES: f64 = 1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0;

/// "4096", "4096B", "256MB", "1.5GB" (powers of 1000), "1GiB", "64KiB" (powers of 1024), and
/// "1G", "128M", "8K" (powers of 1024, as nccl-tests' -b/-e).
pub fn parse_bytes(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e' || c == 'E'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size (e.g. 4096, 256MB, 1GiB)"))?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        other => {
            return Err(format!(
                "{s:?}: unknown unit {other:?} (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB, K, M, G, T)"
            ))
        }
    };
    let bytes = value * mult;
    if !bytes.is_finite() || !(0.0..=MAX_BYTES).contains(&bytes) {
        return Err(format!(
            "{s:?}: a size must be a finite number in [0, 1 PiB]"
        ));
    }
    Ok(bytes)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(path) = &args.validate {
        return validate(path, args.format);
    }
    if let Some(path) = &args.fit {
        return fit(&args, path);
    }
    let (Some(cluster), Some(op), Some(ranks), Some(bytes)) =
        (&args.cluster, args.op, args.ranks, args.bytes)
    else {
        bail!("give --cluster, --op, --ranks and --bytes, or --validate FILE");
    };
    let cluster = resolve(cluster)?;
    let group = placement(&cluster, ranks, args.ranks_per_node)?;
    let mode = match (args.algo, args.mode) {
        (Some(a), _) => AlgoMode::Fixed(a),
        (None, Mode::Cheapest) => AlgoMode::Cheapest,
        (None, Mode::NcclLike) => AlgoMode::NcclLike,
        (None, Mode::NcclTuner) => AlgoMode::NcclTuner,
        (None, Mode::Any) => AlgoMode::Any,
    };
    let mut model = CostModel::new(&cluster);
    if let Some(l) = args.library {
        model = model.with_library(l);
    }
    let chosen = model.collective(op, group, bytes, mode);
    let factor = op.busbw_factor(ranks);
    // The table lists the menu the chosen algorithm came from.
    let listed = match mode {
        AlgoMode::Any | AlgoMode::NcclLike => CollectiveLibrary::Any,
        AlgoMode::NcclTuner => CollectiveLibrary::Nccl,
        AlgoMode::Fixed(a) if !nccl_algorithms_of(op).contains(&a) => CollectiveLibrary::Any,
        _ => model.library(),
    };
    let rows: Vec<Row> = model
        .with_library(listed)
        .alternatives(op, group, bytes)
        .iter()
        .map(|c| {
            let algbw = if c.time > 0.0 { bytes / c.time } else { 0.0 };
            Row {
                algorithm: c.algorithm.name(),
                protocol: c.protocol.name(),
                time_s: c.time,
                algbw_gbps: algbw / 1e9,
                busbw_gbps: algbw * factor / 1e9,
                chosen: c.algorithm == chosen.algorithm,
            }
        })
        .collect();
    for r in &rows {
        super::ensure_finite(
            &format!("{op} with {}", r.algorithm),
            &[
                ("time", r.time_s),
                ("algbw", r.algbw_gbps),
                ("busbw", r.busbw_gbps),
            ],
        )?;
    }
    let mut out = std::io::stdout().lock();
    match args.format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut out, &rows)?;
            writeln!(out)?;
        }
        Format::Csv => {
            writeln!(
                out,
                "algorithm,protocol,time_s,algbw_gbps,busbw_gbps,chosen"
            )?;
            for r in &rows {
                writeln!(
                    out,
                    "{},{},{:e},{},{},{}",
                    r.algorithm, r.protocol, r.time_s, r.algbw_gbps, r.busbw_gbps, r.chosen
                )?;
            }
        }
        Format::Table => {
            writeln!(
                out,
                "{op} of {} on {} ranks ({} per node, {} node{}) of {}; mode {}, library {}",
                bytes_2dp(bytes),
                group.size,
                group.ranks_per_node,
                group.nodes,
                if group.nodes == 1 { "" } else { "s" },
                cluster.name,
                mode_name(mode),
                listed.name(),
            )?;
            writeln!(
                out,
                "  {:<20} {:<8} {:>14} {:>13} {:>13}",
                "algorithm", "protocol", "time (µs)", "algbw (GB/s)", "busbw (GB/s)"
            )?;
            for r in &rows {
                writeln!(
                    out,
                    "{} {:<20} {:<8} {:>14.2} {:>13.2} {:>13.2}",
                    if r.chosen { "*" } else { " " },
                    r.algorithm,
                    r.protocol,
                    r.time_s * 1e6,
                    r.algbw_gbps,
                    r.busbw_gbps
                )?;
            }
            writeln!(
                out,
                "busbw = algbw × {factor:.4} (nccl-tests convention for {op} on {ranks} ranks); * = chosen"
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(serde::Serialize)]
struct Row {
    algorithm: &'static str,
    protocol: &'static str,
    time_s: f64,
    algbw_gbps: f64,
    busbw_gbps: f64,
    chosen: bool,
}

fn mode_name(m: AlgoMode) -> String {
    match m {
        AlgoMode::Cheapest => "cheapest".into(),
        AlgoMode::NcclLike => "nccl-like (seed 000 rule)".into(),
        AlgoMode::NcclTuner => "nccl-tuner".into(),
        AlgoMode::Any => "any (the seeds' full menu)".into(),
        AlgoMode::Fixed(a) => format!("fixed {a}"),
    }
}

/// The calibration's reference machines: `dgx-a100xN`, `dgx-h100xN`, `hgx-h800xN`.
fn reference_machine(name: &str) -> Option<Cluster> {
    let (kind, nodes) = name.rsplit_once('x')?;
    let nodes: u32 = nodes.parse().ok().filter(|&n| n > 0)?;
    match kind {
        "dgx-a100" => Some(calibration::dgx_a100(nodes)),
        "dgx-h100" => Some(calibration::dgx_h100(nodes)),
        "hgx-h800" => Some(calibration::hgx_h800(nodes)),
        _ => None,
    }
}

/// A bundled cluster or cluster TOML (the cluster crate's `resolve_cluster`), else a reference
/// machine of the calibration.
/// `--fit`: the base cluster, the nccl-tests group, then `collective_fit`.
fn fit(args: &Args, path: &std::path::Path) -> anyhow::Result<ExitCode> {
    let name = args.cluster.as_deref().unwrap_or_default();
    let cluster = resolve(name)?;
    let cluster_text = autoplan_cluster::bundled_cluster_text(name)
        .map(str::to_owned)
        .or_else(|| std::fs::read_to_string(name).ok());
    let group = match args.ranks {
        Some(r) => Some(placement(&cluster, r, args.ranks_per_node)?),
        None => None,
    };
    super::collective_fit::run(super::collective_fit::FitArgs {
        file: path,
        cluster,
        cluster_text,
        op: args.op,
        group,
        hardware: args.hardware.as_deref(),
        write: args.write.as_deref(),
    })
}

fn resolve(name: &str) -> anyhow::Result<Cluster> {
    match autoplan_cluster::resolve_cluster(name) {
        Ok(c) => Ok(c),
        Err(e @ autoplan_cluster::ResolveError::Unknown { .. }) => reference_machine(name)
            .ok_or_else(|| {
                anyhow::anyhow!("{e}; or a reference machine: dgx-a100xN, dgx-h100xN, hgx-h800xN")
            }),
        Err(e) => Err(e.into()),
    }
}

/// Where `ranks` consecutive ranks sit: `ranks_per_node` of them on each node (default: as many
/// as fit), over `ranks / ranks_per_node` nodes.
fn placement(
    cluster: &Cluster,
    ranks: u32,
    ranks_per_node: Option<u32>,
) -> anyhow::Result<GroupPlacement> {
    // A "node" of the cost model is an NVLink domain (`Cluster::domain_gpus`).
    let gpn = cluster.domain_gpus();
    if ranks == 0 {
        bail!("--ranks must be at least 1");
    }
    let r = ranks_per_node.unwrap_or(ranks.min(gpn));
    if r == 0 || r > gpn {
        bail!(
            "--ranks-per-node {r} must be between 1 and the {gpn} GPUs per node of {}",
            cluster.name
        );
    }
    if (ranks / r) * r != ranks {
        bail!("--ranks {ranks} is not a multiple of --ranks-per-node {r}");
    }
    let nodes = ranks / r;
    if nodes > cluster.nodes {
        bail!(
            "{ranks} ranks at {r} per node need {nodes} nodes; {} has {}",
            cluster.name,
            cluster.nodes
        );
    }
    Ok(GroupPlacement {
        size: ranks,
        ranks_per_node: r,
        nodes,
    })
}

/// The columns a measured-collectives file must name (the others may be absent: blank).
const MEASURED_REQUIRED: &[&str] = &["id", "hardware", "collective", "algorithm_used"];

/// A measured row and the line it starts on.
pub type LinedRow = (u64, MeasuredRow);

/// A `collectives_measured.csv`-shaped file: the rows read (each with its line), and the rows
/// skipped for a cell that cannot be read (blank cells are `None`; whether the row needs them
/// is `predict`'s). Only an unreadable file or a header without a required column is an error.
pub fn read_measured(path: &Path) -> anyhow::Result<(Vec<LinedRow>, Vec<Skipped>)> {
    let bytes = std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
    let table = Table::parse(&path.display().to_string(), &bytes, MEASURED_REQUIRED)?;
    let (mut rows, mut skipped) = (Vec::new(), Vec::new());
    for row in table.rows() {
        let line = row.line();
        let id = match row.text("id") {
            Ok(Some(id)) => id.to_string(),
            _ => format!("(line {line})"),
        };
        let skip = |kind, column: Option<String>, reason: String| Skipped {
            id: id.clone(),
            kind,
            line: Some(line),
            column,
            reason,
        };
        if let Some(why) = row.shape_error() {
            skipped.push(skip(SkipKind::Unreadable, None, why));
            continue;
        }
        match measured_row(&row) {
            Ok(r) => rows.push((line, r)),
            Err(e) => {
                let kind = match e.kind {
                    CellErrorKind::Blank => SkipKind::DataMissing,
                    CellErrorKind::Unreadable => SkipKind::Unreadable,
                };
                skipped.push(skip(kind, Some(e.column.clone()), e.to_string()))
            }
        }
    }
    Ok((rows, skipped))
}

/// One row's cells: counts are whole numbers of at least 1; the measured figures above zero;
/// `bytes` a plain number of bytes above zero, at most `parse_bytes`' 1 PiB.
fn measured_row(r: &table::Row) -> Result<MeasuredRow, CellError> {
    let id = r
        .text("id")?
        .ok_or_else(|| CellError::blank("id", "the row has no id"))?;
    let bytes = match r.number("bytes", true) {
        Ok(Some(b)) if b > MAX_BYTES => {
            return Err(CellError::unreadable(
                "bytes",
                &r.string("bytes")?,
                "over 1 PiB, the largest size a collective is costed for",
            ))
        }
        Ok(b) => b,
        // "8GiB": a size the `--bytes` flag reads, but the column holds a number of bytes.
        Err(mut e) if e.reason == "not a number" => {
            if let Ok(b) = parse_bytes(&e.cell) {
                e.reason = format!("not a number of bytes (write {b})");
            }
            return Err(e);
        }
        Err(e) => return Err(e),
    };
    Ok(MeasuredRow {
        id: id.to_string(),
        hardware: r.string("hardware")?,
        collective: r.string("collective")?,
        algorithm_used: r.string("algorithm_used")?,
        ranks: r.whole("ranks", 1)?,
        nodes: r.whole("nodes", 1)?,
        gpus_per_node: r.whole("gpus_per_node", 1)?,
        bytes,
        busbw_gbps: r.number("busbw_gbps", true)?,
        time_us: r.number("time_us", true)?,
        notes: r.string("notes")?,
    })
}

#[derive(serde::Serialize)]
struct ValidationRow {
    id: String,
    collective: String,
    machine: String,
    ranks: u32,
    ranks_per_node: u32,
    bytes: f64,
    algorithm: &'static str,
    protocol: &'static str,
    metric: &'static str,
    measured: f64,
    predicted: f64,
    error: f64,
    pass: bool,
    bytes_note: Option<&'static str>,
}

/// A row not predicted: a cell that cannot be read, or a row the model cannot express.
#[derive(serde::Serialize)]
pub struct Skipped {
    id: String,
    reason: String,
    /// Data missing, an unreadable cell, or a row the model cannot express (as `validate`'s).
    kind: SkipKind,
    /// The row's line in the file (header = 1).
    line: Option<u64>,
    /// The column of an unreadable cell.
    column: Option<String>,
}

fn validate(path: &Path, format: Format) -> anyhow::Result<ExitCode> {
    let (rows, unreadable) = read_measured(path)?;
    let (ok, mut skipped) = predict_rows(&rows);
    skipped.extend(unreadable);
    skipped.sort_by_key(|s| s.line);
    let failed = ok.iter().filter(|r| !r.pass).count();
    let mut out = std::io::stdout().lock();
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(
                &mut out,
                &serde_json::json!({ "rows": ok, "not_expressible": skipped }),
            )?;
            writeln!(out)?;
        }
        Format::Csv => {
            validation_csv(&mut out, &ok)?;
        }
        Format::Table => {
            validation_table(&mut out, &ok, &skipped, failed)?;
        }
    }
    if ok.is_empty() {
        out.flush()?;
        bail!(
            "{}: no row could be predicted ({} skipped)",
            path.display(),
            skipped.len()
        );
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The predictions of `rows`, and the rows the model cannot express (or whose prediction is
/// not a finite number: that row, not the file, is reported).
fn predict_rows(rows: &[LinedRow]) -> (Vec<ValidationRow>, Vec<Skipped>) {
    let mut ok = Vec::new();
    let mut skipped = Vec::new();
    for (line, row) in rows {
        let line = Some(*line);
        match predict(row) {
            Ok(p) if !(p.predicted.is_finite() && p.error().is_finite()) => skipped.push(Skipped {
                id: p.id.clone(),
                reason: format!(
                    "the prediction is not a finite number ({} for a measured {})",
                    p.predicted, p.measured
                ),
                kind: SkipKind::ToolLimit,
                line,
                column: None,
            }),
            Ok(p) => ok.push(ValidationRow {
                id: p.id.clone(),
                collective: p.collective.name().into(),
                machine: p.cluster.clone(),
                ranks: p.group.size,
                ranks_per_node: p.group.ranks_per_node,
                bytes: p.bytes,
                algorithm: p.algorithm.name(),
                protocol: p.protocol.name(),
                metric: match p.metric {
                    Metric::Busbw => "busbw_gbps",
                    Metric::Time => "time_us",
                },
                measured: p.measured,
                predicted: p.predicted,
                error: p.error(),
                pass: p.passes(),
                bytes_note: p.bytes_note,
            }),
            Err(u) => skipped.push(Skipped {
                id: u.id,
                reason: u.reason,
                kind: if u.blank.is_some() {
                    SkipKind::DataMissing
                } else {
                    SkipKind::ToolLimit
                },
                line,
                column: u.blank.map(str::to_string),
            }),
        }
    }
    (ok, skipped)
}

/// `collective validate --format csv`.
fn validation_csv(out: &mut impl Write, ok: &[ValidationRow]) -> anyhow::Result<()> {
    writeln!(out, "id,collective,machine,ranks,ranks_per_node,bytes,algorithm,protocol,metric,measured,predicted,error,pass")?;
    for r in ok {
        writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{:.4},{:.4},{}",
            r.id,
            r.collective,
            r.machine,
            r.ranks,
            r.ranks_per_node,
            r.bytes,
            r.algorithm,
            r.protocol,
            r.metric,
            r.measured,
            r.predicted,
            r.error,
            r.pass
        )?;
    }
    Ok(())
}

/// `collective validate`'s table: one line per row, then the summary.
fn validation_table(
    out: &mut impl Write,
    ok: &[ValidationRow],
    skipped: &[Skipped],
    failed: usize,
) -> anyhow::Result<()> {
    writeln!(
        out,
        "{:<5} {:<14} {:<12} {:>5} {:>12} {:<20} {:<6} {:>10} {:>10} {:>8}  ",
        "id",
        "collective",
        "machine",
        "ranks",
        "bytes",
        "algorithm",
        "proto",
        "measured",
        "predicted",
        "error"
    )?;
    for r in ok {
        let unit = if r.metric == "time_us" { "µs" } else { "GB/s" };
        writeln!(
            out,
            "{:<5} {:<14} {:<12} {:>5} {:>12} {:<20} {:<6} {:>10.1} {:>10.1} {:>+7.1}%  {}{}",
            r.id,
            r.collective,
            r.machine,
            r.ranks,
            bytes_2dp(r.bytes),
            r.algorithm,
            r.protocol,
            r.measured,
            r.predicted,
            100.0 * r.error,
            unit,
            if r.pass { "" } else { "  OUT OF TOLERANCE" }
        )?;
    }
    for s in skipped {
        let line = s.line.map_or(String::new(), |l| format!(", line {l}"));
        writeln!(
            out,
            "{:<5} skipped ({}{line}): {}",
            s.id,
            s.kind.name(),
            s.reason
        )?;
    }
    let max = ok.iter().map(|r| r.error.abs()).fold(0.0, f64::max);
    let mean = if ok.is_empty() {
        0.0
    } else {
        ok.iter().map(|r| r.error.abs()).sum::<f64>() / ok.len() as f64
    };
    let count = |k| skipped.iter().filter(|s| s.kind == k).count();
    writeln!(
        out,
        "{} rows predicted ({} out of tolerance: busbw ±20%, time ±30%), {} skipped (data \
         missing {}, unreadable {}, tool limit {}); mean |error| {:.1}%, max {:.1}%",
        ok.len(),
        failed,
        skipped.len(),
        count(SkipKind::DataMissing),
        count(SkipKind::Unreadable),
        count(SkipKind::ToolLimit),
        100.0 * mean,
        100.0 * max
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("4096"), Ok(4096.0));
        assert_eq!(parse_bytes("256MB"), Ok(256e6));
        assert_eq!(parse_bytes("1GiB"), Ok(1073741824.0));
        assert_eq!(parse_bytes("128M"), Ok(134217728.0));
        assert_eq!(parse_bytes("1.5GB"), Ok(1.5e9));
        assert!(parse_bytes("12XB").is_err());
        assert!(parse_bytes("GB").is_err());
        assert!(parse_bytes("-5").is_err());
        assert!(parse_bytes("1e300").unwrap_err().contains("[0, 1 PiB]"));
    }

    #[test]
    fn placement_checks() {
        let c = calibration::dgx_h100(8);
        assert_eq!(
            placement(&c, 64, None).unwrap(),
            GroupPlacement {
                size: 64,
                ranks_per_node: 8,
                nodes: 8
            }
        );
        assert!(placement(&c, 64, Some(3)).is_err());
        assert!(placement(&c, 128, None).is_err());
        assert!(placement(&c, 8, Some(16)).is_err());
    }
}
