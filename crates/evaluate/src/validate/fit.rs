//! `validate --fit`: the calibration grid scored over the published rows.

use super::*;
use autoplan_plan::framework::CostProfile;

/// How the fitted rows score at one point of a calibration grid ([`fit`], [`fit_framework`]).
#[derive(Debug, Clone, Serialize)]
pub struct GridScore {
    /// Rows scored (the others of the files do not depend on the constant fitted).
    pub rows: usize,
    pub mape: f64,
    pub worst: String,
    pub worst_error: f64,
}

impl GridScore {
    /// The score of rows `(id, error)`; a row that does not run has an infinite error.
    fn of<'a>(errors: impl Iterator<Item = (&'a str, f64)>) -> GridScore {
        let (mut sum, mut rows, mut worst, mut worst_error) = (0.0, 0, String::new(), 0.0f64);
        for (id, e) in errors {
            sum += e.abs();
            rows += 1;
            if e.abs() > worst_error.abs() || worst.is_empty() {
                worst = id.to_string();
                worst_error = e;
            }
        }
        let mape = if rows == 0 { 0.0 } else { sum / rows as f64 };
        GridScore {
            rows,
            mape,
            worst,
            worst_error,
        }
    }

    /// The grids' order: smaller MAPE first, ties broken by the smaller worst error (a stable
    /// sort keeps the grid order after that).
    fn better(&self, other: &GridScore) -> std::cmp::Ordering {
        self.mape
            .total_cmp(&other.mape)
            .then(self.worst_error.abs().total_cmp(&other.worst_error.abs()))
    }
}

/// A row's error under the options `set` gives its case (infinite when the plan does not run).
fn error_with(c: &Case, set: impl FnOnce(&mut EvalOptions)) -> f64 {
    let mut case = c.clone();
    set(&mut case.options);
    score(&case).map_or(f64::INFINITY, |r| r.error)
}

/// One point of the calibration grid of [`fit`] and how the rows score under it.
#[derive(Debug, Clone, Serialize)]
pub struct FitPoint {
    pub gemm_eff_max: f64,
    /// Seconds.
    pub gemm_latency: f64,
    pub hbm_eff_max: f64,
    /// The architecture's rows.
    #[serde(flatten)]
    pub score: GridScore,
}

/// Whether case `c` is one the constants of `arch` are fitted on: a row on that architecture,
/// inside the domain ([`OUT_OF_DOMAIN`]), its recompute given or not needed
/// ([`recompute_known`]), and run under a framework profile that prices every mechanism
/// its framework is known to have (`CostProfile::not_modelled` empty): a row whose error is a
/// framework's unpriced mechanism would bend the GPU's constants for every other framework.
pub fn fitted_on(c: &Case, arch: autoplan_cluster::GpuArch) -> bool {
    c.cluster.gpu.arch == arch
        && !OUT_OF_DOMAIN.iter().any(|(id, _)| *id == c.id)
        && recompute_known(c)
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
    ArchGrid::new(cases, arch, eff_max, latency, hbm_eff).ranked()
}

/// One source family held out of the calibration ([`fit_leaving_sources_out`]).
#[derive(Debug, Clone, Serialize)]
pub struct HeldOutSource {
    /// The family ([`source_family`]).
    pub source: String,
    /// Its rows' score at the point fitted on every other family's rows: how the constants
    /// do on a publication they were not fitted to.
    pub held_out: GridScore,
    /// The point fitted without the family (its `score`: the other families' rows).
    pub fitted_without: FitPoint,
    /// Its rows' score at the point fitted on all rows, the family's included.
    pub in_sample: GridScore,
}

/// [`fit`] and its leave-one-source-out cross-validation: for each source family with rows
/// [`fitted_on`] `arch`, the grid is fitted on the other families' rows alone and the family's
/// rows are scored at that point, the test a held-out publication puts the constants to (a
/// family of one source shares its hardware, software and authors' conventions, so leaving
/// out single rows would keep its siblings in the fit). Families in order of first appearance;
/// none when fewer than two families have rows. Each row is priced once per grid point, as
/// [`fit`] prices it. Deterministic.
pub fn fit_leaving_sources_out(
    cases: &[Case],
    arch: autoplan_cluster::GpuArch,
    eff_max: &[f64],
    latency: &[f64],
    hbm_eff: &[f64],
) -> (Vec<FitPoint>, Vec<HeldOutSource>) {
    let grid = ArchGrid::new(cases, arch, eff_max, latency, hbm_eff);
    let ranked = grid.ranked();
    let mut families: Vec<&str> = Vec::new();
    for f in &grid.families {
        if !families.contains(&f.as_str()) {
            families.push(f);
        }
    }
    let all = grid.best(|_| true);
    let held = match (families.len() >= 2, all) {
        (true, Some((all, _))) => families
            .iter()
            .filter_map(|&fam| {
                let (g, fitted_without) = grid.best(|r| grid.families[r] != fam)?;
                let theirs = |g: usize| grid.score_at(g, |r| grid.families[r] == fam);
                Some(HeldOutSource {
                    source: fam.to_string(),
                    held_out: theirs(g),
                    fitted_without,
                    in_sample: theirs(all),
                })
            })
            .collect(),
        _ => Vec::new(),
    };
    (ranked, held)
}

/// Every row [`fitted_on`] an architecture priced at every point of a calibration grid, once.
struct ArchGrid {
    /// (gemm_eff_max, gemm_latency, hbm_eff_max), in grid order.
    points: Vec<(f64, f64, f64)>,
    ids: Vec<String>,
    families: Vec<String>,
    /// errors[g][r]: row r at grid point g (infinite where the plan does not run).
    errors: Vec<Vec<f64>>,
}

impl ArchGrid {
    fn new(
        cases: &[Case],
        arch: autoplan_cluster::GpuArch,
        eff_max: &[f64],
        latency: &[f64],
        hbm_eff: &[f64],
    ) -> ArchGrid {
        let base = *autoplan_cost::compute::arch_efficiency(arch);
        let mine: Vec<&Case> = cases.iter().filter(|c| fitted_on(c, arch)).collect();
        let mut points = Vec::new();
        let mut errors = Vec::new();
        for &e in eff_max {
            for &l in latency {
                for &h in hbm_eff {
                    let eff = autoplan_cost::compute::ArchEfficiency {
                        gemm_eff_max: e,
                        gemm_latency: l,
                        hbm_eff_max: h,
                        ..base
                    };
                    points.push((e, l, h));
                    errors.push(
                        mine.iter()
                            .map(|c| error_with(c, |o| o.efficiency = Some(eff)))
                            .collect(),
                    );
                }
            }
        }
        ArchGrid {
            points,
            ids: mine.iter().map(|c| c.id.clone()).collect(),
            families: mine.iter().map(|c| c.source.clone()).collect(),
            errors,
        }
    }

    /// The score at grid point `g` of the rows `keep` selects.
    fn score_at(&self, g: usize, keep: impl Fn(usize) -> bool) -> GridScore {
        GridScore::of(
            self.errors[g]
                .iter()
                .enumerate()
                .filter(|&(r, _)| keep(r))
                .map(|(r, &e)| (self.ids[r].as_str(), e)),
        )
    }

    fn point(&self, g: usize, score: GridScore) -> FitPoint {
        let (e, l, h) = self.points[g];
        FitPoint {
            gemm_eff_max: e,
            gemm_latency: l,
            hbm_eff_max: h,
            score,
        }
    }

    /// Every point scored over all the rows, best first (ties: the smaller worst error, then
    /// the grid order).
    fn ranked(&self) -> Vec<FitPoint> {
        let mut out: Vec<FitPoint> = (0..self.points.len())
            .map(|g| self.point(g, self.score_at(g, |_| true)))
            .collect();
        out.sort_by(|a, b| a.score.better(&b.score));
        out
    }

    /// The best point over the rows `keep` selects and its index (the first in grid order of
    /// equals); `None` for an empty grid.
    fn best(&self, keep: impl Fn(usize) -> bool) -> Option<(usize, FitPoint)> {
        let scores: Vec<GridScore> = (0..self.points.len())
            .map(|g| self.score_at(g, &keep))
            .collect();
        let g = (0..scores.len()).min_by(|&a, &b| scores[a].better(&scores[b]))?;
        Some((g, self.point(g, scores[g].clone())))
    }
}

/// The one constant a framework profile may carry, which [`fit_framework`] fits on its rows
/// (docs/calibration.md, "Frameworks"): `unpriced_compute` for a profile that names what it
/// does not price (`CostProfile::not_modelled`); for one that names nothing, whose rows
/// calibrate the GPU constants, the host time per expert GEMM of its dropless MoE layers
/// (`expert_gemm_host`: a launch overhead per expert, issue 17 item 4), which no GPU constant
/// stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FrameworkConstant {
    UnpricedCompute,
    ExpertGemmHost,
}

impl FrameworkConstant {
    /// The constant profile `p` carries.
    pub fn of(p: &CostProfile) -> FrameworkConstant {
        if p.not_modelled.is_empty() {
            FrameworkConstant::ExpertGemmHost
        } else {
            FrameworkConstant::UnpricedCompute
        }
    }

    /// Its value in profile `p`.
    pub fn value(self, p: &CostProfile) -> f64 {
        match self {
            FrameworkConstant::UnpricedCompute => p.unpriced_compute,
            FrameworkConstant::ExpertGemmHost => p.expert_gemm_host,
        }
    }

    /// The grid `validate --fit-framework` searches: `unpriced_compute` 0 to 0.60 by 0.01
    /// (beyond, the framework would run at under 63% of its kernels' speed: not an unpriced
    /// detail but a missing model); `expert_gemm_host` 0 to 50 µs by 2.5 µs (twice the 26 µs
    /// plain PyTorch waits per expert GEMM, `results/h100/qwen235_block.csv`).
    pub fn grid(self) -> Vec<f64> {
        match self {
            FrameworkConstant::UnpricedCompute => (0..=60).map(|i| 0.01 * f64::from(i)).collect(),
            FrameworkConstant::ExpertGemmHost => (0..=20).map(|i| 2.5e-6 * f64::from(i)).collect(),
        }
    }

    fn set(self, o: &mut EvalOptions, v: f64) {
        match self {
            FrameworkConstant::UnpricedCompute => o.unpriced_compute = v,
            FrameworkConstant::ExpertGemmHost => o.expert_gemm_host = v,
        }
    }
}

/// One point of the framework grid of [`fit_framework`]: a value of the profile's constant
/// and how the profile's rows score under it.
#[derive(Debug, Clone, Serialize)]
pub struct FrameworkFitPoint {
    pub constant: FrameworkConstant,
    /// `unpriced_compute` as a fraction, `expert_gemm_host` in seconds.
    pub value: f64,
    /// The profile's rows.
    #[serde(flatten)]
    pub score: GridScore,
}

/// The fewest rows a framework profile's constant is fitted on: with fewer, the fitted value is
/// those rows' own answer, which leave-one-out cannot test (one row leaves nothing to fit on,
/// two leave one each), so the profile carries 0 and its rows test its mechanisms alone
/// (`validate --fit-framework` says so).
pub const MIN_FIT_ROWS: usize = 3;

/// Whether case `c` is one the constant of framework profile `name` is fitted on: a row scored
/// under that profile, inside the domain, its recompute given or not needed.
pub fn framework_fitted_on(c: &Case, name: &str) -> bool {
    c.framework == name && !OUT_OF_DOMAIN.iter().any(|(id, _)| *id == c.id) && recompute_known(c)
}

/// The calibration of a framework profile's one constant, `constant` (docs/calibration.md,
/// "Frameworks"): with the GPU constants fixed (the calibrated table), score the rows
/// [`framework_fitted_on`] profile `name` at every value of `grid`, and return the points
/// ordered by MAPE (ties: smaller worst error, then the grid order), with the leave-one-out
/// error of each row: its error at the value fitted on the other rows alone, the figure that
/// says how the constant does on a row it was not fitted to. Deterministic.
pub fn fit_framework(
    cases: &[Case],
    name: &str,
    constant: FrameworkConstant,
    grid: &[f64],
) -> (Vec<FrameworkFitPoint>, Vec<(String, f64)>) {
    let mine: Vec<&Case> = cases
        .iter()
        .filter(|c| framework_fitted_on(c, name))
        .collect();
    // errors[g][r]: row r at grid point g, each row scored once per point.
    let errors: Vec<Vec<f64>> = grid
        .iter()
        .map(|&u| {
            mine.iter()
                .map(|c| error_with(c, |o| constant.set(o, u)))
                .collect()
        })
        .collect();
    // The grid's points scored over the rows other than `skip`, in grid order.
    let points_without = |skip: Option<usize>| -> Vec<FrameworkFitPoint> {
        grid.iter()
            .zip(&errors)
            .map(|(&u, errs)| FrameworkFitPoint {
                constant,
                value: u,
                score: GridScore::of(
                    errs.iter()
                        .enumerate()
                        .filter(|&(r, _)| Some(r) != skip)
                        .map(|(r, &e)| (mine[r].id.as_str(), e)),
                ),
            })
            .collect()
    };
    let mut points = points_without(None);
    points.sort_by(|a, b| a.score.better(&b.score));
    let loo = if mine.len() < 2 {
        Vec::new()
    } else {
        (0..mine.len())
            .map(|r| {
                let others = points_without(Some(r));
                // The first best point in grid order (`min_by` keeps the first of equals).
                let best = (0..others.len())
                    .min_by(|&a, &b| others[a].score.better(&others[b].score))
                    .unwrap_or(0);
                (mine[r].id.clone(), errors[best][r])
            })
            .collect()
    };
    (points, loo)
}
