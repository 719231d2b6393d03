//! `autoplan validate [--runs FILE]`: evaluate every published run the model can express and
//! compare with what was measured (TFLOP/s per GPU in the row's convention, MFU, tokens/s or
//! step time, whichever the row has); MAPE and the worst row; skipped rows with the reason.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use autoplan_cluster::{resolve_cluster, Cluster};
use autoplan_evaluate::validate::{cluster_name_for, validate, PublishedRun, Validation};
use autoplan_graph::{resolve_model, ModelSpec};

use super::Format;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Published runs in the `published_runs.csv` schema.
    #[arg(long, default_value = "../shared/data/published_runs.csv")]
    pub runs: PathBuf,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// Read a `published_runs.csv` file; errors name the file and the line.
pub fn load_runs(path: &Path) -> anyhow::Result<Vec<PublishedRun>> {
    let mut rdr = csv::Reader::from_path(path)
        .with_context(|| format!("cannot read runs file {}", path.display()))?;
    let mut runs = Vec::new();
    for rec in rdr.deserialize() {
        let run: PublishedRun = rec.map_err(|e| {
            let line = e.position().map_or(0, |p| p.line());
            anyhow::anyhow!("{}:{line}: {e}", path.display())
        })?;
        runs.push(run);
    }
    Ok(runs)
}

/// The bundled model of a name, if any.
pub fn bundled_model(name: &str) -> Option<ModelSpec> {
    resolve_model(name).ok()
}

/// The bundled cluster of a row's GPU, resized to its GPU count.
pub fn bundled_cluster(gpu: &str, gpus: u32, _gpus_per_node: u32) -> Option<Cluster> {
    resolve_cluster(cluster_name_for(gpu)?)
        .ok()?
        .with_gpus(gpus)
        .ok()
}

/// Validate a file of runs against the bundled models and clusters.
pub fn validate_file(path: &Path) -> anyhow::Result<Validation> {
    let runs = load_runs(path)?;
    Ok(validate(&runs, &bundled_model, &bundled_cluster))
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let v = validate_file(&args.runs)?;
    let mut out = std::io::stdout().lock();
    match args.format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut out, &v)?;
            writeln!(out)?;
        }
        Format::Table | Format::Csv => table(&mut out, &v)?,
    }
    Ok(ExitCode::SUCCESS)
}

fn table(out: &mut impl Write, v: &Validation) -> anyhow::Result<()> {
    writeln!(
        out,
        "{:<48} {:<18} {:>10} {:>10} {:>8}  plan",
        "run", "figure", "measured", "predicted", "error"
    )?;
    for r in &v.rows {
        writeln!(
            out,
            "{:<48} {:<18} {:>10.3} {:>10.3} {:>+7.1}%  {}",
            r.id,
            r.figure.name(),
            r.measured,
            r.predicted,
            100.0 * r.error,
            r.plan
        )?;
    }
    if !v.outliers.is_empty() {
        writeln!(out)?;
        writeln!(out, "outside the calibrated domain (not in the MAPE):")?;
        for o in &v.outliers {
            let (r, why) = (&o.row, o.reason);
            writeln!(
                out,
                "{:<48} {:<18} {:>10.3} {:>10.3} {:>+7.1}%  {why}",
                r.id,
                r.figure.name(),
                r.measured,
                r.predicted,
                100.0 * r.error
            )?;
        }
    }
    if !v.skipped.is_empty() {
        writeln!(out)?;
        writeln!(out, "skipped:")?;
        for s in &v.skipped {
            writeln!(out, "{:<48} {}", s.id, s.reason)?;
        }
    }
    writeln!(out)?;
    writeln!(
        out,
        "rows used {}, outside the domain {}, skipped {}; MAPE {:.1}%, worst {} ({:+.1}%)",
        v.rows.len(),
        v.outliers.len(),
        v.skipped.len(),
        100.0 * v.mape,
        v.worst.as_deref().unwrap_or("-"),
        100.0 * v.worst_error
    )?;
    Ok(())
}
