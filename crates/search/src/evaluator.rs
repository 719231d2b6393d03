//! [`Objective`] for the real cost model, `autoplan_evaluate::Evaluator`.
//!
//! Bounds (all admissible, checked by `tests/bounds.rs` against `evaluate` on random plans):
//! - step time: `Evaluator::lower_bound` — the model FLOPs (plus the fixed recompute) at the
//!   highest GEMM efficiency over all GPUs — stretched by the pipeline bubble that every
//!   completion pays: with the stage times `t_i`, `t_max ≥ Σt_i / pp`, the evaluator's step is at
//!   least `m·t_max + f·(Σt_i − t_max) ≥ Σt_i·(m + f·(pp−1)) / pp` for the schedule's bubble
//!   fraction `f` (1F1B 1, interleaved 1/vpp, ZB-H1 1/3, DualPipe (p−2)/(3(p−1)), evaluate's
//!   `run`), `m` micro-batches, and `Σt_i ≥ compute bound · pp / m`; the smallest `f` of the
//!   schedules still open is used;
//! - memory: the peak of the completion with every undecided memory knob at its most saving
//!   value in the space (full recompute, the highest ZeRO stage, SP on, the all-reduce TP→SP
//!   transition), minimised over the open schedules — the memory model grows with none of them.

use autoplan_evaluate::{Evaluator, Infeasible, Metrics, Partial as EvalPartial};
use autoplan_plan::{Plan, Recompute, Schedule, TpSpTransition};

use crate::{Bound, Depth, Objective, Partial, Reject, Shape};

/// The bubble fraction `f` of a schedule (see the module docs).
fn bubble_fraction(s: Schedule, vpp: u32, pp: u32) -> f64 {
    match s {
        Schedule::OneF1B => 1.0,
        Schedule::Interleaved => 1.0 / vpp.max(1) as f64,
        Schedule::ZeroBubble => 1.0 / 3.0,
        Schedule::DualPipe => {
            let p = pp as f64;
            if p > 2.0 {
                (p - 2.0) / (3.0 * (p - 1.0))
            } else {
                0.0
            }
        }
    }
}

/// The peak memory of `plan`, however the evaluator judges it (None: invalid, no information).
fn peak(ev: &Evaluator, plan: &Plan) -> Option<f64> {
    match ev.evaluate(plan) {
        Ok(m) => Some(m.memory_peak_bytes),
        Err(Infeasible::OutOfMemory { peak_bytes, .. }) => Some(peak_bytes),
        Err(Infeasible::Invalid(_)) => None,
    }
}

impl Objective for Evaluator {
    type Metrics = Metrics;

    fn shape(&self) -> Shape {
        let m = self.model();
        let c = self.cluster();
        Shape {
            gpus: c.gpus(),
            gpus_per_node: c.node.gpus_per_node,
            heads: m.heads,
            layers: m.layers,
            experts: m.moe.as_ref().map_or(0, |x| x.experts),
            global_batch: m.training.global_batch,
            hbm_bytes: c.gpu.hbm_bytes,
        }
    }

    fn evaluate(&self, plan: &Plan) -> Result<Metrics, Reject> {
        Evaluator::evaluate(self, plan).map_err(|e| match e {
            Infeasible::Invalid(_) => Reject::Invalid,
            Infeasible::OutOfMemory {
                peak_bytes,
                hbm_bytes,
            } => Reject::OutOfMemory {
                peak_bytes,
                hbm_bytes,
            },
        })
    }

    fn step_time(m: &Metrics) -> f64 {
        m.step_time_s
    }

    fn bound(&self, partial: &Partial<'_>) -> Bound {
        let p = partial.plan;
        let s = partial.space;
        let rc_fixed = partial.depth >= Depth::Recompute;
        let compute = self.lower_bound(&EvalPartial {
            tp: Some(p.tp),
            pp: Some(p.pp),
            recompute: rc_fixed.then_some(p.recompute),
        });
        let micro = (self.model().training.global_batch / (p.mbs * p.dp).max(1)).max(1) as f64;
        // The schedules still open at this depth.
        let open = |f: &mut dyn FnMut(Schedule, u32)| {
            if partial.depth >= Depth::Schedule || p.pp == 1 {
                f(p.schedule, p.vpp);
            } else {
                for &sch in &s.schedule {
                    if sch == Schedule::Interleaved {
                        for &v in &s.vpp {
                            f(sch, v);
                        }
                    } else {
                        f(sch, 1);
                    }
                }
            }
        };
        let mut frac = f64::INFINITY;
        open(&mut |sch, v| frac = frac.min(bubble_fraction(sch, v, p.pp)));
        let bubble = if p.pp > 1 && frac.is_finite() {
            (micro + frac * (p.pp - 1) as f64) / micro
        } else {
            1.0
        };
        let mut q = p;
        if !rc_fixed {
            q.recompute = s.recompute.iter().copied().max().unwrap_or(Recompute::Full);
        }
        if partial.depth < Depth::Zero {
            q.zero = s.zero.iter().copied().max().unwrap_or(p.zero);
        }
        q.sp = true;
        q.tp_sp_transition = TpSpTransition::AllReduceSlice;
        let mut mem = f64::INFINITY;
        let mut unknown = false;
        open(&mut |sch, v| {
            q.schedule = sch;
            q.vpp = v;
            match peak(self, &q) {
                Some(m) => mem = mem.min(m),
                None => unknown = true,
            }
        });
        Bound {
            step_time_s: compute * bubble,
            memory_bytes: if unknown || !mem.is_finite() {
                0.0
            } else {
                mem
            },
        }
    }
}
