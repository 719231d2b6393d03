//! Context parallelism: the attention's K/V exchange over the CP group (ring attention's
//! send/recv steps, or Ulysses' all-to-alls).

use autoplan_cost::Collective::{AllToAll, SendRecv};
use autoplan_plan::{CpComm, Plan};

use super::classes::Class;
use super::compute::ACT;
use super::ctx::Ctx;
use super::emit::{Comm, Emitter, Hide};
use super::Evaluator;
use crate::comm::{CommKind, Pass, Sink};

impl Evaluator {
    /// The CP exchange of an attention class, `attn_fwd` and `attn_bwd` the attention class's
    /// compute (what the ring's transfers hide behind).
    pub(super) fn cp_comm<S: Sink>(
        &self,
        plan: &Plan,
        c: &Class,
        x: &Ctx,
        e: &mut Emitter<'_, S>,
        attn_fwd: f64,
        attn_bwd: f64,
    ) {
        if x.cp <= 1.0 || c.cp_kv <= 0.0 {
            return;
        }
        // K/V heads per TP rank: GQA's kv heads are split over tp, replicated when tp > g.
        let kv_div = x.tp.min(self.kv_heads).max(1.0);
        let (f, b) = (Pass::Forward, Pass::Backward);
        match plan.cp_comm {
            CpComm::Ring => {
                // Ring attention (Megatron CP): cp−1 steps, each passing this rank's K/V block
                // to the next rank while attention runs on the block in hand; backward passes
                // K/V and their gradients (2×). Exposed: what a step's transfer exceeds one
                // block's attention time (cp blocks per pass).
                let blk = x.m_tok * c.cp_kv / kv_div * ACT;
                let steps = x.cp - 1.0;
                let (wf, wb) = (attn_fwd / x.cp, attn_bwd / x.cp);
                let ring = |what, pass, bytes, window| {
                    Comm::new(CommKind::Cp, what, pass, SendRecv, x.hop_cp, bytes)
                        .calls(steps)
                        .hide(Hide::Behind(window))
                };
                e.emit(ring("ring attention K/V exchange", f, blk, wf));
                e.emit(ring(
                    "ring attention K/V + dK/dV exchange",
                    b,
                    2.0 * blk,
                    wb,
                ));
            }
            CpComm::AllToAll => {
                // Ulysses: all-to-all of Q, K, V (sequence → heads) before the core and of the
                // output (heads → sequence) after it; the same backward.
                let qkv = x.m_tok * (c.q_elems / x.tp + c.cp_kv / kv_div) * ACT;
                let o = x.m_tok * c.o_elems / x.tp * ACT;
                let a2a = |what, pass, bytes| {
                    Comm::new(CommKind::Cp, what, pass, AllToAll, x.g_cp, bytes)
                };
                e.emit(a2a("Ulysses Q/K/V all-to-all", f, qkv));
                e.emit(a2a("Ulysses output all-to-all", f, o));
                e.emit(a2a("Ulysses output-grad all-to-all", b, o));
                e.emit(a2a("Ulysses Q/K/V-grad all-to-all", b, qkv));
            }
        }
    }
}
