//! `autoplan validate --fit ARCH` and `--fit-framework PROFILE`: the calibration grids of the
//! GPU constants and of a framework profile's one constant, scored over the published rows.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use autoplan_cluster::GpuArch;
use autoplan_cost::compute::arch_efficiency;
use autoplan_evaluate::runs::{degrees_given, missing_fact};
use autoplan_evaluate::validate::{
    case_of, fit, fit_framework as fit_profile, fit_leaving_sources_out, fitted_on, group_mape,
    score, Case, FitPoint, FrameworkConstant, FrameworkFitPoint, GridScore, HeldOutSource,
    MIN_FIT_ROWS,
};
use autoplan_plan::framework::CostProfile;

use super::validate::{bundled_cluster, bundled_model, load_all};
use super::Format;

/// The columns every grid prints after its constants: rows, MAPE, worst error, worst row.
fn score_columns(s: &GridScore) -> String {
    format!(
        "{:>5} {:>6.2}% {:>+7.1}%  {}",
        s.rows,
        100.0 * s.mape,
        100.0 * s.worst_error,
        s.worst
    )
}

/// The rows validate scores with their own plan, as cases.
fn own_plan_cases(paths: &[PathBuf]) -> anyhow::Result<Vec<Case>> {
    let runs = load_all(paths)?.runs;
    Ok(runs
        .iter()
        .filter(|r| missing_fact(r).is_none() && degrees_given(r))
        .filter_map(|r| case_of(r, &bundled_model, &bundled_cluster).ok())
        .collect())
}

/// `--fit ARCH`: the calibration grid (see `autoplan_evaluate::validate::fit`).
pub(super) fn fit_arch(paths: &[PathBuf], arch: &str, format: Format) -> anyhow::Result<ExitCode> {
    let a = match arch.to_ascii_lowercase().as_str() {
        "v100" => GpuArch::V100,
        "a100" => GpuArch::A100,
        "h100" => GpuArch::H100,
        other => bail!("--fit {other}: the published rows cover v100, a100 and h100"),
    };
    if format == Format::Csv {
        bail!("--fit with --format csv: the grid prints as a table or JSON (--format json)");
    }
    let cases = own_plan_cases(paths)?;
    // 0.40..0.90 by 0.01; 0..30 µs by 2.5 µs (a launch plus the framework gap per GEMM:
    // beyond is not a per-kernel cost); 0.50..0.90 by 0.05.
    let eff: Vec<f64> = (0..=50).map(|i| 0.40 + 0.01 * i as f64).collect();
    let half: Vec<f64> = (0..=12).map(|i| 2.5e-6 * i as f64).collect();
    let hbm: Vec<f64> = (0..=8).map(|i| 0.50 + 0.05 * i as f64).collect();
    let (points, held_out) = fit_leaving_sources_out(&cases, a, &eff, &half, &hbm);
    let cur = *arch_efficiency(a);
    let current = fit(
        &cases,
        a,
        &[cur.gemm_eff_max],
        &[cur.gemm_latency],
        &[cur.hbm_eff_max],
    );
    let mut out = std::io::stdout().lock();
    if format == Format::Json {
        serde_json::to_writer_pretty(
            &mut out,
            &serde_json::json!({
                "current": current.first(),
                "best": &points[..points.len().min(20)],
                "leave_one_source_out": held_out,
            }),
        )?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "{:>8} {:>10} {:>8} {:>5} {:>7} {:>8}  worst row",
        "eff_max", "latency", "hbm_eff", "rows", "MAPE", "worst"
    )?;
    let line = |out: &mut std::io::StdoutLock, p: &FitPoint, tag: &str| {
        writeln!(
            out,
            "{:>8.2} {:>7.1} µs {:>8.2} {}{tag}",
            p.gemm_eff_max,
            p.gemm_latency * 1e6,
            p.hbm_eff_max,
            score_columns(&p.score)
        )
    };
    for p in points.iter().take(20) {
        line(&mut out, p, "")?;
    }
    if let Some(c) = current.first() {
        line(&mut out, c, "   <- ARCH_TABLE now")?;
    }
    // The best point's and the table's MAPE by framework profile and source family.
    for (name, p) in [
        ("best point", points.first()),
        ("ARCH_TABLE", current.first()),
    ] {
        let Some(p) = p else { continue };
        let eff = autoplan_cost::compute::ArchEfficiency {
            gemm_eff_max: p.gemm_eff_max,
            gemm_latency: p.gemm_latency,
            hbm_eff_max: p.hbm_eff_max,
            ..cur
        };
        let rows = fit_rows(&cases, a, eff);
        let group = |g: Vec<autoplan_evaluate::validate::GroupSummary>| {
            g.iter()
                .map(|x| format!("{} {} rows {:.1}%", x.name, x.rows, 100.0 * x.mape))
                .collect::<Vec<_>>()
                .join(", ")
        };
        writeln!(
            out,
            "{name}: by framework: {}",
            group(group_mape(&rows, |r| r.framework.to_string()))
        )?;
        writeln!(
            out,
            "{name}: by source: {}",
            group(group_mape(&rows, |r| r.source.clone()))
        )?;
    }
    held_out_table(&mut out, &held_out)?;
    Ok(ExitCode::SUCCESS)
}

/// The leave-one-source-out table of `--fit` (`fit_leaving_sources_out`): each family's rows
/// at the point fitted without them, against the point fitted with them, and the rows of all
/// families pooled.
fn held_out_table(out: &mut impl Write, held: &[HeldOutSource]) -> std::io::Result<()> {
    if held.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "leave one source out (each family's rows at the point fitted on the other families' rows):"
    )?;
    writeln!(
        out,
        "{:>12} {:>5} {:>8} {:>10} {:>8} {:>9} {:>10} {:>8}  worst row held out",
        "source", "rows", "eff_max", "latency", "hbm_eff", "held out", "in sample", "worst"
    )?;
    let (mut rows, mut held_sum, mut in_sum) = (0, 0.0, 0.0);
    for h in held {
        let p = &h.fitted_without;
        writeln!(
            out,
            "{:>12} {:>5} {:>8.2} {:>7.1} µs {:>8.2} {:>8.2}% {:>9.2}% {:>+7.1}%  {}",
            h.source,
            h.held_out.rows,
            p.gemm_eff_max,
            p.gemm_latency * 1e6,
            p.hbm_eff_max,
            100.0 * h.held_out.mape,
            100.0 * h.in_sample.mape,
            100.0 * h.held_out.worst_error,
            h.held_out.worst
        )?;
        rows += h.held_out.rows;
        held_sum += h.held_out.mape * h.held_out.rows as f64;
        in_sum += h.in_sample.mape * h.in_sample.rows as f64;
    }
    let n = rows.max(1) as f64;
    writeln!(
        out,
        "{:>12} {:>5} {:>38} {:>8.2}% {:>9.2}%",
        "all",
        rows,
        "",
        100.0 * held_sum / n,
        100.0 * in_sum / n
    )
}

/// The rows `fit` scores on `arch` ([`fitted_on`]), scored under the efficiency constants `eff`; a row that does not run is left out.
fn fit_rows(
    cases: &[Case],
    arch: GpuArch,
    eff: autoplan_cost::compute::ArchEfficiency,
) -> Vec<autoplan_evaluate::validate::RowResult> {
    cases
        .iter()
        .filter(|c| fitted_on(c, arch))
        .filter_map(|c| {
            let mut c = c.clone();
            c.options.efficiency = Some(eff);
            score(&c).ok()
        })
        .collect()
}

/// `--fit-framework PROFILE`: the grid of the profile's one constant (`unpriced_compute`, or
/// for a profile naming nothing unpriced `expert_gemm_host`: `FrameworkConstant`; see
/// `autoplan_evaluate::validate::fit_framework`), with the leave-one-out error of each row.
pub(super) fn fit_framework(
    paths: &[PathBuf],
    name: &str,
    format: Format,
) -> anyhow::Result<ExitCode> {
    let Some(profile) = CostProfile::named(name) else {
        let names: Vec<&str> = CostProfile::ALL.iter().map(|p| p.name).collect();
        bail!(
            "--fit-framework {name}: no such profile (profiles: {})",
            names.join(", ")
        );
    };
    if format == Format::Csv {
        bail!(
            "--fit-framework with --format csv: the grid prints as a table or JSON (--format json)"
        );
    }
    let cases = own_plan_cases(paths)?;
    let constant = FrameworkConstant::of(&profile);
    let (points, loo) = fit_profile(&cases, name, constant, &constant.grid());
    let (current, _) = fit_profile(&cases, name, constant, &[constant.value(&profile)]);
    if points.first().is_none_or(|p| p.score.rows == 0) {
        bail!("--fit-framework {name}: no row of the --runs files is scored under this profile");
    }
    let mut out = std::io::stdout().lock();
    if format == Format::Json {
        serde_json::to_writer_pretty(
            &mut out,
            &serde_json::json!({
                "profile": name,
                "current": current.first(),
                "best": &points[..points.len().min(10)],
                "leave_one_out": loo.iter().map(|(id, e)| serde_json::json!({"id": id, "error": e})).collect::<Vec<_>>(),
            }),
        )?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    // `unpriced_compute` as a fraction, `expert_gemm_host` in µs.
    let (head, scale) = match constant {
        FrameworkConstant::UnpricedCompute => ("unpriced", 1.0),
        FrameworkConstant::ExpertGemmHost => ("host µs", 1e6),
    };
    writeln!(
        out,
        "{:>9} {:>5} {:>7} {:>8}  worst row",
        head, "rows", "MAPE", "worst"
    )?;
    let line = |out: &mut std::io::StdoutLock, p: &FrameworkFitPoint, tag: &str| {
        writeln!(
            out,
            "{:>9.2} {}{tag}",
            p.value * scale,
            score_columns(&p.score)
        )
    };
    for p in points.iter().take(10) {
        line(&mut out, p, "")?;
    }
    if let Some(c) = current.first() {
        line(&mut out, c, "   <- the profile now")?;
    }
    if points[0].score.rows < MIN_FIT_ROWS {
        writeln!(
            out,
            "{name} has {} in the domain, fewer than {MIN_FIT_ROWS}: too few to fit its \
             constant (a value fitted on them is their own answer, which leave-one-out cannot \
             test), so the profile carries 0",
            match points[0].score.rows {
                1 => "one row".to_string(),
                n => format!("{n} rows"),
            }
        )?;
    }
    if constant == FrameworkConstant::ExpertGemmHost {
        writeln!(
            out,
            "{name} names nothing it does not price: its rows calibrate the GPU constants \
             (--fit ARCH); its own constant is the host time per expert GEMM of its dropless \
             MoE layers (expert_gemm_host), which only its MoE rows move"
        )?;
    }
    writeln!(
        out,
        "leave one out (each row at the value fitted on the others):"
    )?;
    for (id, e) in &loo {
        writeln!(out, "  {id:48} {:>+7.1}%", 100.0 * e)?;
    }
    Ok(ExitCode::SUCCESS)
}
