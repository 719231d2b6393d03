//! Search over scale: the single-size search ([`search_case_for`]) run at every GPU count ×
//! global batch of a grid, each point's best plan priced as time to train and GPU-hours, and
//! the Pareto front of the two. No second search engine: a point's plans are exactly what
//! `autoplan search` gives at that size and batch.
//!
//! Points run one after another in grid order (GPU counts ascending, then batches ascending),
//! each search parallel inside, so the answer does not depend on the thread count.

use autoplan_cluster::Cluster;
use autoplan_evaluate::{EvalOptions, Metrics};
use autoplan_graph::ModelSpec;

use crate::train::{Budget, TrainTime};
use crate::{search_case_for, CaseOutcome, Observer, Ranked, SearchOptions, Space, Target};

/// What ranks the points of a scale search (`--objective`). At one size and batch all three
/// rank plans alike (by step time); across sizes they differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Goal {
    /// Most tokens per second.
    #[default]
    Throughput,
    /// Least time to train.
    Time,
    /// Fewest GPU-hours (so fewest dollars at any one price).
    Cost,
}

impl Goal {
    pub fn name(self) -> &'static str {
        match self {
            Goal::Throughput => "throughput",
            Goal::Time => "time",
            Goal::Cost => "cost",
        }
    }
}

/// One point of the grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ScalePoint {
    pub gpus: u32,
    /// Sequences per step.
    pub global_batch: u32,
}

/// The grid of `gpus` × `batches` in its canonical order: GPU counts ascending, then batches
/// ascending, each value once.
pub fn grid(gpus: &[u32], batches: &[u32]) -> Vec<ScalePoint> {
    let sorted = |v: &[u32]| {
        let mut v = v.to_vec();
        v.sort_unstable();
        v.dedup();
        v
    };
    let batches = sorted(batches);
    sorted(gpus)
        .into_iter()
        .flat_map(|g| {
            batches.iter().map(move |&b| ScalePoint {
                gpus: g,
                global_batch: b,
            })
        })
        .collect()
}

/// The model and cluster of one point: `cluster` resized to the point's GPUs
/// ([`Cluster::with_gpus`]: node type, fabric and NVLink domains kept) and `model` with the
/// point's global batch. The error says what does not resize.
pub fn point_inputs(
    model: &ModelSpec,
    cluster: &Cluster,
    p: ScalePoint,
) -> Result<(ModelSpec, Cluster), String> {
    let c = cluster.with_gpus(p.gpus).map_err(|e| e.to_string())?;
    let mut t = model.training.clone();
    t.global_batch = p.global_batch;
    let m = model
        .with_training(t)
        .map_err(|e| format!("global batch {}: {e}", p.global_batch))?;
    Ok((m, c))
}

/// One searched point.
#[derive(Debug, Clone)]
pub struct PointOutcome {
    pub point: ScalePoint,
    /// The single-size search at this point (its scorer holds the resized cluster and model).
    pub case: CaseOutcome,
    /// The index in `case.outcome.plans` of the best plan: the first, with exact ties broken
    /// as `search` breaks them ([`crate::fold`]: the plan nearest the framework's defaults);
    /// `None` when nothing fits.
    pub best: Option<usize>,
    /// Time to train of the best plan; `None` when nothing fits.
    pub train: Option<TrainTime>,
}

impl PointOutcome {
    /// The best plan at this point.
    pub fn best(&self) -> Option<&Ranked<Metrics>> {
        self.best.map(|i| &self.case.outcome.plans[i])
    }

    /// HBM left free by the best plan on its busiest GPU, bytes.
    pub fn headroom_bytes(&self) -> Option<f64> {
        let hbm = self.case.scorer.exact.cluster().gpu.hbm_bytes;
        self.best().map(|r| hbm - r.metrics.memory_peak_bytes)
    }
}

/// A scale search's answer.
#[derive(Debug, Clone)]
pub struct ScaleOutcome {
    /// Every point, in grid order.
    pub points: Vec<PointOutcome>,
    /// Per point: on the Pareto front of time to train against GPU-hours.
    pub on_front: Vec<bool>,
    /// Indices of the points with a plan, best first under the goal (ties: grid order).
    pub ranking: Vec<usize>,
}

/// Search every point of `points` (in order; see the module docs) with the single-size search
/// and price its best plan on `budget`.
#[allow(clippy::too_many_arguments)]
pub fn search_scale<B: Observer + ?Sized>(
    model: &ModelSpec,
    cluster: &Cluster,
    eval: EvalOptions,
    target: Target,
    space: &Space,
    opts: &SearchOptions,
    points: &[ScalePoint],
    budget: &Budget,
    goal: Goal,
    observer: &B,
) -> Result<ScaleOutcome, String> {
    let mut out = Vec::with_capacity(points.len());
    for &p in points {
        let (m, c) = point_inputs(model, cluster, p)?;
        let case = search_case_for(&m, &c, eval, target, space, opts, observer)?;
        let tokens_per_step = f64::from(m.training.seq_len) * f64::from(p.global_batch);
        let best = best_of(&case.outcome.plans, m.moe.is_some());
        let train = best.map(|i| {
            let r = &case.outcome.plans[i];
            TrainTime::new(budget, r.metrics.step_time_s, tokens_per_step, p.gpus)
        });
        out.push(PointOutcome {
            point: p,
            case,
            best,
            train,
        });
    }
    let costs: Vec<Option<(f64, f64)>> = out
        .iter()
        .map(|p| p.train.map(|t| (t.seconds, t.gpu_hours)))
        .collect();
    let on_front = pareto_front(&costs);
    let ranking = rank(&out, goal);
    Ok(ScaleOutcome {
        points: out,
        on_front,
        ranking,
    })
}

/// The best of a ranking: its first plan with exact ties broken as `search` shows them
/// ([`crate::fold::fold`] with no tolerance: ties only).
pub fn best_of<M>(plans: &[Ranked<M>], moe: bool) -> Option<usize> {
    crate::fold::fold(plans, 0.0, moe).first().map(|r| r.head)
}

/// Whether each point is on the Pareto front of `(time, gpu_hours)`, both minimised: no other
/// point is at least as good in both and better in one. `None` (no plan) is never on it;
/// equal points are both on it.
pub fn pareto_front(costs: &[Option<(f64, f64)>]) -> Vec<bool> {
    costs
        .iter()
        .map(|c| match c {
            None => false,
            Some(a) => !costs.iter().flatten().any(|b| dominates(*b, *a)),
        })
        .collect()
}

/// `a` is at least as good as `b` in both and better in one (both minimised).
pub fn dominates(a: (f64, f64), b: (f64, f64)) -> bool {
    a.0 <= b.0 && a.1 <= b.1 && (a.0 < b.0 || a.1 < b.1)
}

/// The points with a plan, best first under `goal`; ties keep grid order.
pub fn rank(points: &[PointOutcome], goal: Goal) -> Vec<usize> {
    let score = |p: &PointOutcome| -> f64 {
        let (Some(r), Some(t)) = (p.best(), p.train) else {
            return f64::INFINITY;
        };
        match goal {
            Goal::Throughput => -r.metrics.tokens_per_s,
            Goal::Time => t.seconds,
            Goal::Cost => t.gpu_hours,
        }
    };
    let mut idx: Vec<usize> = (0..points.len())
        .filter(|&i| points[i].best().is_some())
        .collect();
    // A stable sort on a total order: ties keep grid order.
    idx.sort_by(|&a, &b| score(&points[a]).total_cmp(&score(&points[b])));
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_keeps_exactly_the_non_dominated() {
        let c = [
            Some((1.0, 4.0)),
            Some((2.0, 2.0)),
            Some((2.0, 3.0)), // dominated by (2, 2)
            None,
            Some((4.0, 1.0)),
            Some((4.0, 1.0)), // a tie: both on the front
            Some((5.0, 5.0)),
        ];
        assert_eq!(
            pareto_front(&c),
            [true, true, false, false, true, true, false]
        );
    }

    #[test]
    fn grid_is_sorted_and_deduplicated() {
        let g = grid(&[512, 256, 512], &[2048, 1024]);
        let pairs: Vec<_> = g.iter().map(|p| (p.gpus, p.global_batch)).collect();
        assert_eq!(pairs, [(256, 1024), (256, 2048), (512, 1024), (512, 2048)]);
    }
}
