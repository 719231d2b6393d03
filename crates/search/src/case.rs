//! One path from a case (model, cluster, evaluation options, space) to its ranked plans, used
//! by `autoplan search` and by the sweep planner alike, so both search with the same objective
//! ([`Scorer`]: the real cost model with the communication floor) and the same bounds.

use autoplan_cluster::Cluster;
use autoplan_evaluate::{EvalOptions, Metrics};
use autoplan_graph::ModelSpec;

use autoplan_plan::Framework;

use crate::{search, Observer, Outcome, Scorer, SearchOptions, Space};

/// What the ranked plans must satisfy beyond fitting and being valid: the framework that runs
/// them and the memory each GPU keeps free.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Target {
    pub framework: Framework,
    /// Bytes of HBM each GPU keeps free beyond the plan's peak.
    pub min_headroom_bytes: f64,
}

/// The default `--min-headroom`: 2 GiB per GPU kept free beyond the memory model's peak
/// (which already holds a 3 GiB reserve for the CUDA context, NCCL buffers and fragmentation,
/// `autoplan_memory::MemoryOptions`): a margin for what the model does not see (allocator
/// spikes, a framework version's extra buffers). A policy default, stated in `--help`.
pub const DEFAULT_MIN_HEADROOM_BYTES: f64 = 2.0 * 1024.0 * 1024.0 * 1024.0;

impl Default for Target {
    /// `--framework`'s and `--min-headroom`'s defaults: Megatron-Core (the table's current
    /// version) and [`DEFAULT_MIN_HEADROOM_BYTES`].
    fn default() -> Self {
        Target {
            framework: Framework::default(),
            min_headroom_bytes: DEFAULT_MIN_HEADROOM_BYTES,
        }
    }
}

impl Target {
    /// No framework rule, no headroom: every plan autoplan can price that fits.
    pub const ANY: Target = Target {
        framework: Framework::Any,
        min_headroom_bytes: 0.0,
    };
}

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

/// [`search_case`] for `target`: the space restricted to what its framework runs
/// ([`crate::framework::restrict`]; the error says which list it empties), each plan checked
/// against the framework and the headroom ([`Scorer::with_target`]).
pub fn search_case_for<B: Observer + ?Sized>(
    model: &ModelSpec,
    cluster: &Cluster,
    eval: EvalOptions,
    target: Target,
    space: &Space,
    opts: &SearchOptions,
    observer: &B,
) -> Result<CaseOutcome, String> {
    // A precision the framework has no recipe for refuses every plan: say so up front.
    if let Err(r) = target
        .framework
        .check(&autoplan_plan::Plan::default(), model)
    {
        if r.precision.is_some() {
            return Err(format!("{r}; try another --precision or --framework"));
        }
    }
    let space = crate::framework::restrict(space, target.framework)?;
    let scorer =
        Scorer::new(model, cluster, eval).with_target(target.framework, target.min_headroom_bytes);
    let outcome = search(&scorer, &space, opts, observer);
    Ok(CaseOutcome { scorer, outcome })
}
