//! Data parallelism: the gradient reduction and ZeRO parameter gathers over the DP×CP group
//! (dense parameters) and the EDP group (experts), and the tied embedding's gradient
//! all-reduce between the first and last stage.

use autoplan_cluster::GroupPlacement;
use autoplan_cost::Collective::{AllGather, AllReduce, ReduceScatter};
use autoplan_cost::CollectiveCost;
use autoplan_graph::LayerKind;
use autoplan_plan::{Plan, Zero};

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
}

const DENSE: DpNames = DpNames {
    zero3: [
        "ZeRO-3 parameter all-gather (fwd)",
        "ZeRO-3 parameter all-gather (bwd)",
        "ZeRO-3 gradient reduce-scatter",
    ],
    zero1: ["DP gradient reduce-scatter", "DP parameter all-gather"],
    all_reduce: "DP gradient all-reduce",
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
            };
            if plan.zero >= Zero(3) {
                self.dp_zero3(&d, x, sink, micro, &mut out);
            } else if plan.zero >= Zero(1) {
                self.dp_zero1(&d, x, sink, &mut out);
            } else {
                self.dp_all_reduce(&d, x, sink, &mut out);
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

    /// ZeRO-3 / FSDP: parameters gathered before each forward and backward of each
    /// micro-batch, gradients reduce-scattered after each backward; prefetching hides them
    /// behind the same pass's compute.
    fn dp_zero3<S: Sink>(
        &self,
        d: &DpGroup<'_>,
        x: &Ctx,
        sink: &mut S,
        micro: f64,
        out: &mut DpExposed,
    ) {
        let (g, p, gb) = (d.g, d.params, self.opts.grad_bytes);
        let ag = self.coll(AllGather, g, p * PARAM, x.algo);
        let rs = self.coll(ReduceScatter, g, p * gb, x.algo);
        let e_f = (ag.time - d.s.fwd).max(ag.time / d.buckets);
        let e_b = (ag.time + rs.time - d.s.bwd).max((ag.time + rs.time) / d.buckets);
        out.per_mb += e_f + e_b;
        if S::ENABLED {
            let [w1, w2, w3] = d.names.zero3;
            let row = |what, pass, op, bytes| {
                Comm::new(CommKind::Dp, what, pass, op, g, bytes).calls(micro)
            };
            push(
                sink,
                row(w1, Pass::Forward, AllGather, p * PARAM),
                ag,
                micro * e_f,
            );
            push(sink, row(w2, Pass::Backward, AllGather, p * PARAM), ag, 0.0);
            push(
                sink,
                row(w3, Pass::Backward, ReduceScatter, p * gb),
                rs,
                micro * e_b,
            );
        }
    }

    /// Distributed optimizer / ZeRO-1/2: reduce-scatter of the gradients, all-gather of the
    /// updated 16-bit parameters (overlapped with the next forward).
    fn dp_zero1<S: Sink>(&self, d: &DpGroup<'_>, x: &Ctx, sink: &mut S, out: &mut DpExposed) {
        let (g, p, gb) = (d.g, d.params, self.opts.grad_bytes);
        let rs = self.coll(ReduceScatter, g, p * gb, x.algo);
        let ag = self.coll(AllGather, g, p * PARAM, x.algo);
        let e_rs = self.dp_hide(d, rs.time, d.s.bwd);
        let e_ag = self.dp_hide(d, ag.time, d.s.fwd);
        out.step += e_rs + e_ag;
        if S::ENABLED {
            let [w1, w2] = d.names.zero1;
            let rs_row = Comm::new(CommKind::Dp, w1, Pass::Step, ReduceScatter, g, p * gb);
            push(sink, rs_row, rs, e_rs);
            let ag_row = Comm::new(CommKind::Dp, w2, Pass::Step, AllGather, g, p * PARAM);
            push(sink, ag_row, ag, e_ag);
        }
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
            sink.push(row.row(Some(LayerKind::Embedding), c.algorithm, c.time, c.time));
        }
    }
}

/// Lists a once-per-step (or per-micro-batch) collective `c` priced `cost`, `exposed`
/// seconds per step.
#[inline]
fn push<S: Sink>(sink: &mut S, c: Comm, cost: CollectiveCost, exposed: f64) {
    sink.push(c.row(None, cost.algorithm, cost.time, exposed));
}
