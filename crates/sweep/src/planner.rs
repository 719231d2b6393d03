//! The real planner: `autoplan-search` over `autoplan-evaluate`, with the models, clusters and
//! spaces of a spec resolved once, up front (so a misspelt name fails before hours of work,
//! located in the spec).

use std::collections::BTreeMap;

use autoplan_cluster::{resolve_cluster, Cluster};
use autoplan_evaluate::{CommKind, EvalOptions, Evaluator};
use autoplan_graph::{resolve_model, ModelSpec};
use autoplan_input::InputError;
use autoplan_search::{resolve_space, search_case_for, CaseOutcome, SearchOptions, Space, Target};

use crate::{Case, Infeasible, Metrics, Planner, RankedPlan, SpecField, SweepSpec};

/// Plans a case with the branch-and-bound search through `autoplan_search::search_case`, the
/// same path as `autoplan search` (same objective and bounds), evaluating with the default
/// [`EvalOptions`]. Each case's search runs on the sweep's worker pool
/// (rayon nests), so `--threads` bounds the whole sweep.
#[derive(Debug, Clone)]
pub struct SearchPlanner {
    models: BTreeMap<String, ModelSpec>,
    clusters: BTreeMap<String, Cluster>,
    spaces: BTreeMap<String, Space>,
    opts: EvalOptions,
    /// The framework and headroom every case's plans must meet (`Target::default()`, or
    /// `sweep --framework/--min-headroom`).
    target: Target,
}

impl SearchPlanner {
    /// Resolve every model, cluster and space of `spec` (bundled names or paths), and check
    /// that every scaled cluster can take its GPU counts.
    pub fn load(spec: &SweepSpec) -> Result<SearchPlanner, InputError> {
        let mut models = BTreeMap::new();
        for (i, m) in spec.models.iter().enumerate() {
            let model = resolve_model(m).map_err(|e| spec.invalid(SpecField::Model(i), e))?;
            models.insert(m.clone(), model);
        }
        let mut clusters = BTreeMap::new();
        for (i, c) in spec.clusters.iter().enumerate() {
            let cluster =
                resolve_cluster(&c.name).map_err(|e| spec.invalid(SpecField::Cluster(i), e))?;
            for &g in c.gpus.iter().flatten() {
                cluster
                    .with_gpus(g)
                    .map_err(|e| spec.invalid(SpecField::Cluster(i), e))?;
            }
            clusters.insert(c.name.clone(), cluster);
        }
        let mut spaces = BTreeMap::new();
        for (i, s) in spec.spaces.iter().enumerate() {
            let space = resolve_space(s).map_err(|e| spec.invalid(SpecField::Space(i), e))?;
            spaces.insert(s.clone(), space);
        }
        Ok(SearchPlanner {
            models,
            clusters,
            spaces,
            opts: EvalOptions::default(),
            target: Target::default(),
        })
    }

    /// The planner for plans that `target`'s framework runs, with its headroom.
    pub fn with_target(mut self, target: Target) -> SearchPlanner {
        self.target = target;
        self
    }

    /// HBM per GPU of a cluster of the spec, bytes (`sweep --front`'s headroom).
    pub fn hbm_bytes(&self, name: &str) -> Option<f64> {
        self.clusters.get(name).map(|c| c.gpu.hbm_bytes)
    }

    /// GPUs of a cluster of the spec used as it is (for [`SweepSpec::cases`]).
    pub fn cluster_gpus(&self, name: &str) -> Result<u32, String> {
        self.clusters
            .get(name)
            .map(|c| c.gpus())
            .ok_or_else(|| format!("cluster `{name}` was not loaded"))
    }
}

impl Planner for SearchPlanner {
    fn plan(&self, case: &Case) -> Result<Vec<RankedPlan>, Infeasible> {
        let infeasible = |reason: String| Infeasible { reason };
        let (Some(model), Some(cluster), Some(space)) = (
            self.models.get(&case.model),
            self.clusters.get(&case.cluster),
            self.spaces.get(&case.space),
        ) else {
            return Err(infeasible("the case is not from the loaded spec".into()));
        };
        let mut training = model.training.clone();
        training.seq_len = case.seq_len;
        training.global_batch = case.global_batch;
        let model = model
            .with_training(training)
            .map_err(|e| infeasible(e.to_string()))?;
        let cluster = if case.scaled {
            cluster
                .with_gpus(case.gpus)
                .map_err(|e| infeasible(e.to_string()))?
        } else {
            cluster.clone()
        };
        // MXFP8 and NVFP4 need a Blackwell GPU, the FP8 recipes FP8 tensor cores: the case has
        // no plan elsewhere.
        cluster
            .gpu
            .check_training_precision(model.training.precision)
            .map_err(infeasible)?;
        let opts = SearchOptions {
            top_k: case.top_k as usize,
            exhaustive: false,
        };
        // The same path as `autoplan search`: the `Scorer` with its communication floor.
        let CaseOutcome { scorer, outcome } = search_case_for(
            &model,
            &cluster,
            // The target framework's cost profile (what it overlaps and fuses).
            self.opts
                .with_profile(&self.target.framework.profile(), model.training.precision),
            self.target,
            space,
            &opts,
            &(),
        )
        .map_err(infeasible)?;
        let ev = &scorer.exact;
        if outcome.plans.is_empty() {
            const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
            return Err(infeasible(match outcome.no_fit {
                Some(n) => format!(
                    "out of memory: every plan needs at least {:.2} GiB of {:.2} GiB HBM \
                     (the HBM less {:.2} GiB of headroom)",
                    n.min_memory_bytes / GIB,
                    n.hbm_bytes / GIB,
                    self.target.min_headroom_bytes / GIB
                ),
                None => format!(
                    "no valid plan in the space for {} ({} plans, {} invalid)",
                    self.target.framework, outcome.stats.space_plans, outcome.stats.invalid
                ),
            }));
        }
        Ok(outcome
            .plans
            .iter()
            .map(|r| RankedPlan {
                plan: r.plan,
                metrics: metrics(ev, r),
            })
            .collect())
    }
}

/// The CSV metrics of a ranked plan; the dominant collective comes from the full report (one
/// per ranked plan, so its allocations do not matter).
fn metrics(ev: &Evaluator, r: &autoplan_search::Ranked<autoplan_evaluate::Metrics>) -> Metrics {
    let m = &r.metrics;
    let (dominant_comm_exposed_s, dominant_collective) = match ev.report(&r.plan) {
        Ok(report) => {
            let b = &report.breakdown;
            let exposed = match m.dominant_comm {
                CommKind::Tp => b.tp_exposed_s,
                CommKind::Cp => b.cp_exposed_s,
                CommKind::Ep => b.ep_exposed_s,
                CommKind::Pp => b.pp_exposed_s,
                CommKind::Dp => b.dp_exposed_s,
                CommKind::None => 0.0,
            };
            // The collective of that kind with the most exposed time; ties go to the first in
            // the report's (deterministic) order.
            let top = report
                .comm
                .iter()
                .filter(|c| c.kind == m.dominant_comm && c.exposed > 0.0)
                .fold(None::<&autoplan_evaluate::CommRow>, |best, c| match best {
                    Some(b) if b.exposed >= c.exposed => Some(b),
                    _ => Some(c),
                });
            let label = top.map_or(String::new(), |c| {
                format!(
                    "{} {} {}-node ({})",
                    c.collective,
                    c.algorithm,
                    if c.group.intra_node() {
                        "intra"
                    } else {
                        "inter"
                    },
                    c.what
                )
            });
            (exposed, label)
        }
        Err(_) => (m.exposed_comm_s, String::new()),
    };
    Metrics {
        step_time_s: m.step_time_s,
        tokens_per_s: m.tokens_per_s,
        tokens_per_s_per_gpu: m.tokens_per_s_per_gpu,
        mfu: m.mfu,
        memory_peak_bytes: m.memory_peak_bytes,
        exposed_comm_s: m.exposed_comm_s,
        bubble_s: m.bubble_s,
        dominant_comm: m.dominant_comm.name().to_string(),
        dominant_comm_exposed_s,
        dominant_collective,
    }
}
