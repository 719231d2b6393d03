//! Context parallelism: the attention's K/V exchange over the CP group, in the four modes of
//! Megatron-Core's `--cp-comm-type` (run by Transformer Engine; the reference notes'
//! frameworks.md §1.5): `p2p` ring attention, `a2a` Ulysses all-to-alls, `all_gather` K/V
//! all-gather, and `a2a+p2p` (Ulysses inside a group, the ring across groups).
//!
//! **Causal load balancing.** Megatron-Core cuts each sequence into `2·cp` chunks and gives CP
//! rank `i` chunks `i` and `2cp−1−i` (`get_batch_on_this_cp_rank`; hence `seq_len % (2·cp) =
//! 0`, `args.py @ core_v0.19.0:L1294-1297`, frameworks.md §1.5; torchtitan's `headtail`
//! balancer is the same split, §2). Every rank then holds the same causal work, `1/cp` of the
//! sequence's (which is what the compute prices: this rank's `s/cp` tokens at the causal
//! FLOPs per token of the whole sequence), and every ring step the same: step 0 is the local
//! causal pair of chunks (2 chunk² of scores), each later step either both local query chunks
//! against the first remote chunk or the second local chunk against both (2 chunk² again). So
//! a ring of `n` ranks splits the attention core into `n` equal steps, which the compute prices
//! as `n` kernel calls of `s/cp` queries at the per-shard tile efficiency (compute.rs,
//! `flash_core`).
//!
//! **Ring exposure.** Transformer Engine's p2p CP (`AttnFuncWithCPAndKVP2P`) posts the K/V
//! send/receive of step `i+1` before computing step `i`, so each of the `n−1` transfers hides
//! behind one step's attention (`core/n`); what a transfer exceeds its step is exposed, per
//! step. Backward passes K/V and the accumulated dK/dV (2×) the same way, and after the last
//! step each rank's dK/dV, accumulated one hop away from its owner, travels that hop with no
//! compute left to hide behind: one block exposed. Only the attention core overlaps: the
//! projections run before and after the CP exchange.

use autoplan_cluster::GroupPlacement;
use autoplan_cost::Collective::{AllGather, AllToAll, ReduceScatter, SendRecv};
use autoplan_plan::{CpComm, Dim, Plan};

use super::classes::Class;
use super::compute::ACT;
use super::ctx::{hop, Ctx};
use super::emit::{Comm, Emitter, Hide};
use super::Evaluator;
use crate::comm::{CommKind, Pass, Sink};

impl Evaluator {
    /// The CP exchange of an attention class; `core_fwd` and `core_bwd` are the attention
    /// core's compute on this rank (what the ring's transfers hide behind).
    pub(super) fn cp_comm<S: Sink>(
        &self,
        plan: &Plan,
        c: &Class,
        x: &Ctx,
        e: &mut Emitter<'_, S>,
        core_fwd: f64,
        core_bwd: f64,
    ) {
        if x.cp <= 1.0 || c.cp_kv <= 0.0 {
            return;
        }
        // K/V heads per TP rank: GQA's kv heads are split over tp, replicated when tp > g.
        let kv_div = x.tp.min(self.kv_heads).max(1.0);
        // This rank's K/V block: its `s/cp` tokens' keys and values for its TP rank's heads.
        let blk = x.m_tok * c.cp_kv / kv_div * ACT;
        // Ulysses' all-to-alls: Q, K, V (sequence → heads) before the core, the output
        // (heads → sequence) after it; the same backward.
        let qkv = x.m_tok * (c.q_elems / x.tp + c.cp_kv / kv_div) * ACT;
        let o = x.m_tok * c.o_elems / x.tp * ACT;
        match plan.cp_comm {
            CpComm::Ring => ring(e, x.cp, x.hop_cp, blk, core_fwd, core_bwd),
            CpComm::AllToAll => ulysses(e, x.g_cp, qkv, o),
            CpComm::AllGather => {
                // TE's `all_gather` CP (`AttnFuncWithCPAndKVAllGather`): K/V all-gathered
                // before the core, not overlapped (frameworks.md §1.5); backward gathers them
                // again (only the local block is saved) and reduce-scatters dK/dV. Bytes are
                // the full gathered buffer, `cp` blocks.
                let full = blk * x.cp;
                let (f, b) = (Pass::Forward, Pass::Backward);
                let ag = |what, pass, op| Comm::new(CommKind::Cp, what, pass, op, x.g_cp, full);
                e.emit(ag("CP K/V all-gather", f, AllGather));
                e.emit(ag("CP K/V all-gather (backward)", b, AllGather));
                e.emit(ag("CP dK/dV reduce-scatter", b, ReduceScatter));
            }
            CpComm::Hierarchical { a2a } => {
                // Ulysses inside each group of `a2a` CP ranks, then a ring over the `cp/a2a`
                // groups: after the all-to-all a rank holds its group's `a2a·s/cp` tokens for
                // `1/a2a` of its heads, so its K/V block is as large as the ring's.
                let (inner, outer) = self.cp_levels(plan, a2a);
                ulysses(e, inner, qkv, o);
                let n = outer.size.max(1) as f64;
                ring(e, n, hop(outer), blk, core_fwd, core_bwd);
            }
        }
    }

    /// The placements of `a2a+p2p`'s two levels: the a2a groups are `a2a` consecutive CP
    /// ranks, the p2p ring joins one rank of each (Megatron-Core's hierarchical CP groups,
    /// first size innermost: `model_parallel_config.py @ core_v0.19.0:L103-110`).
    pub(super) fn cp_levels(&self, plan: &Plan, a2a: u32) -> (GroupPlacement, GroupPlacement) {
        let gpn = self.cluster.node.gpus_per_node.max(1);
        let cp = plan.cp.max(1);
        let a2a = a2a.clamp(1, cp);
        let mut deg = [1u32; 5];
        let (mut inner, mut outer) = ([false; 5], [false; 5]);
        let mut i = 0;
        for d in plan.order.0 {
            deg[i] = match d {
                Dim::Tp => plan.tp.max(1),
                Dim::Dp => plan.dp.max(1),
                Dim::Pp => plan.pp.max(1),
                Dim::Cp => {
                    inner[i] = true;
                    deg[i] = a2a;
                    i += 1;
                    outer[i] = true;
                    cp / a2a
                }
            };
            i += 1;
        }
        (
            GroupPlacement::of(gpn, &deg, &inner),
            GroupPlacement::of(gpn, &deg, &outer),
        )
    }
}

/// Ring attention over `n` ranks on `link`: `n−1` K/V transfers of `blk` bytes forward, each
/// behind one of the `n` equal steps of `core_fwd`; `n−1` K/V + dK/dV transfers backward behind
/// the steps of `core_bwd`; and the last dK/dV hop home, exposed (module docs).
fn ring<S: Sink>(
    e: &mut Emitter<'_, S>,
    n: f64,
    link: GroupPlacement,
    blk: f64,
    core_fwd: f64,
    core_bwd: f64,
) {
    if n <= 1.0 {
        return;
    }
    let (f, b) = (Pass::Forward, Pass::Backward);
    let p2p = |what, pass, bytes| Comm::new(CommKind::Cp, what, pass, SendRecv, link, bytes);
    let steps = n - 1.0;
    e.emit(
        p2p("ring attention K/V exchange", f, blk)
            .calls(steps)
            .hide(Hide::Behind(core_fwd / n)),
    );
    e.emit(
        p2p("ring attention K/V + dK/dV exchange", b, 2.0 * blk)
            .calls(steps)
            .hide(Hide::Behind(core_bwd / n)),
    );
    e.emit(p2p("ring attention dK/dV return (last step)", b, blk));
}

/// Ulysses over `group`: all-to-alls of Q/K/V (`qkv` bytes) and of the output (`o`), forward
/// and backward, not overlapped.
fn ulysses<S: Sink>(e: &mut Emitter<'_, S>, group: GroupPlacement, qkv: f64, o: f64) {
    let (f, b) = (Pass::Forward, Pass::Backward);
    let a2a = |what, pass, bytes| Comm::new(CommKind::Cp, what, pass, AllToAll, group, bytes);
    e.emit(a2a("Ulysses Q/K/V all-to-all", f, qkv));
    e.emit(a2a("Ulysses output all-to-all", f, o));
    e.emit(a2a("Ulysses output-grad all-to-all", b, o));
    e.emit(a2a("Ulysses Q/K/V-grad all-to-all", b, qkv));
}
