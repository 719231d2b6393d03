//! `autoplan validate [--runs FILE]`: evaluate every published run the model can express and
//! compare with what was measured (TFLOP/s per GPU in the row's convention, MFU, tokens/s or
//! step time, whichever the row has); MAPE and the worst row; skipped rows with their line,
//! column, kind (data missing, unreadable cell, tool limit) and reason; rows that give no
//! parallel degrees scored with the best plan the search finds, in their own section.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use autoplan_evaluate::runs::{degrees_given, missing_fact, read_runs, RunsFile};
use autoplan_evaluate::validate::{
    case_of, validate_searching, Case, Figure, SkipKind, Validation,
};
use autoplan_evaluate::Evaluator;
use autoplan_graph::{resolve_model, ModelSpec};
use autoplan_plan::Plan;
use autoplan_search::{resolve_space, search_case, SearchOptions, Space};

use super::Format;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Published runs in the `published_runs.csv` schema; repeat the flag to score several
    /// files together (`--runs data/published_runs.csv --runs data/published_runs_2.csv`: the
    /// MAPE, per-GPU, per-framework and per-source figures over all their rows).
    #[arg(long, default_value = "data/published_runs.csv")]
    pub runs: Vec<PathBuf>,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Print the full evaluation report (as `autoplan evaluate`) of the row with this id
    /// instead of the table: the plan, options and model the row was expressed as.
    #[arg(long, value_name = "ID", conflicts_with = "fit")]
    pub explain: Option<String>,
    /// Re-fit the compute-efficiency constants of one GPU architecture (v100, a100, h100) to
    /// the rows of the `--runs` files on it: a grid over `gemm_eff_max` × `gemm_latency` ×
    /// `hbm_eff_max`, printing the best points by MAPE and the calibrated table's own score,
    /// and at the best point the MAPE per framework profile and per source family; then each
    /// source family's MAPE at the point fitted without it (leave one source out).
    #[arg(long, value_name = "ARCH", conflicts_with = "fit_framework")]
    pub fit: Option<String>,
    /// Re-fit the one constant of a framework cost profile (`unpriced_compute`: the compute its
    /// runs spend beyond the priced kernels) to the rows of the `--runs` files scored under it,
    /// the GPU constants fixed: a grid from 0 to 0.60, printing the best points by MAPE, the
    /// profile's own value and each row's leave-one-out error (docs/calibration.md).
    #[arg(long, value_name = "PROFILE", conflicts_with = "explain")]
    pub fit_framework: Option<String>,
    /// Also write the self-contained HTML report (every row predicted against measured) to
    /// this file (docs/report.md).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["fit", "explain"])]
    pub html: Option<PathBuf>,
    /// Print the summary tables of docs/validation.md (MAPE per file, per GPU, per framework
    /// profile and per source family, in Markdown) instead of the rows.
    #[arg(long, conflicts_with_all = ["fit", "explain", "html"])]
    pub summary: bool,
    /// The search space (bundled name or TOML) in which the best plan of a row that gives no
    /// parallel degrees is searched.
    #[arg(long, default_value = "default")]
    pub space: String,
}

/// Read a file of the `published_runs.csv` schema: the rows read, and the rows skipped for a
/// blank or unreadable cell (with line and column). Only an unreadable file, or one whose header
/// lacks a required column, is an error.
pub fn load_runs(path: &Path) -> anyhow::Result<RunsFile> {
    let bytes =
        std::fs::read(path).with_context(|| format!("cannot read runs file {}", path.display()))?;
    Ok(read_runs(&path.display().to_string(), &bytes)?)
}

/// Say on stderr which columns of `file`'s header no rule reads (a misspelt column reads as
/// blank in every row), with the schema's column each is nearest to.
fn note_unknown_columns(path: &Path, file: &RunsFile) {
    for (column, near) in &file.unknown_columns {
        let hint = near.map_or(String::new(), |c| format!("; did you mean `{c}`?"));
        eprintln!(
            "note: {}: column `{column}` is not one autoplan reads (ignored){hint}",
            path.display()
        );
    }
}

/// The bundled model of a name, if any.
pub fn bundled_model(name: &str) -> Option<ModelSpec> {
    resolve_model(name).ok()
}

pub use autoplan_evaluate::validate::bundled_cluster;

/// Validate a file of runs against the bundled models and clusters; a row giving no parallel
/// degrees is scored with the best plan of `space`. Skipped rows in file order.
pub fn validate_file(path: &Path, space: &Space) -> anyhow::Result<Validation> {
    validate_files(std::slice::from_ref(&path.to_path_buf()), space)
}

/// The rows of every file, in order (an id twice is an error: the summaries would count it
/// twice), and the rows skipped while reading.
pub fn load_all(paths: &[PathBuf]) -> anyhow::Result<RunsFile> {
    let mut all = RunsFile::default();
    let mut ids = std::collections::HashSet::new();
    for p in paths {
        let f = load_runs(p)?;
        for r in &f.runs {
            if ids.contains(&r.id) {
                bail!(
                    "{}: row `{}` is also in an earlier --runs file",
                    p.display(),
                    r.id
                );
            }
        }
        ids.extend(f.runs.iter().map(|r| r.id.clone()));
        all.runs.extend(f.runs);
        all.skipped.extend(f.skipped);
    }
    Ok(all)
}

/// [`validate_file`] over several files scored together.
pub fn validate_files(paths: &[PathBuf], space: &Space) -> anyhow::Result<Validation> {
    let mut v = Validation::default();
    for p in paths {
        let file = load_runs(p)?;
        note_unknown_columns(p, &file);
        let search = |c: &Case| best_plan(c, space);
        let mut one =
            validate_searching(&file.runs, &bundled_model, &bundled_cluster, Some(&search));
        one.skipped.extend(file.skipped);
        one.skipped.sort_by_key(|s| s.line);
        v.rows.extend(one.rows);
        v.outliers.extend(one.outliers);
        v.skipped.extend(one.skipped);
        v.best_plan.extend(one.best_plan);
    }
    load_all(paths)?;
    Ok(v.summarised())
}

/// The best plan of `space` for case `c`'s model, cluster (the row's GPU count), global batch,
/// sequence and evaluation options: the plan `autoplan search` ranks first.
pub fn best_plan(c: &Case, space: &Space) -> Result<Plan, String> {
    let opts = SearchOptions {
        top_k: 1,
        exhaustive: false,
    };
    let found = search_case(&c.model, &c.cluster, c.options, space, &opts, &());
    match (found.outcome.plans.first(), found.outcome.no_fit) {
        (Some(r), _) => Ok(r.plan),
        (None, Some(nf)) => Err(format!(
            "no plan of the space fits in memory (the smallest needs {:.2} GiB of {:.2} GiB)",
            nf.min_memory_bytes / crate::fmt::GIB,
            nf.hbm_bytes / crate::fmt::GIB
        )),
        (None, None) => Err(format!(
            "no valid plan in the space ({} plans) for {} GPUs and global batch {}",
            found.outcome.stats.space_plans,
            c.cluster.gpus(),
            c.model.training.global_batch
        )),
    }
}

fn space_of(name: &str) -> anyhow::Result<Space> {
    resolve_space(name).with_context(|| format!("cannot load search space `{name}`"))
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(id) = &args.explain {
        // One row's full report: several tables, as `evaluate` (which has no CSV either).
        if args.format != Format::Table {
            anyhow::bail!(
                "--explain with --format {}: the row's report is printed as `evaluate` prints \
                 it, a table only",
                if args.format == Format::Json {
                    "json"
                } else {
                    "csv"
                }
            );
        }
        return explain(&args.runs, id, &args.space);
    }
    if let Some(arch) = &args.fit {
        return super::validate_fit::fit_arch(&args.runs, arch, args.format);
    }
    if let Some(name) = &args.fit_framework {
        return super::validate_fit::fit_framework(&args.runs, name, args.format);
    }
    let space = space_of(&args.space)?;
    if args.summary {
        let md = super::validate_summary::summary(&args.runs, &space)?;
        print!("{md}");
        return Ok(ExitCode::SUCCESS);
    }
    let v = validate_files(&args.runs, &space)?;
    if let Some(path) = &args.html {
        let runs = load_all(&args.runs)?;
        let doc = super::report::validate_document(&v, &runs.runs, &args.runs[0]);
        super::report::write_html(path, &doc)?;
    }
    for r in v
        .rows
        .iter()
        .chain(v.outliers.iter().map(|o| &o.row))
        .chain(v.best_plan.iter().map(|b| &b.row))
    {
        super::ensure_finite(
            &format!("run `{}`", r.id),
            &[("predicted", r.predicted), ("error", r.error)],
        )?;
    }
    super::ensure_finite(
        "validation",
        &[("MAPE", v.mape), ("worst error", v.worst_error)],
    )?;
    let mut out = std::io::stdout().lock();
    match args.format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut out, &v)?;
            writeln!(out)?;
        }
        Format::Csv => csv_rows(&mut out, &v)?,
        Format::Table => table(&mut out, &v)?,
    }
    if v.rows.is_empty() && v.outliers.is_empty() && v.best_plan.is_empty() {
        out.flush()?;
        let files: Vec<String> = args.runs.iter().map(|p| p.display().to_string()).collect();
        bail!(
            "{}: no row could be scored ({} skipped)",
            files.join(", "),
            v.skipped.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `--explain ID`: the row's case, evaluated and printed as `autoplan evaluate` prints a plan.
fn explain(paths: &[PathBuf], id: &str, space: &str) -> anyhow::Result<ExitCode> {
    let file = load_all(paths)?;
    if let Some(s) = file.skipped.iter().find(|s| s.id == id) {
        anyhow::bail!("row `{id}` is skipped: {}", s.reason);
    }
    let row = file.runs.iter().find(|r| r.id == id).with_context(|| {
        let files: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        format!("{}: no row with id `{id}`", files.join(", "))
    })?;
    if let Some(s) = missing_fact(row) {
        anyhow::bail!("row `{id}` is skipped: {}", s.reason);
    }
    let mut case = match case_of(row, &bundled_model, &bundled_cluster) {
        Ok(c) => c,
        Err(s) => anyhow::bail!("row `{id}` is skipped: {}", s.reason),
    };
    let searched = !degrees_given(row);
    if searched {
        case.plan = best_plan(&case, &space_of(space)?)
            .map_err(|why| anyhow::anyhow!("row `{id}` is skipped: no best plan found: {why}"))?;
    }
    let ev = Evaluator::new(&case.model, &case.cluster, case.options);
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{id}: measured {} {:.3}; model {} ({:?}), {} GPUs{}",
        case.figure.name(),
        case.measured,
        case.model.name,
        case.model.training.precision,
        case.cluster.gpus(),
        if searched {
            "; the row gives no parallel degrees: the plan is the best the search finds"
        } else {
            ""
        }
    )?;
    if let Some(why) = &case.chosen {
        writeln!(out, "chosen by the model: {why}")?;
    }
    match ev.report(&case.plan) {
        Ok(r) => {
            super::ensure_finite_report(&format!("row `{id}`"), &r)?;
            // The measured step the row's figure implies (every figure but the step time is a
            // rate, ∝ 1/step), and both per block and micro-batch of the busiest stage.
            let step = r.metrics.step_time_s;
            let predicted = case.predicted(&r.metrics);
            let measured_step = match case.figure {
                Figure::StepTimeS => case.measured,
                _ => step * predicted / case.measured,
            };
            let blocks = r.stages[r.bottleneck_stage as usize].blocks.max(1);
            let per = (r.microbatches.max(1) * blocks) as f64 / 1e3;
            writeln!(
                out,
                "step time: measured {measured_step:.3} s (implied by the row), modelled \
                 {step:.3} s; per block and micro-batch of the busiest stage ({blocks} blocks, \
                 {} micro-batches): measured {:.2} ms, modelled {:.2} ms",
                r.microbatches,
                measured_step / per,
                step / per
            )?;
            super::evaluate::table(&mut out, &case.plan.to_string(), &ev, &case.plan, &r)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            match autoplan_evaluate::validate::recompute_not_given(&case) {
                Some(why) => writeln!(out, "skipped: {why}")?,
                None => writeln!(out, "the published plan is rejected: {e}")?,
            }
            if let Ok(mm) = ev.memory_breakdown(&case.plan) {
                super::evaluate::memory_table(&mut out, &mm)?;
            }
            out.flush()?;
            // Reported above: out of memory is infeasible (3), an invalid plan bad input (2).
            match e {
                autoplan_evaluate::Infeasible::OutOfMemory { .. }
                | autoplan_evaluate::Infeasible::OutOfHostMemory { .. } => {
                    Err(crate::exit::Infeasible::reported().into())
                }
                autoplan_evaluate::Infeasible::Invalid(_) => {
                    Ok(ExitCode::from(crate::exit::BAD_INPUT))
                }
            }
        }
    }
}

/// `--format csv`: one row per published run, used or not: the table's columns unrounded, with
/// `status` (`used`, `outlier`, `best-plan`, `skipped`), `note` (an outlier's or a skipped row's
/// reason), and for skipped rows `skip_kind`, `line` and `column`. A `best-plan` row's plan is
/// the one the search found (the row gives no parallel degrees).
fn csv_rows(out: &mut impl Write, v: &Validation) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record([
        "id",
        "status",
        "figure",
        "measured",
        "predicted",
        "error",
        "plan",
        "note",
        "skip_kind",
        "line",
        "column",
    ])?;
    let scored = v
        .rows
        .iter()
        .map(|r| (r, "used", ""))
        .chain(v.outliers.iter().map(|o| (&o.row, "outlier", o.reason)))
        .chain(v.best_plan.iter().map(|b| (&b.row, "best-plan", "")));
    for (r, status, note) in scored {
        w.write_record([
            r.id.as_str(),
            status,
            r.figure.name(),
            &r.measured.to_string(),
            &r.predicted.to_string(),
            &r.error.to_string(),
            &r.plan.to_string(),
            note,
            "",
            "",
            "",
        ])?;
    }
    for s in &v.skipped {
        w.write_record([
            s.id.as_str(),
            "skipped",
            "",
            "",
            "",
            "",
            "",
            &s.reason.to_string(),
            &crate::fmt::serde_name(&s.kind),
            &s.line.map_or(String::new(), |l| l.to_string()),
            s.column.as_deref().unwrap_or(""),
        ])?;
    }
    w.flush()?;
    Ok(())
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
    if !v.best_plan.is_empty() {
        writeln!(out)?;
        writeln!(
            out,
            "best plan found vs the experts' run (the row gives no parallel degrees; not in the \
             MAPE):"
        )?;
        for b in &v.best_plan {
            let r = &b.row;
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
    }
    for kind in [
        SkipKind::DataMissing,
        SkipKind::Unreadable,
        SkipKind::ToolLimit,
    ] {
        let of_kind: Vec<_> = v.skipped.iter().filter(|s| s.kind == kind).collect();
        if of_kind.is_empty() {
            continue;
        }
        writeln!(out)?;
        writeln!(out, "skipped, {} ({}):", kind.name(), kind.meaning())?;
        for s in of_kind {
            let line = s.line.map_or(String::new(), |l| format!("line {l}"));
            writeln!(out, "{:<48} {line:<9} {}", s.id, s.reason)?;
        }
    }
    writeln!(out)?;
    let count = |k| v.skipped.iter().filter(|s| s.kind == k).count();
    writeln!(
        out,
        "rows used {}, outside the domain {}, best plan found {}, skipped {} (data missing {}, \
         unreadable {}, tool limit {}); MAPE {:.1}%, worst {} ({:+.1}%)",
        v.rows.len(),
        v.outliers.len(),
        v.best_plan.len(),
        v.skipped.len(),
        count(SkipKind::DataMissing),
        count(SkipKind::Unreadable),
        count(SkipKind::ToolLimit),
        100.0 * v.mape,
        v.worst.as_deref().unwrap_or("-"),
        100.0 * v.worst_error
    )?;
    let by: Vec<String> = v
        .by_gpu
        .iter()
        .map(|a| format!("{:?} {} rows {:.1}%", a.arch, a.rows, 100.0 * a.mape))
        .collect();
    writeln!(out, "by GPU: {}", by.join(", "))?;
    let group = |g: &[autoplan_evaluate::validate::GroupSummary]| {
        g.iter()
            .map(|a| format!("{} {} rows {:.1}%", a.name, a.rows, 100.0 * a.mape))
            .collect::<Vec<_>>()
            .join(", ")
    };
    writeln!(out, "by framework: {}", group(&v.by_framework))?;
    writeln!(out, "by source: {}", group(&v.by_source))?;
    // What the profile of a row beyond 20% does not price, and what would settle it.
    let far: Vec<_> = v
        .rows
        .iter()
        .filter(|r| r.error.abs() > 0.20)
        .filter_map(|r| {
            let p = autoplan_plan::framework::CostProfile::named(r.framework)?;
            (!p.not_modelled.is_empty()).then_some((r, p))
        })
        .collect();
    if !far.is_empty() {
        writeln!(out)?;
        writeln!(
            out,
            "rows beyond 20% and what their framework profile does not price:"
        )?;
        for (r, p) in far {
            writeln!(
                out,
                "{:<48} {:>+7.1}%  {}: {}",
                r.id,
                100.0 * r.error,
                p.name,
                p.not_modelled
            )?;
        }
    }
    Ok(())
}
