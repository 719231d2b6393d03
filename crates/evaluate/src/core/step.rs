//! The step: `run` composes the parts — class costs, stages, bubble, DP reduction, optimizer —
//! into the step time, its breakdown and the metrics.

use autoplan_plan::{Plan, Recompute, StageLayout};

use super::ctx::Ctx;
use super::dp::DpExposed;
use super::pipeline::{StageScan, StageTime};
use super::recompute::rc_frac;
use super::Evaluator;
use crate::comm::{CommKind, Sink};
use crate::{Infeasible, Metrics, StepBreakdown};

/// What `run` returns beside the metrics (the report's figures).
pub(super) struct Outcome {
    pub(super) metrics: Metrics,
    pub(super) breakdown: StepBreakdown,
    pub(super) micro: u32,
    pub(super) bottleneck: u32,
}

/// What follows the pipeline in a step: the exposed DP reduction and ZeRO gathers, and the
/// optimizer step.
#[derive(Debug, Clone, Copy)]
pub(super) struct AfterPipeline {
    pub(super) dp: DpExposed,
    pub(super) optimizer: f64,
}

impl Evaluator {
    /// The step of `plan`: checks, memory, then the parts composed; the table's rows go to
    /// `sink`.
    pub(super) fn run<S: Sink>(&self, plan: &Plan, sink: &mut S) -> Result<Outcome, Infeasible> {
        let (layout, peak) = self.admit(plan)?;
        let x = self.ctx(plan);
        let scan = self.scan(plan, &x, &layout);
        let micro = x.micro;
        let bubble = plan
            .schedule
            .bubble_of(scan.sum, scan.tmax, plan.vpp, x.pp, micro);
        // Data-parallel gradient reduction on the stage holding the most parameters.
        let mut rest = self.after_pipeline(plan, &x, &scan.pmax, sink, micro);
        // Optimizer offload: the GPU steps its share, the host the rest (`offload.rs`).
        let offload = self.offload(plan, &x, &scan.pmax);
        if let Some(o) = offload {
            rest.optimizer = o.gpu_optimizer;
        }
        // Parameter and activation offload: the host-link transfers of every micro-batch
        // (`offload.rs`), the activations' on the bottleneck stage.
        let offload_s = offload.map_or(0.0, |o| o.offload)
            + micro
                * (self.param_offload_per_mb(plan, &x, &scan.pmax)
                    + self.activation_offload_per_mb(plan, scan.bi, &scan.bottleneck));
        let pipeline = micro * (scan.tmax + rest.dp.per_mb) + bubble;
        let step = pipeline + rest.dp.step + rest.optimizer + offload_s;
        if S::ENABLED {
            // The per-layer table of the bottleneck stage, and pipeline rows.
            self.class_costs(plan, &x, sink, micro, scan.bi);
            let pp_exposed = scan.bottleneck.exposed[CommKind::Pp.index()];
            self.pipeline_rows(&x, sink, micro, pp_exposed);
        }
        let mut bd = breakdown(step - offload_s, micro, &scan.bottleneck, bubble, &rest);
        bd.offload_s = offload_s;
        let metrics = self.metrics(plan, step, &bd, &scan, peak);
        Ok(Outcome {
            metrics,
            breakdown: bd,
            micro: micro as u32,
            bottleneck: scan.bi,
        })
    }

    /// The validity checks and the memory peak: a plan over HBM is rejected with its peak,
    /// which needs no step time.
    fn admit(&self, plan: &Plan) -> Result<(StageLayout, f64), Infeasible> {
        self.check(plan)?;
        let layout = self.layout(plan)?;
        let m = self.memory(plan);
        let peak = m.total;
        if peak > self.gpu.hbm_bytes {
            return Err(Infeasible::OutOfMemory {
                peak_bytes: peak,
                hbm_bytes: self.gpu.hbm_bytes,
            });
        }
        self.check_host(plan, &m)?;
        Ok((layout, peak))
    }

    /// The DP reduction, ZeRO gathers and optimizer step of the stage `pmax` holding the most
    /// parameters under `plan`'s ZeRO stage and groups.
    #[inline]
    pub(super) fn after_pipeline<S: Sink>(
        &self,
        plan: &Plan,
        x: &Ctx,
        pmax: &StageTime,
        sink: &mut S,
        micro: f64,
    ) -> AfterPipeline {
        AfterPipeline {
            dp: {
                let mut dp = self.dp_comm(plan, x, pmax, sink, micro);
                dp.step += self.replica_sync(plan, x, pmax, sink);
                dp
            },
            optimizer: self.optimizer_time(plan.zero, x, pmax),
        }
    }

    /// The figures of merit of a step of `step` seconds.
    fn metrics(
        &self,
        plan: &Plan,
        step: f64,
        bd: &StepBreakdown,
        scan: &StageScan,
        peak: f64,
    ) -> Metrics {
        let tokens = self.global_batch as f64 * self.seq;
        let gpus = plan.gpus() as f64;
        let conv = self.opts.flops;
        let model_flops = tokens * self.flops.model_per_token(conv);
        let rc_frac = rc_frac(plan, scan.bottleneck.blocks.max(1));
        let hw_flops = model_flops
            + tokens
                * match plan.recompute {
                    Recompute::Full => self.flops.full_recompute_per_token(rc_frac, conv),
                    Recompute::Selective => self.flops.selective_recompute_per_token(
                        plan.recompute_modules,
                        rc_frac,
                        conv,
                    ),
                    Recompute::None => 0.0,
                };
        let tflops = model_flops / step / gpus;
        let hw = hw_flops / step / gpus;
        let exposed = [
            bd.tp_exposed_s,
            bd.cp_exposed_s,
            bd.ep_exposed_s,
            bd.pp_exposed_s,
            bd.dp_exposed_s,
        ];
        let mut dominant = CommKind::None;
        let mut dmax = 0.0;
        for (k, v) in CommKind::ALL.iter().zip(exposed.iter()) {
            if *v > dmax {
                dmax = *v;
                dominant = *k;
            }
        }
        Metrics {
            step_time_s: step,
            tokens_per_s: tokens / step,
            tokens_per_s_per_gpu: tokens / step / gpus,
            mfu: tflops / self.peak,
            hfu: hw / self.peak,
            tflops_per_gpu: tflops / 1e12,
            hw_tflops_per_gpu: hw / 1e12,
            memory_peak_bytes: peak,
            dominant_comm: dominant,
            exposed_comm_s: exposed.iter().sum(),
            bubble_s: bd.bubble_s,
        }
    }
}

/// Where the step's `step` seconds go: the busiest stage `b`'s parts over `micro`
/// micro-batches, the bubble, the DP reduction and the optimizer.
fn breakdown(
    step: f64,
    micro: f64,
    b: &StageTime,
    bubble: f64,
    rest: &AfterPipeline,
) -> StepBreakdown {
    let mut bd = StepBreakdown {
        compute_s: micro * b.compute,
        recompute_s: micro * b.recompute,
        tp_exposed_s: micro * b.exposed[0],
        cp_exposed_s: micro * b.exposed[1],
        ep_exposed_s: micro * b.exposed[2],
        pp_exposed_s: micro * b.exposed[3],
        dp_exposed_s: micro * b.exposed[4] + rest.dp.step + micro * rest.dp.per_mb,
        bubble_s: bubble,
        optimizer_s: rest.optimizer,
        offload_s: 0.0,
    };
    // Rounding guard: the parts sum to the step.
    let drift = step - bd.total();
    bd.compute_s += drift;
    bd
}
