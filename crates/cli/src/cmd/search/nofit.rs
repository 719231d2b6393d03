//! Why a search found no plan: the least memory any plan needs, or a batch no plan divides.

use super::*;

pub(super) fn why_nothing(scorer: &Scorer, space: &Space, o: &Outcome<Metrics>) -> String {
    if o.no_fit.is_none() {
        if let Some(why) = batch_never_divides(scorer, space) {
            return why;
        }
    }
    match o.no_fit {
        Some(nf) => format!(
            "no plan of the space fits in memory: the smallest needs at least {:.2} GiB per GPU, \
             {:.2} GiB over the {:.2} GiB of HBM{} (try more GPUs, --space with ZeRO-3 / full \
             recompute / smaller micro-batches, or a shorter --seq-len)",
            nf.min_memory_bytes / GIB,
            (nf.min_memory_bytes - nf.hbm_bytes) / GIB,
            scorer.exact.cluster().gpu.hbm_bytes / GIB,
            if scorer.min_headroom_bytes > 0.0 {
                format!(
                    " less {:.2} GiB of --min-headroom",
                    scorer.min_headroom_bytes / GIB
                )
            } else {
                String::new()
            }
        ),
        None => format!(
            "no valid plan in the space for {} on {} GPUs that {} runs ({} plans, {} invalid): \
             check --fix and the space's degrees against the heads, layers, experts and global \
             batch, or --framework any",
            scorer.exact.model().name,
            scorer.exact.cluster().gpus(),
            scorer.framework,
            o.stats.space_plans,
            o.stats.invalid
        ),
    }
}

/// Why no plan is valid when the reason is the global batch: it must be a multiple of
/// `dp × mbs`, and no data-parallel degree the space's tp, cp and pp leave on the cluster's GPUs
/// (or its fixed dp) times any of its micro-batch sizes divides it. `None` when one does (the
/// reason is elsewhere). The message names the nearest global batches that would divide.
pub(super) fn batch_never_divides(scorer: &Scorer, space: &Space) -> Option<String> {
    let gpus = u64::from(scorer.exact.cluster().gpus());
    let batch = u64::from(scorer.exact.model().training.global_batch);
    let mut dps: Vec<u64> = Vec::new();
    for &tp in &space.tp {
        for &cp in &space.cp {
            for &pp in &space.pp {
                let shard = u64::from(tp) * u64::from(cp) * u64::from(pp);
                if shard == 0 || gpus % shard != 0 {
                    continue;
                }
                let dp = gpus / shard;
                if space.dp.is_none_or(|d| u64::from(d) == dp) && !dps.contains(&dp) {
                    dps.push(dp);
                }
            }
        }
    }
    if dps.is_empty() || space.mbs.is_empty() {
        return None;
    }
    dps.sort_unstable();
    let units: Vec<u64> = dps
        .iter()
        .flat_map(|&dp| space.mbs.iter().map(move |&m| dp * u64::from(m)))
        .collect();
    if units.iter().any(|&u| batch % u == 0) {
        return None;
    }
    // The nearest batches at or below and above that some dp × mbs divides.
    let below = units
        .iter()
        .map(|&u| batch / u * u)
        .filter(|&b| b > 0)
        .max();
    let above = units.iter().map(|&u| (batch / u + 1) * u).min();
    let shown: Vec<String> = dps.iter().take(8).map(u64::to_string).collect();
    let more = if dps.len() > 8 { ", ..." } else { "" };
    let mbs: Vec<String> = space.mbs.iter().map(u32::to_string).collect();
    let suggest = match (below, above) {
        (Some(b), Some(a)) => format!("{b} or {a}"),
        (None, Some(a)) => a.to_string(),
        (Some(b), None) => b.to_string(),
        (None, None) => "none".to_string(),
    };
    Some(format!(
        "no valid plan: the global batch {batch} is not a multiple of dp × mbs for any \
         data-parallel degree the space leaves on {gpus} GPUs (dp ∈ {{{}{more}}}, mbs ∈ {{{}}}); \
         global batches that would divide: {suggest} (--global-batch), or choose --gpus so that \
         a dp divides {batch}",
        shown.join(", "),
        mbs.join(", ")
    ))
}
