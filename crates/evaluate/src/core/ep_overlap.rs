//! How much of the EP dispatch and combine the schedule hides (`ep_overlap`), and what hiding
//! it costs the compute it hides behind.
//!
//! Both schedules that overlap EP communication pair two micro-batches and interleave their
//! layers sub-module by sub-module: DualPipe's "F&B" chunk (DeepSeek-V3 report §3.2.1, Figure
//! 4: attention, dispatch, MLP, combine of a forward beside those of a backward) and
//! Megatron-Core's `--overlap-moe-expert-parallel-comm` in the steady phase of 1F1B
//! (frameworks.md §1.6, "EP A2A overlap"; `megatron/core/models/common/
//! model_chunk_schedule_plan.py` @ core_v0.14.0, `TransformerLayerSchedulePlan.run`: the
//! forward attention beside the backward combine, the backward MLP beside the forward
//! dispatch, the forward MLP beside the backward dispatch, the backward attention beside the
//! forward combine). Each transfer therefore hides only behind the one sub-module of the other
//! micro-batch that runs beside it, and a phase lasts the longer of the two:
//!
//! | transfer (table order) | hides behind |
//! |---|---|
//! | dispatch (forward) | the MoE layer's backward |
//! | combine (forward) | the attention's backward |
//! | combine-grad (backward) | the attention's forward |
//! | dispatch-grad (backward) | the MoE layer's forward |
//!
//! Where a phase holds two transfers (EP and `moe_tp`), they share its window equally.
//!
//! Only the steady phase pairs a forward with a backward; the warm-up's forwards and the
//! cool-down's backwards run alone, their transfers exposed. Per rank the paired share of the
//! `m·v` chunk passes ([`paired_share`], the rank with the fewest):
//! - Megatron-Core (combined 1F1B): interleaved warm-up `(pp − 1)·2 + (v − 1)·pp` on rank 0
//!   plus the one extra micro-batch combined 1F1B adds (frameworks.md §1.2, "Warm-up length",
//!   `schedules.py:L902-960`, `L935-941`); plain 1F1B `pp − 1` + 1; no pipeline: the forward
//!   of micro-batch i+1 beside the backward of i, so the first forward alone;
//! - DualPipe: rank `r`'s overlapped F&B chunks are `2(m/2 − pp + r + 1) + (pp/2 − r − 1)` of
//!   its `m` forwards (`dualpipe.py`'s main step and step 5, as `autoplan-report`'s timeline
//!   encodes them), fewest on rank 0: `m − 1.5·pp + 1`.
//!
//! The transfers run as kernels on SMs the GEMMs then do without: DeepSeek-V3's dispatch and
//! combine kernels take 20 of the H800's 132 SMs (report §3.2.2, "only 20 SMs are sufficient
//! to fully utilise the bandwidths of IB and NVLink"; DeepEP's `Buffer.num_sms = 20` and
//! Megatron-Core's `moe_deepep_num_sms = 20` default). How the compute loses them depends on
//! the schedule:
//! - Megatron-Core launches the transfer and the other micro-batch's kernels on two streams;
//!   the transfer holds its SMs only while it runs, so the compute beside it progresses at
//!   `1 − 20/SMs` of its rate for `min(t, window)` ([`super::emit::Hide::Shared`]);
//! - DeepSeek's DualPipe *allocates* the SMs to communication ("we allocate 20 out of the 132
//!   SMs available in the H800 GPU for this purpose, which will limit the computational
//!   throughput", report §3.5.1), so the overlapped compute runs on the other 112 for the whole
//!   phase ([`super::emit::Hide::Partitioned`]).
//!
//! NCCL's all-to-all also runs one CTA per channel, and across nodes it opens about as many
//! channels (collectives.md, graph search: SM90 intra-node channel counts up to 24), so the
//! same share is charged for every dispatcher.

use autoplan_plan::{Plan, Schedule};

use super::emit::Hide;
use super::Evaluator;

/// SMs the EP dispatch/combine kernels occupy while they overlap compute (module docs).
pub(super) const EP_COMM_SMS: f64 = 20.0;

/// The hide rules of a layer's four EP transfers, in the order every dispatcher's table
/// lists them (dispatch, combine, combine-grad, dispatch-grad).
#[derive(Debug, Clone, Copy)]
pub(super) struct EpHide([Hide; 4]);

impl EpHide {
    /// Nothing hidden (no overlap: the transfers run alone on the GPU).
    pub(super) const NONE: EpHide = EpHide([Hide::Nothing; 4]);

    /// The hide rule of transfer `i` (table order).
    #[inline]
    pub(super) fn at(self, i: usize) -> Hide {
        self.0[i.min(3)]
    }
}

/// The compute of one layer's sub-modules on one micro-batch, which the other micro-batch's
/// transfers hide behind.
#[derive(Debug, Clone, Copy)]
pub(super) struct EpWindows {
    pub(super) attn_fwd: f64,
    pub(super) attn_bwd: f64,
    pub(super) moe_fwd: f64,
    pub(super) moe_bwd: f64,
}

impl Evaluator {
    /// The SMs' share the EP transfers take from the compute they overlap (module docs).
    #[inline]
    pub(super) fn ep_overlap_sm_share(&self) -> f64 {
        (EP_COMM_SMS / f64::from(self.eff.sms.max(1))).min(1.0)
    }

    /// The hide rules of a layer's EP transfers under `plan` with `paired` of its chunk passes
    /// paired ([`paired_share`]; module docs' table); `per_phase` transfers (EP, `moe_tp`)
    /// share each window.
    #[inline]
    pub(super) fn ep_hide(&self, plan: &Plan, paired: f64, w: EpWindows, per_phase: f64) -> EpHide {
        if !plan.ep_overlap || per_phase <= 0.0 {
            return EpHide::NONE;
        }
        let share = self.ep_overlap_sm_share();
        let partitioned = plan.schedule == Schedule::DualPipe;
        let rule = |window: f64| {
            let window = window / per_phase;
            if partitioned {
                Hide::Partitioned {
                    window,
                    share,
                    paired,
                }
            } else {
                Hide::Shared {
                    window,
                    share,
                    paired,
                }
            }
        };
        EpHide([
            rule(w.moe_bwd),
            rule(w.attn_bwd),
            rule(w.attn_fwd),
            rule(w.moe_fwd),
        ])
    }
}

/// The share of a rank's chunk passes that run paired with one of the other pass under
/// `plan`'s schedule with `micro` micro-batches (module docs), in [0, 1].
pub(super) fn paired_share(plan: &Plan, micro: f64) -> f64 {
    let m = micro.max(1.0);
    let pp = f64::from(plan.pp.max(1));
    let v = f64::from(plan.vpp.max(1));
    let (paired, passes) = if plan.pp <= 1 {
        (m - 1.0, m)
    } else {
        match plan.schedule {
            Schedule::DualPipe => (m - 1.5 * pp + 1.0, m),
            Schedule::Interleaved => (m * v - ((pp - 1.0) * 2.0 + (v - 1.0) * pp + 1.0), m * v),
            Schedule::OneF1B | Schedule::ZeroBubble => (m - pp, m),
        }
    };
    (paired / passes).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::paired_share;
    use autoplan_plan::{Plan, Schedule};

    fn plan(schedule: Schedule, pp: u32, vpp: u32) -> Plan {
        Plan {
            pp,
            vpp,
            schedule,
            ..Plan::default()
        }
    }

    #[test]
    fn the_steady_phase_share_follows_the_schedules_warm_up() {
        // ModelZoo's Qwen3-235B: pp 8, vpp 4, 128 micro-batches: 512 chunk passes, a warm-up of
        // 14 + 24 + 1.
        let q = paired_share(&plan(Schedule::Interleaved, 8, 4), 128.0);
        assert!((q - (512.0 - 39.0) / 512.0).abs() < 1e-12);
        // DeepSeek-V3: pp 16, 120 micro-batches: rank 0 overlaps 97 of its 120 forwards.
        let d = paired_share(&plan(Schedule::DualPipe, 16, 1), 120.0);
        assert!((d - 97.0 / 120.0).abs() < 1e-12);
        // More micro-batches, a larger steady share; no pipeline pairs all but the first.
        assert!(paired_share(&plan(Schedule::Interleaved, 8, 4), 256.0) > q);
        assert!((paired_share(&plan(Schedule::OneF1B, 1, 1), 8.0) - 7.0 / 8.0).abs() < 1e-12);
        // Too few micro-batches for a steady phase: nothing paired, never negative.
        assert_eq!(paired_share(&plan(Schedule::DualPipe, 16, 1), 16.0), 0.0);
    }
}
