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
//! - the per-micro-batch collectives of 2 and 3 go one transformer block at a time, one
//!   collective per block, each paying its own latency (`dp_zero3`); the once-per-step
//!   reduction and gather of 0 and 1 are priced as one collective of the whole;
//! - `:G` (HSDP): the gathers and reduce-scatters run inside the shard group of `G` ranks, and
//!   each reduced shard is all-reduced across the `n/G` groups as often as it is
//!   reduce-scattered (FSDP2 drives both from one switch, `set_requires_gradient_sync`, §3.6;
//!   Megatron's `--num-distributed-optimizer-instances`, §1.1, once per step for stage 1).
//!
//! Overlap: a once-per-step collective hides behind one micro-batch's backward (or forward)
//! except its last bucket; a per-micro-batch one likewise behind each micro-batch's pass
//! (the bucketed backward exposes the last bucket's reduction, and prefetching exposes the
//! first unit's gather: Zhao+23 §3.3 "backward prefetching", "forward prefetching").
//!
//! **One network.** A collective hidden behind a pass shares the GPU's scale-out link (its
//! NIC: one per GPU on the bundled clusters, hardware.md) with every other collective that
//! crosses nodes in that pass: the EP all-to-alls and the CP ring of the same micro-batch
//! (`Emitter::net`, the part of them that runs beside compute) and the other DP group's
//! reduction (dense parameters and experts reduce in separate buffers, one after the other on
//! the same link: Megatron-Core's `DistributedDataParallel` bucket groups, frameworks.md
//! §1.4). Each is priced alone at the link's full bandwidth (the cost model), so the part of a
//! DP collective that crosses nodes hides only in the part of the window the link is free:
//! `exposed = max(t/buckets, t − window, t_net − (window − busy)⁺)`, and what it hides there
//! makes the link busy for the next. Without it a per-micro-batch ZeRO-2 reduce-scatter of
//! DeepSeek-V3's experts and the EP all-to-alls of the same backward were both "hidden" in
//! one backward whose link they oversubscribed. NVLink's own contention is not modelled.

use autoplan_cluster::GroupPlacement;
use autoplan_cost::Collective::{AllGather, AllReduce, ReduceScatter};
use autoplan_cost::CollectiveCost;
use autoplan_graph::LayerKind;
use autoplan_plan::Plan;

use super::classes::ClassId;
use super::ctx::Ctx;
use super::emit::Comm;
use super::pipeline::StageTime;
use super::Evaluator;
use crate::comm::{CommKind, Pass, Sink};

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
    /// The units ZeRO-2's reduce-scatters and ZeRO-3's gathers and reduce-scatters go by, one
    /// collective each: the blocks holding this group's parameters on the stage.
    units: u32,
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
        // Seconds of the forward and backward window the scale-out link is already busy.
        let mut busy = Busy {
            fwd: s.net_fwd,
            bwd: s.net_bwd,
        };
        let groups = [
            (x.g_dp, s.params_dense, &DENSE, s.blocks),
            (x.g_edp, s.params_expert, &EXPERT, s.moe),
        ];
        for (g, p, names, units) in groups {
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
                units,
            };
            let z = plan.zero;
            let (shard, cross) = split(g, z.shard_size(g.size));
            let d = DpGroup { cross, ..d };
            if !z.shards_optimizer() {
                self.dp_all_reduce(&d, x, sink, &mut out, &mut busy);
            } else if z.shards_params() {
                let regather = z.gathers_in_backward();
                self.dp_zero3(&d, shard, regather, x, sink, micro, &mut out, &mut busy);
            } else {
                let every_mb = z.shards_grads();
                self.dp_zero12(&d, shard, every_mb, x, sink, micro, &mut out, &mut busy);
            }
        }
        self.tied_embedding_comm(x, sink, &mut out);
        self.sequence_parallel_grads_comm(x, s, sink, &mut out);
        out
    }

    /// What DP overlap leaves exposed of `t` seconds hidden behind `window`, `t_net` of them
    /// on the scale-out link, which is `busy` seconds of the window already (module docs);
    /// the link's share this collective hides is added to `busy`.
    #[inline]
    fn dp_hide(&self, buckets: f64, t: f64, t_net: f64, window: f64, busy: &mut f64) -> f64 {
        if self.opts.dp_overlap {
            overlap(t, t_net, buckets, window, busy)
        } else {
            t
        }
    }

    /// The once-per-step gradient reduction (stages 0–1): hidden as [`Self::dp_hide`] hides it,
    /// except under a pipeline schedule that runs it after its step has ended (PyTorch's
    /// pipelining, `EvalOptions::dp_overlap_with_pp`), where none of it hides.
    fn step_reduction_hide(
        &self,
        buckets: f64,
        t: f64,
        t_net: f64,
        x: &Ctx,
        window: f64,
        busy: &mut f64,
    ) -> f64 {
        if x.pp > 1 && !self.opts.dp_overlap_with_pp {
            t
        } else {
            self.dp_hide(buckets, t, t_net, window, busy)
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
        busy: &mut Busy,
    ) {
        let (p, gb) = (d.params, self.opts.reduce_bytes());
        // FSDP gathers and reduces one unit at a time, a transformer block: torchtitan calls
        // `fully_shard` on each block and then the root (`llama3/infra/parallelize.py` @
        // v0.2.2, the loop frameworks.md §2.1 cites at L319-331; FSDP2's default
        // `reshard_after_forward` tells those non-root units from the root, §3.6), FSDP1's
        // auto-wrap policy wraps blocks alike. Each unit's gather and reduce-scatter is a
        // collective of its own paying the collective's latency (NCCL's tuning model charges
        // it per call, collectives.md §1): on 16 384 ranks a ring all-gather's latency alone is
        // ~35 ms, which one collective of the whole stage counted once for all its blocks.
        // The first unit's gather and the last unit's reduce-scatter are what prefetching and
        // overlap leave exposed.
        let units = f64::from(d.units.max(1));
        let per_unit = |b: f64| b / units;
        let param = self.opts.param_gather_bytes;
        let (ag1, ag) = self.unit_by_unit(AllGather, shard, p * param, units, x);
        let (rs1, rs) = self.unit_by_unit(ReduceScatter, shard, p * gb, units, x);
        // HSDP: each unit's reduced shard all-reduced across the shard groups.
        let cross_bytes = p * gb / shard.size.max(1) as f64;
        let (ar1, ar) = self.unit_by_unit(AllReduce, d.cross, cross_bytes, units, x);
        let ag_b = if regather { ag } else { 0.0 };
        let (on_net, cross_net) = (!shard.intra_node(), !d.cross.intra_node());
        let net = |t: f64, yes: bool| if yes { t } else { 0.0 };
        let e_f = overlap(ag, net(ag, on_net), units, d.s.fwd, &mut busy.fwd);
        let bwd = ag_b + rs + ar;
        let bwd_net = net(ag_b + rs, on_net) + net(ar, cross_net);
        let e_b = overlap(bwd, bwd_net, units, d.s.bwd, &mut busy.bwd);
        out.per_mb += e_f + e_b;
        if S::ENABLED {
            let [w1, w2, w3] = d.names.zero3;
            // One row per collective kind: `units` calls per micro-batch, each one unit's.
            let calls = micro * units;
            let row = |what, pass, op, g, bytes| {
                Comm::new(CommKind::Dp, what, pass, op, g, bytes).calls(calls)
            };
            let ag_f = row(w1, Pass::Forward, AllGather, shard, per_unit(p * param));
            push(sink, ag_f, ag1, micro * e_f);
            if regather {
                let ag_row = row(w2, Pass::Backward, AllGather, shard, per_unit(p * param));
                push(sink, ag_row, ag1, 0.0);
            }
            let rs_row = row(w3, Pass::Backward, ReduceScatter, shard, per_unit(p * gb));
            // The backward's exposure is booked on the reduce-scatter row.
            push(sink, rs_row, rs1, micro * e_b);
            if d.cross.size > 1 {
                let ar_row = row(
                    d.names.cross,
                    Pass::Backward,
                    AllReduce,
                    d.cross,
                    per_unit(cross_bytes),
                );
                push(sink, ar_row, ar1, 0.0);
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
        busy: &mut Busy,
    ) {
        let (p, gb) = (d.params, self.opts.zero12_reduce_bytes(x.cp));
        // DeepSpeed all-reduces each bucket and keeps its slice (`zero_grad_all_reduce`).
        let reduce = if self.opts.zero_grad_all_reduce {
            AllReduce
        } else {
            ReduceScatter
        };
        // ZeRO-2 reduces each unit's gradients as its backward finishes, a collective per
        // block as ZeRO-3 does (Megatron-FSDP's `optim_grads` reduce-scatters on every backward
        // through the same code path as `optim_grads_params`, `megatron_fsdp.py`, frameworks.md
        // §1.4; DeepSpeed stage 2 flushes a bucket of `reduce_bucket_size` elements at a time,
        // §3.5), each paying its latency, the last one exposed (`dp_zero3`). ZeRO-0/1's one
        // reduction per step stays one collective of the whole (docs/cost-model.md says why).
        let n = if every_mb {
            f64::from(d.units.max(1))
        } else {
            1.0
        };
        let cross_bytes = p * gb / shard.size.max(1) as f64;
        let (rs_one, rs_t) = self.unit_by_unit(reduce, shard, p * gb, n, x);
        let (ar_one, ar_t) = self.unit_by_unit(AllReduce, d.cross, cross_bytes, n, x);
        let param = self.opts.param_gather_bytes;
        let ag = self.coll(AllGather, shard, p * param, x.algo);
        let (on_net, cross_net) = (!shard.intra_node(), !d.cross.intra_node());
        let net = |t: f64, yes: bool| if yes { t } else { 0.0 };
        let rs_net = net(rs_t, on_net) + net(ar_t, cross_net);
        // The last unit's reduction is exposed per micro-batch; ZeRO-1's last bucket's.
        let rs_buckets = if every_mb { n } else { d.buckets };
        let e_rs = if every_mb {
            self.dp_hide(rs_buckets, rs_t + ar_t, rs_net, d.s.bwd, &mut busy.bwd)
        } else {
            self.step_reduction_hide(rs_buckets, rs_t + ar_t, rs_net, x, d.s.bwd, &mut busy.bwd)
        };
        let e_ag = if self.opts.param_gather_overlap {
            self.dp_hide(
                d.buckets,
                ag.time,
                net(ag.time, on_net),
                d.s.fwd,
                &mut busy.fwd,
            )
        } else {
            ag.time
        };
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
            let rs_row = Comm::new(CommKind::Dp, w1, pass, reduce, shard, p * gb / n);
            push(sink, rs_row.calls(calls * n), rs_one, calls * e_rs);
            if d.cross.size > 1 {
                let bytes = cross_bytes / n;
                let ar_row =
                    Comm::new(CommKind::Dp, d.names.cross, pass, AllReduce, d.cross, bytes);
                push(sink, ar_row.calls(calls * n), ar_one, 0.0);
            }
            let ag_row = Comm::new(CommKind::Dp, w2, Pass::Step, AllGather, shard, p * param);
            push(sink, ag_row, ag, e_ag);
        }
    }

    /// `bytes` moved by `op` over `g` as `n` equal collectives one after another (one per
    /// block: `dp_zero3`): one call's cost, and the seconds of all `n`.
    #[inline]
    fn unit_by_unit(
        &self,
        op: autoplan_cost::Collective,
        g: GroupPlacement,
        bytes: f64,
        n: f64,
        x: &Ctx,
    ) -> (CollectiveCost, f64) {
        let one = self.coll(op, g, bytes / n, x.algo);
        (one, one.time * n)
    }

    /// No ZeRO: one all-reduce of the gradients, hidden behind the backward.
    fn dp_all_reduce<S: Sink>(
        &self,
        d: &DpGroup<'_>,
        x: &Ctx,
        sink: &mut S,
        out: &mut DpExposed,
        busy: &mut Busy,
    ) {
        let (g, p, gb) = (d.g, d.params, self.opts.reduce_bytes());
        let ar = self.coll(AllReduce, g, p * gb, x.algo);
        let t_net = if g.intra_node() { 0.0 } else { ar.time };
        let e = self.step_reduction_hide(d.buckets, ar.time, t_net, x, d.s.bwd, &mut busy.bwd);
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
        // In the gradient buffer's dtype, never cast: Megatron all-reduces the main gradient,
        // DeepSpeed's pipeline `weight._hp_grad` (`CostProfile::reduce_in_training_dtype`).
        let bytes = self.vocab * self.hidden / x.tp * self.opts.grad_bytes;
        let what = "tied embedding gradient all-reduce (first ↔ last stage)";
        let layer = Some(LayerKind::Embedding);
        self.step_all_reduce(what, layer, x.hop_pp, bytes, x, sink, out);
    }

    /// A gradient all-reduce of `bytes` over `g` once per step, after the backward and before
    /// the optimizer, nothing to hide it: booked in `out.step` and listed.
    #[allow(clippy::too_many_arguments)]
    fn step_all_reduce<S: Sink>(
        &self,
        what: &'static str,
        layer: Option<LayerKind>,
        g: GroupPlacement,
        bytes: f64,
        x: &Ctx,
        sink: &mut S,
        out: &mut DpExposed,
    ) {
        let c = self.coll(AllReduce, g, bytes, x.algo);
        out.step += c.time;
        if S::ENABLED {
            let row = Comm::new(CommKind::Dp, what, Pass::Step, AllReduce, g, bytes);
            sink.push(row.row(layer, c.algorithm, c.protocol, c.time, c.time));
        }
    }

    /// Under SP the weights every TP rank holds whole (MLA's `duplicated` down-projections, the
    /// MoE router) get a partial gradient on each rank, from its own rows, summed over the TP
    /// group once per step before the optimizer: Megatron-Core marks them `sequence_parallel`
    /// (`extensions/transformer_engine.py` @ core 0.19.2 L1057-1062, `transformer/moe/router.py`
    /// L82) and `finalize_model_grads` all-reduces those gradients, after the backward
    /// (`distributed/finalize_model_grads.py` L416-470, L647), on the critical path. The norms'
    /// and biases' few `h` per block, marked alike, are not counted.
    fn sequence_parallel_grads_comm<S: Sink>(
        &self,
        x: &Ctx,
        s: &StageTime,
        sink: &mut S,
        out: &mut DpExposed,
    ) {
        if !x.sp || x.tp <= 1.0 {
            return;
        }
        let per_block = |id: ClassId| self.classes[id as usize].replicated_params;
        let params = f64::from(s.blocks) * per_block(ClassId::Attn)
            + f64::from(s.moe) * per_block(ClassId::Moe);
        if params <= 0.0 {
            return;
        }
        let what = "sequence-parallel replicated weights' gradient all-reduce (over TP)";
        let bytes = params * self.opts.grad_bytes;
        self.step_all_reduce(what, None, x.g_tp, bytes, x, sink, out);
    }
}

/// Seconds of a micro-batch's forward and backward window in which the scale-out link is
/// already busy (module docs, "One network").
struct Busy {
    fwd: f64,
    bwd: f64,
}

/// The exposed part of `t` seconds of a bucketed collective hidden behind `window` seconds of
/// compute, `t_net` of them on the scale-out link, `busy` seconds of the window taken already:
/// the last of `buckets` buckets is never hidden, nor what exceeds the window, nor the link's
/// share that exceeds the link's free part of the window (module docs). Never more than `t`
/// (`t_net ≤ t`), and at `busy = 0` the share cannot exceed the window's bound. Adds the link
/// time hidden to `busy`.
#[inline]
fn overlap(t: f64, t_net: f64, buckets: f64, window: f64, busy: &mut f64) -> f64 {
    let free = (window - *busy).max(0.0);
    let exposed = (t / buckets).max(t - window).max(t_net - free);
    *busy += t_net.min(free);
    exposed
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

#[cfg(test)]
mod tests {
    use super::overlap;

    #[test]
    fn a_free_link_hides_as_the_window_does() {
        // Nothing else on the link: the last bucket or the window's excess, as without it.
        for (t, w) in [(0.1, 0.5), (0.5, 0.1), (0.3, 0.3)] {
            let mut busy = 0.0;
            let e = overlap(t, t, 4.0, w, &mut busy);
            assert_eq!(e, (t / 4.0f64).max(t - w));
            assert_eq!(busy, t.min(w));
        }
    }

    #[test]
    fn a_busy_link_exposes_what_its_free_part_cannot_hold() {
        // 0.4 s of reduction behind a 0.6 s backward whose all-to-alls hold the link 0.5 s:
        // 0.1 s free, 0.3 s exposed; the next reduction finds the link full.
        let mut busy = 0.5;
        let e = overlap(0.4, 0.4, 100.0, 0.6, &mut busy);
        assert!((e - 0.3).abs() < 1e-12, "{e}");
        assert!((busy - 0.6).abs() < 1e-12);
        let e2 = overlap(0.2, 0.2, 100.0, 0.6, &mut busy);
        assert!((e2 - 0.2).abs() < 1e-12, "{e2}");
        // Exposure grows with the link's busy time and never exceeds the collective.
        let at = |b: f64| overlap(0.4, 0.4, 100.0, 0.6, &mut { b });
        assert!(at(0.0) <= at(0.2) && at(0.2) <= at(0.4) && at(0.4) <= at(0.6));
        assert!(at(10.0) <= 0.4);
    }

    #[test]
    fn an_intra_node_collective_does_not_wait_for_the_link() {
        let mut busy = 0.6;
        let e = overlap(0.4, 0.0, 100.0, 0.6, &mut busy);
        assert!((e - 0.004).abs() < 1e-12, "{e}");
        assert_eq!(busy, 0.6);
    }
}
