//! Data parallelism: the gradient reduction and ZeRO parameter gathers over the DP×CP group
//! (dense parameters) and the EDP group (experts), and the tied embedding's gradient
//! all-reduce between the first and last stage.
//!
//! What each sharding mode (`autoplan_plan::Zero`) communicates, and when (volumes:
//! Rajbhandari+20 §5 — all-reduce 2Ψ; ZeRO-1/2 reduce-scatter Ψ + all-gather Ψ; ZeRO-3 adds
//! the parameter all-gathers, 3Ψ in all — here under gradient accumulation, `m` micro-batches):
//! - 0: one gradient all-reduce per step, on the last micro-batch (Megatron DDP,
//!   frameworks.md §1.4);
//! - 1 (distributed optimizer): one reduce-scatter per step and one all-gather of the updated
//!   parameters (frameworks.md §1.4; DeepSpeed stage 1, §3.5);
//! - 2: a reduce-scatter after **every** micro-batch's backward (DeepSpeed stage 2, §3.5;
//!   Megatron-FSDP `optim_grads`, §1.4) and one all-gather per step;
//! - 3: per micro-batch, an all-gather before the forward, another before the backward
//!   (resharded after forward) and a reduce-scatter after it (Zhao+23 §3.2; DeepSpeed stage 3
//!   `reduce_scatter_coalesced` after every backward, §3.5; FSDP2 default, §3.6);
//! - 3-noreshard: per micro-batch, one all-gather before the forward, kept through the
//!   backward, and a reduce-scatter (FSDP2 `reshard_after_forward=False`, §3.6);
//! - `:G` (HSDP): the gathers and reduce-scatters run inside the shard group of `G` ranks, and
//!   each reduced shard is all-reduced across the `n/G` groups as often as it is
//!   reduce-scattered (FSDP2 drives both from one switch, `set_requires_gradient_sync`, §3.6;
//!   Megatron's `--num-distributed-optimizer-instances`, §1.1, once per step for stage 1).
//!
//! Overlap: a once-per-step collective hides behind one micro-batch's backward (or forward)
//! except its last bucket; a per-micro-batch one likewise behind each micro-batch's pass
//! (the bucketed backward exposes the last bucket's reduction, and prefetching exposes the
//! first unit's gather: Zhao+23 §3.3 "backward prefetching", "forward prefetching").

use autoplan_cluster::GroupPlacement;
use autoplan_cost::Collective::{AllGather, AllReduce, ReduceScatter};
use autoplan_cost::CollectiveCost;
use autoplan_graph::LayerKind;
use autoplan_plan::Plan;

use super::ctx::Ctx;
use super::emit::Comm;
use super::pipeline::StageTime;
use super::Evaluator;
use crate::comm::{CommKind, Pass, Sink};

/// Bytes of a 16-bit parameter (ZeRO parameter all-gathers).
const PARAM: f64 = 2.0;

/// The row names of one group's collectives (dense parameters or experts).
struct DpNames {
    zero3: [&'static str; 3],
    zero1: [&'static str; 2],
    all_reduce: &'static str,
    /// HSDP: the reduced shard all-reduced across the shard groups.
    cross: &'static str,
}

const DENSE: DpNames = DpNames {
    zero3: [
        "ZeRO-3 parameter all-gather (fwd)",
        "ZeRO-3 parameter all-gather (bwd)",
        "ZeRO-3 gradient reduce-scatter",
    ],
    zero1: ["DP gradient reduce-scatter", "DP parameter all-gather"],
    all_reduce: "DP gradient all-reduce",
    cross: "HSDP gradient shard all-reduce (across shard groups)",
};

const EXPERT: DpNames = DpNames {
    zero3: [
        "ZeRO-3 expert parameter all-gather (fwd)",
        "ZeRO-3 expert parameter all-gather (bwd)",
        "ZeRO-3 expert gradient reduce-scatter",
    ],
    zero1: [
        "EDP expert gradient reduce-scatter",
        "EDP expert parameter all-gather",
    ],
    all_reduce: "EDP expert gradient all-reduce",
    cross: "HSDP expert gradient shard all-reduce (across shard groups)",
};

/// The exposed DP time of a step: once per step, and per micro-batch (ZeRO-3's gathers).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct DpExposed {
    pub(super) step: f64,
    pub(super) per_mb: f64,
}

/// One group's reduction: the group, its parameters on this GPU, the stage it runs beside,
/// its row names.
struct DpGroup<'a> {
    g: GroupPlacement,
    params: f64,
    s: &'a StageTime,
    names: &'a DpNames,
    /// Parameters per bucket: the last bucket's reduction is never hidden.
    buckets: f64,
    /// HSDP: the ranks holding the same shard, one per shard group (size 1 without HSDP).
    cross: GroupPlacement,
}

impl Evaluator {
    /// DP gradient reduction and ZeRO gathers of the stage `s` (the one holding the most
    /// parameters), `micro` micro-batches per step.
    pub(super) fn dp_comm<S: Sink>(
        &self,
        plan: &Plan,
        x: &Ctx,
        s: &StageTime,
        sink: &mut S,
        micro: f64,
    ) -> DpExposed {
        let mut out = DpExposed::default();
        let groups = [
            (x.g_dp, s.params_dense, &DENSE),
            (x.g_edp, s.params_expert, &EXPERT),
        ];
        for (g, p, names) in groups {
            if g.size <= 1 || p <= 0.0 {
                continue;
            }
            let buckets = (p / self.opts.bucket_params).max(1.0);
            let d = DpGroup {
                g,
                params: p,
                s,
                names,
                buckets,
                cross: g,
            };
            let z = plan.zero;
            let (shard, cross) = split(g, z.shard_size(g.size));
            let d = DpGroup { cross, ..d };
            if !z.shards_optimizer() {
                self.dp_all_reduce(&d, x, sink, &mut out);
            } else if z.shards_params() {
                self.dp_zero3(&d, shard, z.gathers_in_backward(), x, sink, micro, &mut out);
            } else {
                self.dp_zero12(&d, shard, z.shards_grads(), x, sink, micro, &mut out);
            }
        }
        self.tied_embedding_comm(x, sink, &mut out);
        out
    }

    /// What DP overlap leaves exposed of `t` seconds hidden behind `window`.
    #[inline]
    fn dp_hide(&self, d: &DpGroup<'_>, t: f64, window: f64) -> f64 {
        if self.opts.dp_overlap {
            (t / d.buckets).max(t - window)
        } else {
            t
        }
    }

    /// ZeRO-3 / FSDP: parameters gathered inside the shard group before each micro-batch's
    /// forward and, when resharded after it, again before its backward; gradients
    /// reduce-scattered after each backward (and, under HSDP, the shard all-reduced across the
    /// groups). Prefetching hides the gathers behind the same pass's compute except the first
    /// unit's; the last bucket's reduction is never hidden (module docs).
    #[allow(clippy::too_many_arguments)]
    fn dp_zero3<S: Sink>(
        &self,
        d: &DpGroup<'_>,
        shard: GroupPlacement,
        regather: bool,
        x: &Ctx,
        sink: &mut S,
        micro: f64,
        out: &mut DpExposed,
    ) {
        let (p, gb) = (d.params, self.opts.grad_bytes);
        let ag = self.coll(AllGather, shard, p * PARAM, x.algo);
        let rs = self.coll(ReduceScatter, shard, p * gb, x.algo);
        let ar = self.cross_all_reduce(d, shard, x);
        let ag_b = if regather { ag.time } else { 0.0 };
        let e_f = (ag.time - d.s.fwd).max(ag.time / d.buckets);
        let bwd = ag_b + rs.time + ar.time;
        let e_b = (bwd - d.s.bwd).max(bwd / d.buckets);
        out.per_mb += e_f + e_b;
        if S::ENABLED {
            let [w1, w2, w3] = d.names.zero3;
            let row = |what, pass, op, g, bytes| {
                Comm::new(CommKind::Dp, what, pass, op, g, bytes).calls(micro)
            };
            let ag_f = row(w1, Pass::Forward, AllGather, shard, p * PARAM);
            push(sink, ag_f, ag, micro * e_f);
            if regather {
                let ag_row = row(w2, Pass::Backward, AllGather, shard, p * PARAM);
                push(sink, ag_row, ag, 0.0);
            }
            let rs_row = row(w3, Pass::Backward, ReduceScatter, shard, p * gb);
            // The backward's exposure is booked on the reduce-scatter row.
            push(sink, rs_row, rs, micro * e_b);
            if d.cross.size > 1 {
                let bytes = p * gb / shard.size as f64;
                let ar_row = row(d.names.cross, Pass::Backward, AllReduce, d.cross, bytes);
                push(sink, ar_row, ar, 0.0);
            }
        }
    }

    /// Distributed optimizer / ZeRO-1, and ZeRO-2: reduce-scatter of the gradients inside the
    /// shard group — once per step (stage 1) or after every micro-batch's backward (stage 2,
    /// `every_mb`) — under HSDP the shard all-reduced across the groups as often, and one
    /// all-gather of the updated 16-bit parameters per step (overlapped with the next
    /// forward).
    #[allow(clippy::too_many_arguments)]
    fn dp_zero12<S: Sink>(
        &self,
        d: &DpGroup<'_>,
        shard: GroupPlacement,
        every_mb: bool,
        x: &Ctx,
        sink: &mut S,
        micro: f64,
        out: &mut DpExposed,
    ) {
        let (p, gb) = (d.params, self.opts.grad_bytes);
        // DeepSpeed all-reduces each bucket and keeps its slice (`zero_grad_all_reduce`).
        let reduce = if self.opts.zero_grad_all_reduce {
            AllReduce
        } else {
            ReduceScatter
        };
        let rs = self.coll(reduce, shard, p * gb, x.algo);
        let ar = self.cross_all_reduce(d, shard, x);
        let ag = self.coll(AllGather, shard, p * PARAM, x.algo);
        let e_rs = self.dp_hide(d, rs.time + ar.time, d.s.bwd);
        let e_ag = self.dp_hide(d, ag.time, d.s.fwd);
        let calls = if every_mb {
            out.per_mb += e_rs;
            out.step += e_ag;
            micro
        } else {
            out.step += e_rs + e_ag;
            1.0
        };
        if S::ENABLED {
            let [w1, w2] = d.names.zero1;
            let w1 = if self.opts.zero_grad_all_reduce {
                d.names.all_reduce
            } else {
                w1
            };
            let pass = if every_mb { Pass::Backward } else { Pass::Step };
            let rs_row = Comm::new(CommKind::Dp, w1, pass, reduce, shard, p * gb);
            push(sink, rs_row.calls(calls), rs, calls * e_rs);
            if d.cross.size > 1 {
                let bytes = p * gb / shard.size as f64;
                let ar_row =
                    Comm::new(CommKind::Dp, d.names.cross, pass, AllReduce, d.cross, bytes);
                push(sink, ar_row.calls(calls), ar, 0.0);
            }
            let ag_row = Comm::new(CommKind::Dp, w2, Pass::Step, AllGather, shard, p * PARAM);
            push(sink, ag_row, ag, e_ag);
        }
    }

    /// HSDP: the all-reduce of one reduced gradient shard (`1/G` of the gradients) across the
    /// shard groups; nothing without HSDP.
    #[inline]
    fn cross_all_reduce(&self, d: &DpGroup<'_>, shard: GroupPlacement, x: &Ctx) -> CollectiveCost {
        let bytes = d.params * self.opts.grad_bytes / shard.size.max(1) as f64;
        self.coll(AllReduce, d.cross, bytes, x.algo)
    }

    /// No ZeRO: one all-reduce of the gradients, hidden behind the backward.
    fn dp_all_reduce<S: Sink>(&self, d: &DpGroup<'_>, x: &Ctx, sink: &mut S, out: &mut DpExposed) {
        let (g, p, gb) = (d.g, d.params, self.opts.grad_bytes);
        let ar = self.coll(AllReduce, g, p * gb, x.algo);
        let e = self.dp_hide(d, ar.time, d.s.bwd);
        out.step += e;
        if S::ENABLED {
            let what = d.names.all_reduce;
            let row = Comm::new(CommKind::Dp, what, Pass::Step, AllReduce, g, p * gb);
            push(sink, row, ar, e);
        }
    }

    /// Tied embedding and LM head on different stages: their gradients are all-reduced
    /// between the first and last stage (seed 003 §4).
    fn tied_embedding_comm<S: Sink>(&self, x: &Ctx, sink: &mut S, out: &mut DpExposed) {
        if x.pp <= 1 || !self.model.tied_embeddings {
            return;
        }
        let bytes = self.vocab * self.hidden / x.tp * self.opts.grad_bytes;
        let c = self.coll(AllReduce, x.hop_pp, bytes, x.algo);
        out.step += c.time;
        if S::ENABLED {
            let what = "tied embedding gradient all-reduce (first ↔ last stage)";
            let row = Comm::new(CommKind::Dp, what, Pass::Step, AllReduce, x.hop_pp, bytes);
            sink.push(row.row(
                Some(LayerKind::Embedding),
                c.algorithm,
                c.protocol,
                c.time,
                c.time,
            ));
        }
    }
}

/// The shard group (`n` consecutive members of the data-parallel group `g`, innermost as
/// torchtitan's `["dp_replicate", "fsdp"]` mesh lays them out, frameworks.md §2.1) and the
/// group across shard groups (members `n` apart), where the members of `g` fill its nodes in
/// order. `n = g.size`: the shard group is `g` and the cross group one rank.
fn split(g: GroupPlacement, n: u32) -> (GroupPlacement, GroupPlacement) {
    let one = GroupPlacement {
        size: 1,
        ranks_per_node: 1,
        nodes: 1,
    };
    if n >= g.size || n == 0 {
        return (g, one);
    }
    let rpn = g.ranks_per_node.max(1);
    let across = g.size / n;
    let shard = GroupPlacement {
        size: n,
        ranks_per_node: n.min(rpn),
        nodes: n.div_ceil(rpn),
    };
    // Members `n` apart: `rpn / n` of them share a node when a shard group is inside one.
    let per_node = (rpn / n).max(1).min(across);
    let cross = GroupPlacement {
        size: across,
        ranks_per_node: per_node,
        nodes: across.div_ceil(per_node),
    };
    (shard, cross)
}

/// Lists a once-per-step (or per-micro-batch) collective `c` priced `cost`, `exposed`
/// seconds per step.
#[inline]
fn push<S: Sink>(sink: &mut S, c: Comm, cost: CollectiveCost, exposed: f64) {
    sink.push(c.row(None, cost.algorithm, cost.protocol, cost.time, exposed));
}
