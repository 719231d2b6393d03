//! A synthetic [`Objective`] for tests and benches: a small closed-form cost model whose bounds
//! are admissible by construction, so the search can be checked (against exhaustive
//! enumeration, across thread counts) without the real evaluator.
//!
//! The formulas are deliberately simple but keep the structure of the real model: compute
//! divided over the GPUs at a GEMM efficiency that falls for thin shards, TP/CP/EP/DP
//! communication that depends on the group's placement (intra- or inter-node through the rank
//! order), a pipeline bubble per schedule, recompute overhead, and a memory peak with ZeRO
//! sharding, recompute and micro-batches in flight. Times are rounded *up* to a quantum so that
//! ties occur and the `(step time, key)` tie-break is exercised.

use autoplan_plan::{
    CpComm, Dim, Dispatcher, MoeTpScheme, Plan, Recompute, Schedule, TpSpTransition,
};

use crate::{Bound, Depth, Objective, Partial, Reject, Shape};

/// The synthetic model: sizes and rates in SI units.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Synthetic {
    pub shape: Shape,
    /// Training FLOPs per step (forward + backward, no recompute).
    pub flops: f64,
    /// Per-GPU dense peak, FLOP/s.
    pub peak: f64,
    /// Bytes per second inside a node and across nodes.
    pub intra_bw: f64,
    pub inter_bw: f64,
    /// Parameters (dense part, expert part).
    pub params: f64,
    pub expert_params: f64,
    /// Activation bytes per sequence per block without recompute.
    pub act_per_seq: f64,
    /// Bytes exchanged per sequence per block by TP / CP / EP collectives.
    pub comm_per_seq: f64,
    /// Step times are rounded up to a multiple of this (0: no rounding).
    pub quantum: f64,
}

/// Highest GEMM efficiency of the synthetic model (the admissible bound uses it).
const EFF_MAX: f64 = 0.8;

impl Synthetic {
    /// A 32-GPU, 8-per-node example with a MoE layer, as in the crate docs.
    pub fn example() -> Synthetic {
        Synthetic {
            shape: Shape {
                gpus: 32,
                gpus_per_node: 8,
                heads: 16,
                layers: 16,
                experts: 8,
                global_batch: 64,
                hbm_bytes: 40e9,
            },
            flops: 2e18,
            peak: 300e12,
            intra_bw: 200e9,
            inter_bw: 25e9,
            params: 8e9,
            expert_params: 16e9,
            act_per_seq: 0.4e9,
            comm_per_seq: 50e6,
            quantum: 1e-3,
        }
    }

    fn eff(&self, p: &Plan) -> f64 {
        // Thin shards (high tp, small micro-batches) run below the best efficiency.
        EFF_MAX / (1.0 + 0.05 * (p.tp as f64).log2() + 0.1 / p.mbs as f64)
    }

    fn recompute_factor(r: Recompute) -> f64 {
        match r {
            Recompute::None => 1.0,
            Recompute::Selective => 1.05,
            Recompute::Full => 4.0 / 3.0,
        }
    }

    /// The fraction of the pipeline bubble a schedule keeps (interleaved: 1/vpp).
    fn bubble_factor(s: Schedule, vpp: u32) -> f64 {
        match s {
            Schedule::OneF1B => 1.0,
            Schedule::Interleaved => 1.0 / vpp.max(1) as f64,
            Schedule::ZeroBubble => 1.0 / 3.0,
            Schedule::DualPipe => 0.5,
        }
    }

    /// Micro-batches in flight on the first stage, as a multiple of pp.
    fn in_flight_factor(s: Schedule, vpp: u32) -> f64 {
        match s {
            Schedule::OneF1B | Schedule::ZeroBubble => 1.0,
            Schedule::Interleaved => 1.0 + 1.0 / vpp.max(1) as f64,
            Schedule::DualPipe => 2.0,
        }
    }

    /// Are the ranks of `dim`'s group inside one node under the plan's rank order?
    fn intra(&self, p: &Plan, dim: Dim) -> bool {
        let deg = |d: Dim| match d {
            Dim::Tp => p.tp,
            Dim::Cp => p.cp,
            Dim::Dp => p.dp,
            Dim::Pp => p.pp,
        };
        let mut inner = 1u32;
        for &d in &p.order.0 {
            if d == dim {
                return inner * deg(d) <= self.shape.gpus_per_node;
            }
            inner *= deg(d);
        }
        false
    }

    fn bw(&self, intra: bool) -> f64 {
        if intra {
            self.intra_bw
        } else {
            self.inter_bw
        }
    }

    /// Peak bytes per GPU.
    pub fn memory(&self, p: &Plan) -> f64 {
        let (tp, pp, dp, cp) = (p.tp as f64, p.pp as f64, p.dp as f64, p.cp as f64);
        let epmt = (p.ep * p.moe_tp) as f64;
        let edp = p.edp().max(1) as f64;
        let dense = self.params / tp / pp;
        let expert = self.expert_params / epmt / pp;
        let extra = if p.tp_sp_transition == TpSpTransition::AllToAll && p.tp > 1 {
            0.1 * self.params / pp
        } else {
            0.0
        };
        let shard = |z: u8, n: f64| if p.zero.stage >= z { n } else { 1.0 };
        let weights = 2.0 * (dense / shard(3, dp * cp) + expert / shard(3, edp)) + extra;
        let grads = 4.0 * (dense / shard(2, dp * cp) + expert / shard(2, edp));
        let opt = 12.0 * (dense / shard(1, dp * cp) + expert / shard(1, edp));
        let rc = match p.recompute {
            Recompute::None => 1.0,
            Recompute::Selective => 0.6,
            Recompute::Full => 0.1,
        };
        let split = if p.sp { tp } else { 1.0 + (tp - 1.0) * 0.7 };
        let micro = (self.shape.global_batch / (p.mbs * p.dp)) as f64;
        let in_flight = (pp * Self::in_flight_factor(p.schedule, p.vpp)).min(micro.max(1.0));
        let blocks_per_stage = (self.shape.layers as f64 / pp).ceil();
        let act = self.act_per_seq * p.mbs as f64 * rc / split / cp * blocks_per_stage * in_flight;
        weights + grads + opt + act
    }

    fn time(&self, p: &Plan) -> f64 {
        let gpus = self.shape.gpus as f64;
        let micro = (self.shape.global_batch / (p.mbs * p.dp)) as f64;
        let compute =
            self.flops * Self::recompute_factor(p.recompute) / gpus / (self.peak * self.eff(p));
        let per_mb = compute / micro;
        let blocks = self.shape.layers as f64 / p.pp as f64;
        let seq = p.mbs as f64 / p.cp as f64;
        let mut comm = 0.0;
        if p.tp > 1 {
            let vol = match p.tp_sp_transition {
                TpSpTransition::AllReduceSlice => 1.0,
                TpSpTransition::AllToAll => 0.7,
            } * if p.sp { 1.0 } else { 1.1 };
            let t = vol * self.comm_per_seq * seq * blocks / self.bw(self.intra(p, Dim::Tp));
            comm += if p.tp_overlap { 0.4 * t } else { t };
        }
        if p.cp > 1 {
            let t = self.comm_per_seq * seq * blocks / self.bw(self.intra(p, Dim::Cp));
            comm += match p.cp_comm {
                CpComm::Ring => 0.5 * t,
                CpComm::AllToAll => 0.6 * t * (p.cp as f64).log2(),
                CpComm::AllGather => 0.8 * t,
                CpComm::Hierarchical { a2a } => 0.55 * t * (a2a as f64).log2(),
            };
        }
        if self.shape.experts > 0 && p.ep * p.moe_tp > 1 {
            let intra = p.ep * p.moe_tp <= self.shape.gpus_per_node;
            let mut t = 2.0 * self.comm_per_seq * seq * blocks / self.bw(intra);
            t *= match p.dispatcher {
                Dispatcher::AllToAll => 1.0,
                Dispatcher::DeepEp => 0.8,
                Dispatcher::AllGather => 0.3 * p.ep as f64,
            };
            t *= match p.moe_tp_scheme {
                MoeTpScheme::ScatterGather => 1.2,
                MoeTpScheme::GroupAllToAll => 1.0,
            };
            comm += if p.ep_overlap { 0.5 * t } else { t };
        }
        // Compute is already per GPU (divided over all of them, pp included).
        let stage = per_mb + comm;
        let bubble = Self::bubble_factor(p.schedule, p.vpp) * (p.pp as f64 - 1.0) * stage;
        let grad_bytes = 4.0 * (self.params + self.expert_params / (p.ep * p.moe_tp) as f64)
            / (p.tp * p.pp) as f64;
        let dp_comm = if p.dp * p.cp > 1 {
            let t = grad_bytes / self.bw(self.intra(p, Dim::Dp));
            0.2 * t * if p.zero.stage >= 3 { 1.5 } else { 1.0 }
        } else {
            0.0
        };
        let step = micro * stage + bubble + dp_comm;
        if self.quantum > 0.0 {
            (step / self.quantum).ceil() * self.quantum
        } else {
            step
        }
    }

    fn valid(&self, p: &Plan) -> bool {
        let s = &self.shape;
        p.gpus() == s.gpus as u64
            && s.heads.is_multiple_of(p.tp)
            && p.pp <= s.layers
            && s.global_batch.is_multiple_of(p.mbs * p.dp)
            && (p.tp * p.cp * p.dp).is_multiple_of(p.ep * p.moe_tp)
            && (s.experts == 0 && p.ep == 1 && p.moe_tp == 1
                || s.experts > 0 && s.experts.is_multiple_of(p.ep))
    }
}

impl Objective for Synthetic {
    /// (step time, peak memory).
    type Metrics = (f64, f64);

    fn shape(&self) -> Shape {
        self.shape
    }

    fn evaluate(&self, plan: &Plan) -> Result<(f64, f64), Reject> {
        if !self.valid(plan) {
            return Err(Reject::Invalid);
        }
        let m = self.memory(plan);
        if m > self.shape.hbm_bytes {
            return Err(Reject::OutOfMemory {
                peak_bytes: m,
                hbm_bytes: self.shape.hbm_bytes,
            });
        }
        Ok((self.time(plan), m))
    }

    fn step_time(m: &(f64, f64)) -> f64 {
        m.0
    }

    /// Time: the compute alone at the best efficiency (recompute counted once fixed). Memory:
    /// the plan with every undecided memory knob at its most saving value in the space (the
    /// memory model is monotone in each), minimised over the undecided schedules.
    fn bound(&self, partial: &Partial<'_>) -> Bound {
        let p = partial.plan;
        let s = partial.space;
        let gpus = self.shape.gpus as f64;
        let rc = if partial.depth >= Depth::Recompute {
            Self::recompute_factor(p.recompute)
        } else {
            1.0
        };
        let time = self.flops * rc / gpus / (self.peak * EFF_MAX);
        let mut q = p;
        if partial.depth < Depth::Recompute {
            q.recompute = s.recompute.iter().map(|r| r.0).max().unwrap_or(p.recompute);
        }
        if partial.depth < Depth::Zero {
            q.zero = *s.zero.iter().max().unwrap_or(&p.zero);
        }
        q.sp = true;
        q.tp_sp_transition = TpSpTransition::AllReduceSlice;
        let mut mem = f64::INFINITY;
        if partial.depth < Depth::Schedule {
            for &sch in &s.schedule {
                let vpps: &[u32] = if sch == Schedule::Interleaved {
                    &s.vpp
                } else {
                    &[1]
                };
                for &v in vpps {
                    q.schedule = sch;
                    q.vpp = v;
                    mem = mem.min(self.memory(&q));
                }
            }
        } else {
            mem = self.memory(&q);
        }
        Bound {
            step_time_s: time,
            memory_bytes: if mem.is_finite() { mem } else { 0.0 },
        }
    }
}
