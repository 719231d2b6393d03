//! Pipeline parallelism: where the blocks go, what each stage costs per micro-batch, the
//! busiest stage that sets the pace, and the activation send/recv between stages.

use std::cell::RefCell;

use autoplan_cost::{Algorithm, Collective};
use autoplan_plan::{Plan, Recompute, StageLayout};

use super::classes::{ClassId, NCLASS};
use super::compute::ACT;
use super::costs::ClassCost;
use super::ctx::{cached, Ctx, PlanKey, Slots};
use super::emit::Comm;
use super::recompute::rc_frac;
use super::Evaluator;
use crate::comm::{CommKind, Pass, Sink};

/// Where the layers go and what each stage costs.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct StageTime {
    pub(super) t: f64,
    pub(super) compute: f64,
    pub(super) recompute: f64,
    pub(super) exposed: [f64; 5],
    pub(super) blocks: u32,
    pub(super) dense: u32,
    pub(super) moe: u32,
    pub(super) params_dense: f64,
    pub(super) params_expert: f64,
    pub(super) fwd: f64,
    pub(super) bwd: f64,
    /// Scale-out network seconds per micro-batch beside the forward and backward compute
    /// (the classes' `ClassCost::net`): what a DP collective hidden in that pass competes with.
    pub(super) net_fwd: f64,
    pub(super) net_bwd: f64,
}

/// All stages of a plan: the busiest (`bottleneck`, index `bi`, time `tmax`), the sum of the
/// stage times and the stage holding the most parameters (`pmax`, the DP reduction's).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct StageScan {
    pub(super) tmax: f64,
    pub(super) sum: f64,
    pub(super) bottleneck: StageTime,
    pub(super) bi: u32,
    pub(super) pmax: StageTime,
}

impl Evaluator {
    /// Blocks on stage `i` whose first block is `start`: (total, dense, moe). The layout is
    /// `Plan::stage_blocks` (autoplan-plan); dense blocks are the model's first `dense_blocks`.
    #[inline]
    pub(super) fn stage_blocks(&self, layout: &StageLayout, i: u32, start: u32) -> (u32, u32, u32) {
        let n = layout.blocks(i);
        let end = start + n;
        let dense = self
            .dense_blocks
            .min(end)
            .saturating_sub(start.min(self.dense_blocks));
        (n, dense, n.saturating_sub(dense))
    }

    /// How many layers of each class a stage holds: the embedding on the first stage, the
    /// blocks `(n, dense, moe)`, the final norm, head, cross-entropy and MTP modules on the
    /// last.
    #[inline]
    pub(super) fn class_counts(
        &self,
        first: bool,
        last: bool,
        (n, dense, moe): (u32, u32, u32),
    ) -> [f64; NCLASS] {
        let mut counts = [0.0; NCLASS];
        counts[ClassId::Emb as usize] = f64::from(u8::from(first));
        counts[ClassId::Attn as usize] = n as f64;
        counts[ClassId::Mlp as usize] = dense as f64;
        counts[ClassId::Moe as usize] = moe as f64;
        counts[ClassId::Norm as usize] = f64::from(u8::from(last));
        counts[ClassId::Head as usize] = counts[ClassId::Norm as usize];
        counts[ClassId::Ce as usize] = counts[ClassId::Norm as usize];
        counts[ClassId::Mtp as usize] = if last { self.mtp as f64 } else { 0.0 };
        counts
    }

    /// Stage `i` (first block `start`) of one micro-batch from the class costs `c` and the
    /// pipeline hop's `pp_t` seconds.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(super) fn stage(
        &self,
        plan: &Plan,
        x: &Ctx,
        c: &[ClassCost; NCLASS],
        layout: &StageLayout,
        i: u32,
        start: u32,
        pp_t: f64,
    ) -> StageTime {
        let (n, dense, moe) = self.stage_blocks(layout, i, start);
        let counts = self.class_counts(i == 0, i + 1 == x.pp, (n, dense, moe));
        let rc_frac = rc_frac(plan, n);
        let mut s = StageTime {
            blocks: n,
            dense,
            moe,
            ..StageTime::default()
        };
        for id in ClassId::ALL {
            let (k, cc) = (id as usize, &c[id as usize]);
            let w = counts[k];
            if w == 0.0 {
                continue;
            }
            s.fwd += w * cc.fwd;
            s.bwd += w * cc.bwd;
            s.net_fwd += w * cc.net[0];
            s.net_bwd += w * cc.net[1];
            s.compute += w * (cc.fwd + cc.bwd);
            if id.is_block() {
                match plan.recompute {
                    Recompute::Full => s.recompute += w * rc_frac * cc.rc_full,
                    Recompute::Selective => s.recompute += w * rc_frac * cc.rc_sel,
                    Recompute::None => {}
                }
                let kinds = Self::recompute_comm(plan, id);
                for (j, v) in cc.rc_comm.iter().enumerate() {
                    if kinds >> j & 1 == 1 {
                        s.exposed[j] += w * rc_frac * v;
                    }
                }
            }
            for (e, v) in s.exposed.iter_mut().zip(cc.exposed.iter()) {
                *e += w * v;
            }
            let cl = &self.classes[k];
            s.params_dense += w * cl.non_expert_params;
            s.params_expert += w * cl.expert_params;
        }
        s.params_dense /= x.tp;
        s.params_expert /= x.ep * x.mt;
        if x.replicas > 0.0 && self.experts > 0.0 {
            // Redundant copies are trained experts too (seed 004 §4's virtual experts): their
            // gradients join the EDP reduction and their state the optimizer step.
            s.params_expert *= 1.0 + x.replicas * x.ep / self.experts;
        }
        s.exposed[CommKind::Pp.index()] +=
            hop_exposed(super::dualpipe::paired(plan, x.pp), pp_t, s.compute);
        s.t = s.compute + s.recompute + s.exposed.iter().sum::<f64>();
        s
    }

    /// Every stage of `layout` in order: the busiest, the sum, the one with the most
    /// parameters. Middle stages with the same block mix cost the same: the previous one is
    /// reused. `run` and the step floor both scan with it.
    #[inline]
    pub(super) fn scan_stages(
        &self,
        plan: &Plan,
        x: &Ctx,
        costs: &[ClassCost; NCLASS],
        layout: &StageLayout,
        pp_t: f64,
    ) -> StageScan {
        let mut out = StageScan::default();
        let mut start = 0;
        // The stage last priced, and whether it was a middle one (the next middle stage with
        // its block mix reuses it in place: no copy, and the stages already kept).
        let mut s = StageTime::default();
        let mut after_middle = false;
        let dual = super::dualpipe::paired(plan, x.pp);
        let mut seen = Stages::default();
        for i in 0..x.pp {
            let (n, dense, _) = self.stage_blocks(layout, i, start);
            let middle = i > 0 && i + 1 < x.pp;
            if !(after_middle && middle && s.blocks == n && s.dense == dense) {
                s = self.stage(plan, x, costs, layout, i, start, pp_t);
                if dual {
                    seen.keep(Stages::key(i, x.pp, n, dense), s);
                }
            }
            after_middle = middle;
            start += s.blocks;
            out.sum += s.t;
            if s.t > out.tmax {
                out.tmax = s.t;
                out.bottleneck = s;
                out.bi = i;
            }
            if s.params_dense + s.params_expert > out.pmax.params_dense + out.pmax.params_expert {
                out.pmax = s;
            }
        }
        if dual {
            // DualPipe's pace is its ranks', each holding two stages (`dualpipe.rs`).
            return self.dualpipe_ranks(plan, x, costs, layout, pp_t, (out, &seen));
        }
        out
    }

    /// [`Evaluator::scan_stages`]' pace (the busiest stage's time, or DualPipe rank's) and
    /// stage sum for a plan without recompute, from each class's compute and time alone: the
    /// quick and compute floors read nothing else of a scan (`floor.rs`). `stage` sums each
    /// stage's compute, then its exposures, then adds them; this sums each class's compute
    /// and exposure first. The sums are the same up to rounding (ulps of a stage time, inside
    /// the floors' relative margin); `view_tests.rs` checks the two scans agree.
    pub(super) fn scan_times(
        &self,
        plan: &Plan,
        x: &Ctx,
        costs: &[ClassCost; NCLASS],
        layout: &StageLayout,
        pp_t: f64,
    ) -> (f64, f64) {
        debug_assert_eq!(plan.recompute, Recompute::None);
        // Per class: compute, and compute with every exposure (no recompute: `stage`).
        let mut per = [(0.0, 0.0); NCLASS];
        for (p, c) in per.iter_mut().zip(costs) {
            let compute = c.fwd + c.bwd;
            *p = (compute, compute + c.exposed.iter().sum::<f64>());
        }
        let dual = super::dualpipe::paired(plan, x.pp);
        // Stage `i` (first block `start`): its blocks and time (`stage`'s, pipeline hop
        // included).
        let stage = |i: u32, start: u32| {
            let (n, dense, moe) = self.stage_blocks(layout, i, start);
            let counts = self.class_counts(i == 0, i + 1 == x.pp, (n, dense, moe));
            let (mut compute, mut t) = (0.0, 0.0);
            for (&w, &(c, tc)) in counts.iter().zip(&per) {
                if w != 0.0 {
                    compute += w * c;
                    t += w * tc;
                }
            }
            (n, dense, t + hop_exposed(dual, pp_t, compute))
        };
        let (mut tmax, mut sum) = (0.0_f64, 0.0);
        let mut start = 0;
        // Middle stages with the previous one's block mix cost the same (`scan_stages`).
        let mut prev: Option<(u32, u32, f64)> = None;
        for i in 0..x.pp {
            let middle = i > 0 && i + 1 < x.pp;
            let (n, dense, _) = self.stage_blocks(layout, i, start);
            let s = match prev {
                Some(p) if middle && (p.0, p.1) == (n, dense) => p,
                _ => stage(i, start),
            };
            prev = middle.then_some(s);
            start += n;
            sum += s.2;
            tmax = tmax.max(s.2);
        }
        if dual {
            // DualPipe's ranks: the mean of stage `i` and stage `pp − 1 − i` (`dualpipe.rs`).
            tmax = 0.0;
            let (mut lo_start, mut hi_end) = (0, layout.total());
            for i in 0..x.pp / 2 {
                let j = x.pp - 1 - i;
                let hi_start = hi_end - layout.blocks(j);
                let (nl, _, a) = stage(i, lo_start);
                let (_, _, b) = stage(j, hi_start);
                tmax = tmax.max(0.5 * (a + b));
                lo_start += nl;
                hi_end = hi_start;
            }
        }
        (tmax, sum)
    }

    /// The stages of `plan` ([`Evaluator::scan_stages`] over its class costs), kept per thread
    /// keyed by the plan as they read it ([`scan_view`]): a task's walk asks again under every
    /// sharding mode.
    pub(super) fn scan(&self, plan: &Plan, x: &Ctx, layout: &StageLayout) -> StageScan {
        let key = PlanKey {
            evaluator: self.cache_id,
            plan: scan_view(plan),
        };
        cached(&SCAN_CACHE, key.slot(SCAN_CACHE_BITS), key, || {
            let costs = self.class_costs_cached(plan, x);
            let (_, pp_t) = self.pp_hop(x);
            self.scan_stages(plan, x, &costs, layout, pp_t)
        })
    }

    /// Pipeline point-to-point of one micro-batch: (bytes, seconds per transfer). One
    /// activation (b·s/cp·h, /tp under SP) forward and one gradient backward per micro-batch
    /// per stage boundary (seed 000 §7.4).
    pub(super) fn pp_hop(&self, x: &Ctx) -> (f64, f64) {
        let bytes = x.m_tok * self.hidden * ACT / if x.sp { x.tp } else { 1.0 };
        let t = if x.pp > 1 {
            self.coll(Collective::SendRecv, x.hop_pp, bytes, x.algo)
                .time
        } else {
            0.0
        };
        (bytes, t)
    }

    /// The pipeline's table rows: the activation and gradient send/recv, `micro` per step
    /// each on the critical path, `exposed` seconds of the pair per micro-batch (the busiest
    /// stage's or DualPipe rank's). Megatron overlaps the extra virtual-stage transfers of the
    /// interleaved schedule (listed, not exposed).
    pub(super) fn pipeline_rows<S: Sink>(&self, x: &Ctx, sink: &mut S, micro: f64, exposed: f64) {
        if x.pp <= 1 {
            return;
        }
        let (pp_bytes, pp_t) = self.pp_hop(x);
        let calls = 2.0 * micro * x.vpp;
        let names = [
            ("pipeline activation send/recv", Pass::Forward),
            ("pipeline gradient send/recv", Pass::Backward),
        ];
        if !S::ENABLED {
            return;
        }
        let protocol = self
            .coll(Collective::SendRecv, x.hop_pp, pp_bytes, x.algo)
            .protocol;
        for (what, pass) in names {
            let c = Comm::new(
                CommKind::Pp,
                what,
                pass,
                Collective::SendRecv,
                x.hop_pp,
                pp_bytes,
            )
            .calls(calls / 2.0);
            sink.push(c.row(
                None,
                Algorithm::PointToPoint,
                protocol,
                pp_t,
                micro * exposed / 2.0,
            ));
        }
    }
}

/// A stage's exposed pipeline hop per micro-batch (`pp_t` seconds each way): one activation
/// in, one gradient out. DualPipe (`dual`) hides both behind the paired chunk's `compute`
/// (DeepSeek-V3 report §3.2.1: "both all-to-all and PP communication can be fully hidden");
/// what exceeds that compute stays exposed.
#[inline]
fn hop_exposed(dual: bool, pp_t: f64, compute: f64) -> f64 {
    if dual {
        (2.0 * pp_t - compute).max(0.0)
    } else {
        2.0 * pp_t
    }
}

/// Distinct stage times of one scan, by what [`Evaluator::stage`] reads of a stage's index:
/// whether it is the first and the last, and its blocks and dense blocks (its recompute share
/// and class counts follow). DualPipe's ranks pair the same stages again (`dualpipe.rs`).
#[derive(Default)]
pub(super) struct Stages {
    n: usize,
    keys: [(bool, bool, u32, u32); STAGES],
    vals: [StageTime; STAGES],
}

/// Distinct stages [`Stages`] keeps (a layout has at most four kinds of stage beside the
/// first and last: `first`, `last`, `middle`, `middle + 1` blocks, with or without dense
/// ones); later ones are priced again.
const STAGES: usize = 8;

impl Stages {
    /// The key of stage `i` of `pp` holding `n` blocks, `dense` of them dense.
    #[inline]
    pub(super) fn key(i: u32, pp: u32, n: u32, dense: u32) -> (bool, bool, u32, u32) {
        (i == 0, i + 1 == pp, n, dense)
    }

    #[inline]
    fn keep(&mut self, key: (bool, bool, u32, u32), s: StageTime) {
        if self.n < STAGES && !self.keys[..self.n].contains(&key) {
            self.keys[self.n] = key;
            self.vals[self.n] = s;
            self.n += 1;
        }
    }

    /// The stage kept under `key`, if any.
    #[inline]
    pub(super) fn get(&self, key: (bool, bool, u32, u32)) -> Option<StageTime> {
        let i = self.keys[..self.n].iter().position(|&k| k == key)?;
        Some(self.vals[i])
    }
}

/// `plan` with the knobs its stage scan does not read at `Plan::default()`'s values: the
/// sharding stage and the optimizer and parameter offloads move only what follows the
/// pipeline (`step.rs`: the DP reduction, the gathers, the optimizer step, the host
/// transfers); the class costs read none of them ([`super::costs::class_view`]), and the
/// stages add the layout's blocks of each class with recompute and the pipeline hops
/// (`view_tests.rs` checks it on a grid of plans).
pub(super) fn scan_view(plan: &Plan) -> Plan {
    let d = Plan::default();
    Plan {
        zero: d.zero,
        offload_optimizer: d.offload_optimizer,
        offload_params: d.offload_params,
        ..*plan
    }
}

/// log2 of the scan cache's slots.
const SCAN_CACHE_BITS: u32 = 8;

thread_local! {
    /// Stage scans computed on this thread (exact keys).
    static SCAN_CACHE: Slots<PlanKey, StageScan, { 1 << SCAN_CACHE_BITS }> =
        const { [const { RefCell::new(None) }; 1 << SCAN_CACHE_BITS] };
}
