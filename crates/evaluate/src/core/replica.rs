//! Replica gradient synchronisation: under `placement=balanced:R` an expert with `c` copies
//! in the EP group is trained on each of them, so once per step the copies' gradients are
//! summed. As a hierarchical all-reduce: the EDP reduction (`dp_comm`, which covers the copies'
//! parameters too: `stage`) sums each copy over its data-parallel replicas, then an all-reduce
//! over the `c` EP ranks holding the expert sums the copies — of the whole gradient without
//! ZeRO, of the `1/edp` shard each rank keeps after a ZeRO reduce-scatter. It is priced by the
//! cost crate on where the copies really are (the balanced packing's
//! [`crate::ReplicaLayout`]).
//!
//! Seed 004 §5.3.2 measured exactly this trade-off (Table 5-4, Transformer-XL 94M on 8 GPUs of
//! 4 nodes): 0, 1 and 2 replicas shorten the forward MoE 4251 → 3221 → 1928 ms but lengthen
//! the gradient all-reduce 911 → 5851 → 9278 ms, and the step grows 10656 → 12501 → 14737 ms.
//! A GPU takes part in the all-reduce of every replicated expert it holds, one after another
//! (a rank runs its collectives in order on its communicators); the step waits for the
//! busiest GPU.

use autoplan_cluster::GroupPlacement;
use autoplan_cost::Collective::AllReduce;

use super::ctx::Ctx;
use super::emit::Comm;
use super::pipeline::StageTime;
use super::Evaluator;
use crate::comm::{CommKind, Pass, Sink};
use autoplan_plan::Plan;

/// No group (before the first is seen).
const EMPTY: GroupPlacement = GroupPlacement {
    size: 0,
    ranks_per_node: 0,
    nodes: 0,
};

/// Distinct (copies, nodes, most per node) shapes remembered per evaluation.
const SHAPES: usize = 16;

/// Where the all-reduce of an expert held by EP ranks `set` (ascending) runs: EP rank `i` on
/// the EP group's node `i / ranks_per_node` (`GroupPlacement` groups fill their nodes evenly),
/// so `c` ranks on the distinct nodes of `set`, at most `most(set)` on one.
pub(super) fn replica_group(set: &[u32], ep: GroupPlacement) -> GroupPlacement {
    let rpn = ep.ranks_per_node.max(1);
    let (mut nodes, mut most, mut run) = (0u32, 0u32, 0u32);
    let mut last = u32::MAX;
    for &g in set {
        let node = g / rpn;
        if node == last {
            run += 1;
        } else {
            nodes += 1;
            run = 1;
            last = node;
        }
        most = most.max(run);
    }
    GroupPlacement {
        size: set.len() as u32,
        ranks_per_node: most.max(1),
        nodes: nodes.max(1),
    }
}

impl Evaluator {
    /// The exposed seconds per step of the replicas' gradient all-reduces on stage `s` (the
    /// one holding the most parameters, as `dp_comm`'s); 0 without replicas. Overlap with the
    /// backward as the EDP reduction's (`dp_comm`'s `dp_hide`: the last bucket is never
    /// hidden). Allocation-free once the packing is cached.
    pub(super) fn replica_sync<S: Sink>(
        &self,
        plan: &Plan,
        x: &Ctx,
        s: &StageTime,
        sink: &mut S,
    ) -> f64 {
        if x.replicas <= 0.0 || x.ep <= 1.0 || s.params_expert <= 0.0 || self.experts <= 0.0 {
            return 0.0;
        }
        // One expert copy's parameters on this stage: the stage's expert parameters are
        // `E/ep + R` copies per GPU (`stage`).
        let per_copy = s.params_expert / (self.experts / x.ep + x.replicas);
        // After a ZeRO reduce-scatter over EDP each rank holds a `1/edp` shard to sum.
        // (HSDP: over its shard group inside EDP.)
        let shard = if plan.zero.shards_optimizer() {
            plan.zero.shard_size(x.g_edp.size.max(1)) as f64
        } else {
            1.0
        };
        let bytes = per_copy * self.opts.reduce_bytes() / shard;
        let found = self.with_packing(plan, |p| {
            let mut shapes = [(EMPTY, 0.0); SHAPES];
            let mut n = 0;
            // (time, copies held, widest group) of the busiest GPU.
            let mut worst = (0.0f64, 0u32, EMPTY);
            for sets in &p.layout.per_gpu {
                let mut t = 0.0;
                let mut widest = EMPTY;
                for &k in sets {
                    let g = replica_group(&p.layout.sets[k as usize], x.g_ep);
                    let c = match shapes[..n].iter().find(|(h, _)| *h == g) {
                        Some(&(_, c)) => c,
                        None => {
                            let c = self.coll(AllReduce, g, bytes, x.algo).time;
                            if n < SHAPES {
                                shapes[n] = (g, c);
                                n += 1;
                            }
                            c
                        }
                    };
                    t += c;
                    if g.size > widest.size || (g.size == widest.size && g.nodes > widest.nodes) {
                        widest = g;
                    }
                }
                if t > worst.0 {
                    worst = (t, sets.len() as u32, widest);
                }
            }
            worst
        });
        let Some((t, held, widest)) = found else {
            return 0.0;
        };
        if t <= 0.0 {
            return 0.0;
        }
        let buckets = (per_copy * held as f64 / self.opts.bucket_params).max(1.0);
        let exposed = if self.opts.dp_overlap {
            (t / buckets).max(t - s.bwd)
        } else {
            t
        };
        if S::ENABLED {
            let what = "EP replica gradient all-reduce (busiest GPU)";
            let total = bytes * held as f64;
            let row = Comm::new(CommKind::Dp, what, Pass::Step, AllReduce, widest, total);
            let c = self.coll(AllReduce, widest, bytes, x.algo);
            sink.push(row.row(None, c.algorithm, c.protocol, t, exposed));
        }
        exposed
    }
}
