//! `validate --fit`: the calibration grid scored over the published rows.

use super::*;

/// One point of the calibration grid of [`fit`] and how the rows score under it.
#[derive(Debug, Clone, Serialize)]
pub struct FitPoint {
    pub gemm_eff_max: f64,
    /// Seconds.
    pub gemm_latency: f64,
    pub hbm_eff_max: f64,
    /// Rows of the architecture scored (the others of the file do not depend on its constants).
    pub rows: usize,
    pub mape: f64,
    pub worst: String,
    pub worst_error: f64,
}

/// Whether case `c` is one the constants of `arch` are fitted on: a row on that architecture,
/// inside the domain ([`OUT_OF_DOMAIN`]), its recompute given or not needed
/// ([`recompute_not_given`]), and run under a framework profile that prices every mechanism
/// its framework is known to have (`CostProfile::not_modelled` empty): a row whose error is a
/// framework's unpriced mechanism would bend the GPU's constants for every other framework.
pub fn fitted_on(c: &Case, arch: autoplan_cluster::GpuArch) -> bool {
    c.cluster.gpu.arch == arch
        && !OUT_OF_DOMAIN.iter().any(|(id, _)| *id == c.id)
        && recompute_not_given(c).is_none()
        && autoplan_plan::framework::CostProfile::named(c.framework)
            .is_none_or(|p| p.not_modelled.is_empty())
}

/// The calibration procedure of docs/calibration.md ("Compute"): with every link and collective
/// constant fixed, score the rows [`fitted_on`] `arch` for every point of the grid `gemm_eff_max × gemm_latency × hbm_eff_max` (the silicon's SMs and tiles and
/// `hbm_bytes_half` are kept), and return the points ordered by MAPE (ties: smaller worst
/// error, then the grid order). A point under which a published plan does not run scores as
/// infinitely wrong. Deterministic.
pub fn fit(
    cases: &[Case],
    arch: autoplan_cluster::GpuArch,
    eff_max: &[f64],
    latency: &[f64],
    hbm_eff: &[f64],
) -> Vec<FitPoint> {
    let base = *autoplan_cost::compute::arch_efficiency(arch);
    let mine: Vec<&Case> = cases.iter().filter(|c| fitted_on(c, arch)).collect();
    let mut out = Vec::new();
    for &e in eff_max {
        for &l in latency {
            for &h in hbm_eff {
                let eff = autoplan_cost::compute::ArchEfficiency {
                    gemm_eff_max: e,
                    gemm_latency: l,
                    hbm_eff_max: h,
                    ..base
                };
                let (mut sum, mut worst, mut worst_err) = (0.0, String::new(), 0.0f64);
                for c in &mine {
                    let mut case = (*c).clone();
                    case.options.efficiency = Some(eff);
                    let err = score(&case).map_or(f64::INFINITY, |r| r.error);
                    sum += err.abs();
                    if err.abs() > worst_err.abs() || worst.is_empty() {
                        worst = c.id.clone();
                        worst_err = err;
                    }
                }
                out.push(FitPoint {
                    gemm_eff_max: e,
                    gemm_latency: l,
                    hbm_eff_max: h,
                    rows: mine.len(),
                    mape: if mine.is_empty() {
                        0.0
                    } else {
                        sum / mine.len() as f64
                    },
                    worst,
                    worst_error: worst_err,
                });
            }
        }
    }
    out.sort_by(|a, b| {
        a.mape
            .total_cmp(&b.mape)
            .then(a.worst_error.abs().total_cmp(&b.worst_error.abs()))
    });
    out
}

/// One point of the framework grid of [`fit_framework`]: the profile's
/// `CostProfile::unpriced_compute` and how the profile's rows score under it.
#[derive(Debug, Clone, Serialize)]
pub struct FrameworkFitPoint {
    pub unpriced_compute: f64,
    pub rows: usize,
    pub mape: f64,
    pub worst: String,
    pub worst_error: f64,
}

/// Whether case `c` is one the constant of framework profile `name` is fitted on: a row scored
/// under that profile, inside the domain, its recompute given or not needed.
pub fn framework_fitted_on(c: &Case, name: &str) -> bool {
    c.framework == name
        && !OUT_OF_DOMAIN.iter().any(|(id, _)| *id == c.id)
        && recompute_not_given(c).is_none()
}

/// The rows' errors at one value of `unpriced_compute` (a row that does not run scores as
/// infinitely wrong).
fn framework_errors(cases: &[&Case], unpriced: f64) -> Vec<f64> {
    cases
        .iter()
        .map(|c| {
            let mut case = (*c).clone();
            case.options.unpriced_compute = unpriced;
            score(&case).map_or(f64::INFINITY, |r| r.error)
        })
        .collect()
}

/// The calibration of a framework profile's one constant (docs/calibration.md, "Frameworks"):
/// with the GPU constants fixed (the calibrated table), score the rows
/// [`framework_fitted_on`] profile `name` at every value of `grid`, and return the points
/// ordered by MAPE (ties: smaller worst error, then the grid order), with the leave-one-out
/// error of each row: its error at the value fitted on the other rows alone, the figure that
/// says how the constant does on a row it was not fitted to. Deterministic.
pub fn fit_framework(
    cases: &[Case],
    name: &str,
    grid: &[f64],
) -> (Vec<FrameworkFitPoint>, Vec<(String, f64)>) {
    let mine: Vec<&Case> = cases
        .iter()
        .filter(|c| framework_fitted_on(c, name))
        .collect();
    // errors[g][r]: row r at grid point g.
    let errors: Vec<Vec<f64>> = grid.iter().map(|&u| framework_errors(&mine, u)).collect();
    let point = |g: usize, skip: Option<usize>| {
        let (mut sum, mut n, mut worst, mut worst_err) = (0.0, 0usize, String::new(), 0.0f64);
        for (r, e) in errors[g].iter().enumerate() {
            if Some(r) == skip {
                continue;
            }
            sum += e.abs();
            n += 1;
            if e.abs() > worst_err.abs() || worst.is_empty() {
                worst = mine[r].id.clone();
                worst_err = *e;
            }
        }
        FrameworkFitPoint {
            unpriced_compute: grid[g],
            rows: n,
            mape: if n == 0 { 0.0 } else { sum / n as f64 },
            worst,
            worst_error: worst_err,
        }
    };
    let order = |pts: &mut Vec<FrameworkFitPoint>| {
        pts.sort_by(|a, b| {
            a.mape
                .total_cmp(&b.mape)
                .then(a.worst_error.abs().total_cmp(&b.worst_error.abs()))
        })
    };
    let mut points: Vec<FrameworkFitPoint> = (0..grid.len()).map(|g| point(g, None)).collect();
    order(&mut points);
    let loo = (0..mine.len())
        .filter(|_| mine.len() > 1)
        .map(|r| {
            let best = (0..grid.len())
                .min_by(|&a, &b| {
                    let (pa, pb) = (point(a, Some(r)), point(b, Some(r)));
                    pa.mape
                        .total_cmp(&pb.mape)
                        .then(pa.worst_error.abs().total_cmp(&pb.worst_error.abs()))
                        .then(a.cmp(&b))
                })
                .unwrap_or(0);
            (mine[r].id.clone(), errors[best][r])
        })
        .collect();
    (points, loo)
}
