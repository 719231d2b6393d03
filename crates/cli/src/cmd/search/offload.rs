//! When no plan fits in HBM alone: search again with the optimizer state offloaded to host
//! memory (where the cluster has a host tier and the framework runs the offload), and, if even
//! that fits nothing, find the fewest GPUs of the cluster's kind that fit a plan.

use autoplan_cluster::Cluster;
use autoplan_graph::ModelSpec;
use autoplan_search::{search_case_for, CaseOutcome, SearchOptions, Target};

use super::*;

/// The fractions of the optimizer state a search tries when nothing fits in HBM alone:
/// Megatron's `--optimizer-offload-fraction` in quarters (none first, so the plans that fit
/// without offload still compete).
const FRACTIONS: [u8; 5] = [0, 25, 50, 75, 100];

/// Doublings of the GPU count tried by [`fewest_gpus`] (64 → 65536).
const MAX_DOUBLINGS: u32 = 10;

/// The space with the offload fractions opened, if the search found nothing that fits, the
/// space left offload closed (only `0`), the cluster has a host tier and the framework runs
/// optimizer offload; `None` otherwise.
pub(super) fn widened(
    case: &CaseOutcome,
    space: &Space,
    cluster: &Cluster,
    target: Target,
) -> Option<Space> {
    let o = &case.outcome;
    if !o.plans.is_empty() || o.no_fit.is_none() || space.offload_optimizer != [0] {
        return None;
    }
    if cluster.host.is_none()
        || !target.framework.capabilities().offload.optimizer
        || target.framework.capabilities().offload.together
    {
        return None;
    }
    let mut s = space.clone();
    s.offload_optimizer = FRACTIONS.to_vec();
    Some(s)
}

/// The note printed when the search goes on with offload.
pub(super) fn note(case: &CaseOutcome, cluster: &Cluster) -> String {
    let need = case.outcome.no_fit.map_or(String::new(), |nf| {
        format!(
            " (the smallest plan needs {:.2} GiB per GPU)",
            nf.min_memory_bytes / GIB
        )
    });
    let host = cluster.host.map_or(String::new(), |h| {
        format!(
            "{:.0} GiB of host memory per node, {} at {:.1} GB/s per GPU",
            h.memory_bytes / GIB,
            h.link.name(),
            h.link_bw_per_gpu() / 1e9
        )
    });
    let f: Vec<String> = FRACTIONS[1..]
        .iter()
        .map(|&p| autoplan_plan::offload::name(p))
        .collect();
    format!(
        "note: no plan fits in HBM alone{need}; searching again with the optimizer state \
         offloaded to host memory (offload_optimizer = {}; {host})",
        f.join(", ")
    )
}

/// The fewest GPUs of `cluster`'s kind (its GPU count doubled, up to [`MAX_DOUBLINGS`] times)
/// on which some plan of `space` fits, with the best plan there; `None` if none up to the
/// last doubling does.
pub(super) fn fewest_gpus(
    model: &ModelSpec,
    cluster: &Cluster,
    eval: EvalOptions,
    target: Target,
    space: &Space,
) -> Option<String> {
    let opts = SearchOptions {
        top_k: 1,
        exhaustive: false,
    };
    let mut gpus = cluster.gpus();
    for _ in 0..MAX_DOUBLINGS {
        gpus = gpus.checked_mul(2)?;
        let Ok(bigger) = cluster.with_gpus(gpus) else {
            return None;
        };
        let Ok(case) = search_case_for(model, &bigger, eval, target, space, &opts, &()) else {
            continue;
        };
        if let Some(best) = case.outcome.plans.first() {
            return Some(format!(
                "the fewest {} GPUs that fit a plan of the space: {gpus} (best: {}, step {:.3} s, \
                 {:.2} GiB per GPU)",
                cluster.gpu.name,
                best.plan,
                best.metrics.step_time_s,
                best.metrics.memory_peak_bytes / GIB
            ));
        }
    }
    None
}
