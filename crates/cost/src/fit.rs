//! α-β parameters from measured timings (issue 22 item 4, seed 004 §4.1.2): the cluster
//! parameters of the cost model that best reproduce a set of measured collective or
//! point-to-point times.
//!
//! What is fitted: the effective bandwidths `intra_bw·bwurate` and `inter_bw·bwurate`, and
//! the latencies `start_lat` and `sync_lat`, with the rest of the cluster (fabric, topology,
//! per-hop latencies `intra_latency` and `link_delay`) taken from a base cluster. Timings
//! determine only the products `bw·bwurate` (every bandwidth term is `bytes / (bw·bwurate)`,
//! `CostModel::new`), so `bwurate` is held at the base cluster's value and the nominal
//! bandwidths are the fitted products divided by it.
//!
//! The forward model is the cost crate itself ([`CostModel::collective`] with the
//! observation's algorithm mode), so a fit is exact on timings the model generated. The loss is
//! the sum of squared log ratios `ln(predicted / measured)` (relative error, scale-free across
//! message sizes), minimised by Nelder–Mead (Nelder & Mead 1965, with the standard
//! coefficients 1, 2, 0.5, 0.5) over the logarithms of the four parameters, restarted from its
//! best point until it stops improving. A parameter no observation depends on (all inside one
//! node: no inter-node bandwidth) is reported as undetermined and kept at the base value.
//!
//! The per-pair α-β matrix of seed 004 §4.1.2 comes from point-to-point timings of every
//! ordered pair: an ordinary least-squares line `time = α + bytes/β` per pair ([`fit_pairs`]).

use autoplan_cluster::{Cluster, GroupPlacement};

use crate::{AlgoMode, Collective, CostModel};

/// One measured timing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observation {
    pub op: Collective,
    pub group: GroupPlacement,
    /// nccl-tests "size" convention ([`CostModel::collective`]).
    pub bytes: f64,
    /// Measured seconds.
    pub time: f64,
}

/// The fitted parameters (SI units) and how well they fit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    /// `intra_bw`, bytes/s per GPU per direction (nominal: effective / `bwurate`).
    pub intra_bw: f64,
    /// `inter_bw`, bytes/s per GPU.
    pub inter_bw: f64,
    pub start_lat: f64,
    pub sync_lat: f64,
    /// Held at the base cluster's value (module docs).
    pub bwurate: f64,
    /// Whether any observation depends on each of (intra_bw, inter_bw, start_lat, sync_lat).
    pub determined: [bool; 4],
    /// Root-mean-square relative error `sqrt(mean(ln(pred/meas)²))` at the fit.
    pub rms_log_residual: f64,
    /// The largest `|pred/meas − 1|`.
    pub max_rel_residual: f64,
}

/// Why a fit cannot be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FitError {
    #[error("no usable timings (need at least one positive time and size)")]
    Empty,
    #[error("observation {index}: {what}")]
    Bad { index: usize, what: String },
}

/// `cluster` with the four parameters `p = [b_intra_eff, b_inter_eff, start, sync]`.
fn with_params(base: &Cluster, p: &[f64; 4]) -> Cluster {
    let mut c = base.clone();
    let u = c.efficiency.bwurate;
    c.node.intra_bw = p[0] / u;
    c.network.inter_bw = p[1] / u;
    c.efficiency.start_lat = p[2];
    c.efficiency.sync_lat = p[3];
    c
}

/// Predicted seconds of every observation under `cluster`.
fn predict(cluster: &Cluster, obs: &[Observation], mode: AlgoMode) -> Vec<f64> {
    let m = CostModel::new(cluster);
    obs.iter()
        .map(|o| m.collective(o.op, o.group, o.bytes, mode).time)
        .collect()
}

fn loss(pred: &[f64], obs: &[Observation]) -> f64 {
    pred.iter()
        .zip(obs)
        .map(|(p, o)| (p.max(1e-30) / o.time).ln().powi(2))
        .sum()
}

/// Fits the four parameters (module docs) to `obs` on the base cluster `base`, each
/// collective priced with algorithm mode `mode` (what the measurement ran: NCCL's tuner for
/// nccl-tests, `Fixed(PointToPoint)` is implied for send/recv).
pub fn fit(base: &Cluster, obs: &[Observation], mode: AlgoMode) -> Result<Fit, FitError> {
    for (i, o) in obs.iter().enumerate() {
        if !(o.time.is_finite() && o.time > 0.0) {
            return Err(FitError::Bad {
                index: i,
                what: format!("time {} s is not a positive number", o.time),
            });
        }
        if !(o.bytes.is_finite() && o.bytes >= 0.0) || o.group.size < 2 {
            return Err(FitError::Bad {
                index: i,
                what: format!(
                    "{} bytes on {} ranks: need bytes ≥ 0 and two ranks or more",
                    o.bytes, o.group.size
                ),
            });
        }
    }
    if obs.is_empty() {
        return Err(FitError::Empty);
    }
    let u = base.efficiency.bwurate;
    let p0 = [
        base.node.intra_bw * u,
        base.network.inter_bw * u,
        base.efficiency.start_lat.max(1e-7),
        base.efficiency.sync_lat.max(1e-7),
    ];
    let eval = |x: &[f64; 4]| {
        let p = x.map(f64::exp);
        loss(&predict(&with_params(base, &p), obs, mode), obs)
    };
    // Which parameters matter: a 10% change moves some prediction.
    let base_pred = predict(&with_params(base, &p0), obs, mode);
    let mut determined = [false; 4];
    for (k, d) in determined.iter_mut().enumerate() {
        let mut p = p0;
        p[k] *= 1.1;
        let q = predict(&with_params(base, &p), obs, mode);
        *d = q
            .iter()
            .zip(&base_pred)
            .any(|(a, b)| (a / b - 1.0).abs() > 1e-9);
    }
    let mut x = p0.map(f64::ln);
    let mut best = eval(&x);
    for _ in 0..20 {
        let (nx, nv) = nelder_mead(&eval, x, &determined, 0.5, 4000);
        let improved = nv < best * (1.0 - 1e-12);
        x = nx;
        best = nv.min(best);
        if !improved {
            break;
        }
    }
    let p = x.map(f64::exp);
    let pred = predict(&with_params(base, &p), obs, mode);
    let n = obs.len() as f64;
    let max_rel = pred
        .iter()
        .zip(obs)
        .map(|(a, o)| (a / o.time - 1.0).abs())
        .fold(0.0, f64::max);
    // Undetermined parameters are the base's exactly (no round trip through `× u / u`).
    let pick = |k: usize, fitted: f64, base: f64| if determined[k] { fitted } else { base };
    Ok(Fit {
        intra_bw: pick(0, p[0] / u, base.node.intra_bw),
        inter_bw: pick(1, p[1] / u, base.network.inter_bw),
        start_lat: pick(2, p[2], base.efficiency.start_lat),
        sync_lat: pick(3, p[3], base.efficiency.sync_lat),
        bwurate: u,
        determined,
        rms_log_residual: (loss(&pred, obs) / n).sqrt(),
        max_rel_residual: max_rel,
    })
}

/// Nelder–Mead over the free coordinates (`free[k]`), starting from `x0` with steps `step`.
fn nelder_mead(
    f: &impl Fn(&[f64; 4]) -> f64,
    x0: [f64; 4],
    free: &[bool; 4],
    step: f64,
    iters: usize,
) -> ([f64; 4], f64) {
    let dims: Vec<usize> = (0..4).filter(|&k| free[k]).collect();
    if dims.is_empty() {
        return (x0, f(&x0));
    }
    let mut simplex: Vec<([f64; 4], f64)> = vec![(x0, f(&x0))];
    for &k in &dims {
        let mut x = x0;
        x[k] += step;
        simplex.push((x, f(&x)));
    }
    let n = dims.len() as f64;
    for _ in 0..iters {
        simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
        let (lo, hi) = (simplex[0].1, simplex[simplex.len() - 1].1);
        if (hi - lo).abs() <= 1e-16 * (1.0 + lo.abs()) {
            break;
        }
        let worst = simplex[simplex.len() - 1].0;
        let mut c = [0.0; 4];
        for (x, _) in &simplex[..simplex.len() - 1] {
            for k in 0..4 {
                c[k] += x[k] / n;
            }
        }
        let at = |t: f64| {
            let mut y = [0.0; 4];
            for k in 0..4 {
                y[k] = c[k] + t * (worst[k] - c[k]);
            }
            y
        };
        let r = at(-1.0);
        let fr = f(&r);
        let second = simplex[simplex.len() - 2].1;
        let last = simplex.len() - 1;
        if fr < simplex[0].1 {
            let e = at(-2.0);
            let fe = f(&e);
            simplex[last] = if fe < fr { (e, fe) } else { (r, fr) };
        } else if fr < second {
            simplex[last] = (r, fr);
        } else {
            let k = if fr < simplex[last].1 {
                at(-0.5)
            } else {
                at(0.5)
            };
            let fk = f(&k);
            if fk < fr.min(simplex[last].1) {
                simplex[last] = (k, fk);
            } else {
                let b = simplex[0].0;
                for s in simplex.iter_mut().skip(1) {
                    for (x, &bk) in s.0.iter_mut().zip(&b) {
                        *x = bk + 0.5 * (*x - bk);
                    }
                    s.1 = f(&s.0);
                }
            }
        }
    }
    simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
    simplex.swap_remove(0)
}

/// One pair's fitted link: `time = alpha + bytes / beta`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairFit {
    pub src: u32,
    pub dst: u32,
    /// Seconds.
    pub alpha: f64,
    /// Bytes/s.
    pub beta: f64,
    /// Timings the line was fitted to.
    pub points: usize,
}

/// Least-squares `time = α + bytes/β` per ordered pair of `(src, dst, bytes, seconds)` rows
/// (seed 004 §4.1.2's α-β link model), pairs in ascending order. A pair needs two distinct
/// sizes; α is clamped at 0 (noise can push the intercept below it) and a non-positive slope
/// is an error naming the pair.
pub fn fit_pairs(rows: &[(u32, u32, f64, f64)]) -> Result<Vec<PairFit>, FitError> {
    let mut keys: Vec<(u32, u32)> = rows.iter().map(|r| (r.0, r.1)).collect();
    keys.sort_unstable();
    keys.dedup();
    let mut out = Vec::with_capacity(keys.len());
    for (s, d) in keys {
        let pts: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.0 == s && r.1 == d)
            .map(|r| (r.2, r.3))
            .collect();
        let n = pts.len() as f64;
        let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
        let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
        let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
        let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        let bad = |what: String| FitError::Bad { index: 0, what };
        if sxx <= 0.0 {
            return Err(bad(format!(
                "pair {s}→{d}: needs timings at two sizes or more"
            )));
        }
        let slope = sxy / sxx;
        if slope <= 0.0 {
            return Err(bad(format!(
                "pair {s}→{d}: time does not grow with size (slope {slope:e} s/B)"
            )));
        }
        out.push(PairFit {
            src: s,
            dst: d,
            alpha: (my - slope * mx).max(0.0),
            beta: 1.0 / slope,
            points: pts.len(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thesis_like() -> Cluster {
        crate::calibration::dgx_a100(4)
    }

    /// Synthetic timings from known parameters: point-to-point inside and across nodes, ring
    /// all-reduces of 2..8 ranks inside a node and 2 and 4 nodes, sizes 8 B..1 GiB.
    fn synthetic(truth: &Cluster) -> Vec<Observation> {
        let m = CostModel::new(truth);
        let gpn = truth.node.gpus_per_node;
        let mut obs = Vec::new();
        let groups = [
            (Collective::SendRecv, 2, 2, 1),
            (Collective::SendRecv, 2, 1, 2),
            (Collective::AllReduce, 2, 2, 1),
            (Collective::AllReduce, 4, 4, 1),
            (Collective::AllReduce, gpn, gpn, 1),
            (Collective::AllReduce, 2 * gpn, gpn, 2),
            (Collective::AllReduce, 4 * gpn, gpn, 4),
            (Collective::AllGather, 2 * gpn, gpn, 2),
        ];
        for (op, size, rpn, nodes) in groups {
            let g = GroupPlacement {
                size,
                ranks_per_node: rpn,
                nodes,
            };
            let mut b = 8.0;
            while b <= 1.1e9 {
                let t = m.collective(op, g, b, AlgoMode::NcclTuner).time;
                obs.push(Observation {
                    op,
                    group: g,
                    bytes: b,
                    time: t,
                });
                b *= 8.0;
            }
        }
        obs
    }

    #[test]
    fn recovers_known_parameters_within_two_percent() {
        let mut truth = thesis_like();
        truth.node.intra_bw = 150e9;
        truth.network.inter_bw = 20e9;
        truth.efficiency.start_lat = 9e-6;
        truth.efficiency.sync_lat = 3e-6;
        let obs = synthetic(&truth);
        // Start from the calibrated values, far from the truth.
        let f = fit(&thesis_like(), &obs, AlgoMode::NcclTuner).unwrap();
        assert_eq!(f.determined, [true; 4]);
        for (got, want, what) in [
            (f.intra_bw, 150e9, "intra_bw"),
            (f.inter_bw, 20e9, "inter_bw"),
            (f.start_lat, 9e-6, "start_lat"),
            (f.sync_lat, 3e-6, "sync_lat"),
        ] {
            assert!(
                (got / want - 1.0).abs() < 0.02,
                "{what}: {got:e} vs {want:e}"
            );
        }
        assert!(f.rms_log_residual < 1e-3, "{f:?}");
    }

    #[test]
    fn intra_node_timings_leave_the_network_undetermined() {
        let truth = thesis_like();
        let g = GroupPlacement {
            size: 2,
            ranks_per_node: 2,
            nodes: 1,
        };
        let m = CostModel::new(&truth);
        let op = Collective::SendRecv;
        let obs: Vec<Observation> = [1e3, 1e6, 1e9]
            .iter()
            .map(|&b| Observation {
                op,
                group: g,
                bytes: b,
                time: m.collective(op, g, b, AlgoMode::NcclTuner).time,
            })
            .collect();
        let f = fit(&truth, &obs, AlgoMode::NcclTuner).unwrap();
        assert!(!f.determined[1]);
        assert_eq!(f.inter_bw, truth.network.inter_bw);
        assert!((f.intra_bw / truth.node.intra_bw - 1.0).abs() < 0.02);
    }

    #[test]
    fn pair_lines_recover_alpha_and_beta() {
        let mut rows = Vec::new();
        for (s, d, a, b) in [(0u32, 1u32, 5e-6, 10e9), (0, 2, 40e-6, 1.25e9)] {
            for x in [1e3, 1e5, 1e7] {
                rows.push((s, d, x, a + x / b));
            }
        }
        let p = fit_pairs(&rows).unwrap();
        assert_eq!(p.len(), 2);
        assert!((p[0].alpha / 5e-6 - 1.0).abs() < 1e-6 && (p[0].beta / 10e9 - 1.0).abs() < 1e-9);
        assert!((p[1].alpha / 40e-6 - 1.0).abs() < 1e-6);
        let err = fit_pairs(&[(0, 1, 1e3, 1e-5)]).unwrap_err();
        assert!(err.to_string().contains("0→1"), "{err}");
    }
}
