//! `validate --fit`'s leave-one-source-out cross-validation (issue 17: predictions right on
//! runs the constants were not fitted to): each source family's rows are scored at the point
//! the grid finds without them, which must be what fitting the other families alone gives.

mod common;

use autoplan_cluster::GpuArch;
use autoplan_evaluate::runs::{degrees_given, missing_fact};
use autoplan_evaluate::validate::{
    case_of, fit, fit_leaving_sources_out, fitted_on, score, Case, FitPoint,
};
use common::{cluster_for, rows};

/// The rows `validate --fit` fits: those that give their plan (the CLI's filter), as cases.
fn cases() -> Vec<Case> {
    let mut all = rows("published_runs.csv");
    all.extend(rows("published_runs_2.csv"));
    all.iter()
        .filter(|r| missing_fact(r).is_none() && degrees_given(r))
        .filter_map(|r| case_of(r, &|n| autoplan_graph::resolve_model(n).ok(), &cluster_for).ok())
        .collect()
}

/// The MAPE of `cases` on `arch` at the constants of point `p`, each row priced by `score`.
fn mape_at(cases: &[&Case], p: &FitPoint) -> f64 {
    let base = *autoplan_cost::compute::arch_efficiency(GpuArch::H100);
    let eff = autoplan_cost::compute::ArchEfficiency {
        gemm_eff_max: p.gemm_eff_max,
        gemm_latency: p.gemm_latency,
        hbm_eff_max: p.hbm_eff_max,
        ..base
    };
    let errors: Vec<f64> = cases
        .iter()
        .map(|c| {
            let mut c = (*c).clone();
            c.options.efficiency = Some(eff);
            score(&c).map_or(f64::INFINITY, |r| r.error.abs())
        })
        .collect();
    errors.iter().sum::<f64>() / errors.len() as f64
}

#[test]
fn each_source_held_out_is_scored_at_the_fit_of_the_others() {
    let cases = cases();
    let (eff, lat, hbm) = ([0.64, 0.69, 0.74], [20e-6, 30e-6], [0.5, 0.7]);
    let (points, held) = fit_leaving_sources_out(&cases, GpuArch::H100, &eff, &lat, &hbm);
    // The ranking is `fit`'s.
    let plain = fit(&cases, GpuArch::H100, &eff, &lat, &hbm);
    assert_eq!(points.len(), plain.len());
    for (a, b) in points.iter().zip(&plain) {
        assert_eq!(
            (a.gemm_eff_max, a.gemm_latency, a.hbm_eff_max, a.score.mape),
            (b.gemm_eff_max, b.gemm_latency, b.hbm_eff_max, b.score.mape)
        );
    }
    let fitted: Vec<&Case> = cases
        .iter()
        .filter(|c| fitted_on(c, GpuArch::H100))
        .collect();
    assert!(held.len() >= 5, "{held:?}");
    assert_eq!(
        held.iter().map(|h| h.held_out.rows).sum::<usize>(),
        fitted.len()
    );
    for h in &held {
        // Fitting without the family, independently: the grid over the other rows alone.
        let others: Vec<Case> = cases
            .iter()
            .filter(|c| c.source != h.source)
            .cloned()
            .collect();
        let p = &fit(&others, GpuArch::H100, &eff, &lat, &hbm)[0];
        assert_eq!(
            (p.gemm_eff_max, p.gemm_latency, p.hbm_eff_max),
            (
                h.fitted_without.gemm_eff_max,
                h.fitted_without.gemm_latency,
                h.fitted_without.hbm_eff_max
            ),
            "{}",
            h.source
        );
        assert_eq!(p.score.mape, h.fitted_without.score.mape, "{}", h.source);
        let theirs: Vec<&Case> = fitted
            .iter()
            .copied()
            .filter(|c| c.source == h.source)
            .collect();
        assert_eq!(theirs.len(), h.held_out.rows);
        let at = mape_at(&theirs, p);
        assert!(
            (at - h.held_out.mape).abs() <= 1e-12,
            "{}: {at} vs {}",
            h.source,
            h.held_out.mape
        );
        assert!(
            (mape_at(&theirs, &plain[0]) - h.in_sample.mape).abs() <= 1e-12,
            "{}",
            h.source
        );
    }
}

#[test]
fn one_source_family_has_nothing_to_hold_out() {
    // V100's rows are all Megatron-LM v1's (`meg20`): no other family to fit on.
    let cases = cases();
    let (points, held) = fit_leaving_sources_out(&cases, GpuArch::V100, &[0.78], &[30e-6], &[0.9]);
    assert_eq!(points.len(), 1);
    assert!(points[0].score.rows > 0);
    assert!(held.is_empty());
}
