//! When no plan fits in HBM alone: search again with more state offloaded to host memory,
//! one kind at a time (where the cluster has a host tier and the framework runs it): the
//! optimizer state first (the cheapest to move: once per step), then the parameters
//! (ZeRO-Infinity style, every micro-batch), then the activations (every layer, every
//! micro-batch); and if even that fits nothing, find the fewest GPUs of the cluster's kind that
//! fit a plan.

use autoplan_cluster::Cluster;
use autoplan_graph::ModelSpec;
use autoplan_plan::offload_activations::ALL;
use autoplan_search::{search_case_for, CaseOutcome, SearchOptions, Target};

use super::*;

/// The fractions of the optimizer state a search tries when nothing fits in HBM alone:
/// Megatron's `--optimizer-offload-fraction` in quarters (none first, so the plans that fit
/// without offload still compete).
const FRACTIONS: [u8; 5] = [0, 25, 50, 75, 100];

/// Doublings of the GPU count tried by [`fewest_gpus`] (64 → 65536).
const MAX_DOUBLINGS: u32 = 10;

/// What a retry opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Widening {
    /// `offload_optimizer` in quarters.
    Optimizer,
    /// `offload_params` off and on (with the whole optimizer on the host).
    Params,
    /// `offload_activations`: none, counts of layers and `all`.
    Activations,
}

/// The next wider space, if the search found nothing that fits: the first offload kind (in
/// [`Widening`]'s order) that the space leaves closed (its default list only), that the
/// cluster has a host tier for and that the framework runs; `None` otherwise.
pub(super) fn widened(
    case: &CaseOutcome,
    space: &Space,
    model: &ModelSpec,
    cluster: &Cluster,
    target: Target,
) -> Option<(Widening, Space)> {
    let o = &case.outcome;
    if !o.plans.is_empty() || o.no_fit.is_none() || cluster.host.is_none() {
        return None;
    }
    let r = target.framework.capabilities().offload;
    let mut s = space.clone();
    if space.offload_optimizer == [0] && r.optimizer && !r.together {
        s.offload_optimizer = FRACTIONS.to_vec();
        return Some((Widening::Optimizer, s));
    }
    // Parameter offload needs ZeRO-3's shard (`Plan::check`): only where the space lists it.
    if space.offload_params == [false] && r.params && space.zero.iter().any(|z| z.shards_params()) {
        s.offload_params = vec![false, true];
        if !s.offload_optimizer.contains(&100) {
            s.offload_optimizer.push(100);
        }
        if !s.offload_optimizer.contains(&0) {
            s.offload_optimizer.insert(0, 0);
        }
        return Some((Widening::Params, s));
    }
    if space.offload_activations == [0] && r.activations {
        s.offload_activations = layer_counts(model.layers);
        return Some((Widening::Activations, s));
    }
    None
}

/// The activation-offload values a retry tries on a model of `layers` blocks: none, the powers
/// of two below `layers`, `layers − 1` (the most Megatron-Core offloads without pipelining)
/// and `all`. Counts a plan's stages cannot take are refused by `Plan::check`, so no plan is
/// listed twice; the framework's table drops what it never runs (`restrict`).
fn layer_counts(layers: u32) -> Vec<u32> {
    let mut v = vec![0];
    let mut n = 1u32;
    while n < layers {
        v.push(n);
        n = n.saturating_mul(2);
    }
    if layers > 1 && !v.contains(&(layers - 1)) {
        v.push(layers - 1);
    }
    v.push(ALL);
    v
}

/// The note printed when the search goes on with more offloaded (`widening` of the space
/// `s`).
pub(super) fn note(case: &CaseOutcome, cluster: &Cluster, widening: Widening, s: &Space) -> String {
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
    let (what, values) = match widening {
        Widening::Optimizer => {
            let f: Vec<String> = FRACTIONS[1..]
                .iter()
                .map(|&p| autoplan_plan::offload::name(p))
                .collect();
            (
                "the optimizer state",
                format!("offload_optimizer = {}", f.join(", ")),
            )
        }
        Widening::Params => (
            "the ZeRO-3 parameter shards and the optimizer state",
            "offload_params = on, offload_optimizer = 1".to_string(),
        ),
        Widening::Activations => {
            let n: Vec<String> = s.offload_activations[1..]
                .iter()
                .map(|&n| autoplan_plan::offload_activations::name(n))
                .collect();
            (
                "the activations",
                format!("offload_activations = {} layers per stage", n.join(", ")),
            )
        }
    };
    let base = if widening == Widening::Optimizer {
        "no plan fits in HBM alone"
    } else {
        "no plan fits with what is offloaded so far"
    };
    format!("note: {base}{need}; searching again with {what} offloaded to host memory ({values}; {host})")
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
