//! One path from a case (model, cluster, evaluation options, space) to its ranked plans, used
//! by `autoplan search` and by the sweep planner alike, so both search with the same objective
//! ([`Scorer`]: the real cost model with the communication floor) and the same bounds.

use autoplan_cluster::Cluster;
use autoplan_evaluate::{EvalOptions, Metrics};
use autoplan_graph::ModelSpec;

use crate::{search, Observer, Outcome, Scorer, SearchOptions, Space};

/// A searched case: the objective it was ranked with (its `exact` evaluator prints the full
/// reports of the ranked plans) and the outcome.
#[derive(Debug, Clone)]
pub struct CaseOutcome {
    pub scorer: Scorer,
    pub outcome: Outcome<Metrics>,
}

/// Rank the plans of `space` for `model` on `cluster` under `eval`: [`search`] with a
/// [`Scorer`], on the current rayon thread pool (install a pool to choose the thread count).
pub fn search_case<B: Observer + ?Sized>(
    model: &ModelSpec,
    cluster: &Cluster,
    eval: EvalOptions,
    space: &Space,
    opts: &SearchOptions,
    observer: &B,
) -> CaseOutcome {
    let scorer = Scorer::new(model, cluster, eval);
    let outcome = search(&scorer, space, opts, observer);
    CaseOutcome { scorer, outcome }
}
