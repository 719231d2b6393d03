//! A MoE layer's work on one GPU beside its GEMMs and its dispatch collectives, as
//! Megatron-Core runs a dropless MoE layer (`megatron/core/transformer/moe/`: `router.py`,
//! `moe_utils.py`'s `permute`/`unpermute`, `token_dispatcher.py`; the flags in
//! frameworks.md (the reference notes) §1.6):
//!
//! - **router**: the gate GEMM (`t × h · h × E`, priced with the class's GEMMs), then the score
//!   function (softmax or sigmoid), top-k and the load-balancing statistic (aux loss, or the
//!   token counts of aux-loss-free bias balancing) on the `t × E` scores, in fp32
//!   (`--moe-router-dtype fp32`, Megatron's recommendation for fine-grained MoE). HBM-bound
//!   passes over `t·E` elements: forward [`ROUTER_FWD_BYTES`], backward [`ROUTER_BWD_BYTES`].
//! - **permutation and un-permutation**: the routed rows are gathered into the order of the
//!   local experts before their GEMMs and scattered back (weighted by the routing probabilities
//!   and summed over the top-k) after; memory-bound copies of `R` rows of `h` 16-bit values,
//!   `R` the rows the GPU's experts take (the busiest GPU's, as the GEMMs are priced). Forward:
//!   permute reads and writes `R` rows; un-permute reads `R` rows and writes one per token.
//!   Backward: the same copies of the gradients the other way, and un-permute's backward also
//!   reads the experts' outputs for the probabilities' gradient (`R` rows more). One permute
//!   and one un-permute per direction is what every dispatcher does (DeepEP's kernels write
//!   the received rows by source rank, Megatron's `flex` dispatcher then permutes them by
//!   expert); the `alltoall` dispatcher's extra chunk sort by local expert
//!   (`sort_chunks_by_idxs`, with more than one local expert) is priced with its all-to-alls
//!   (`ep.rs::ep_all_to_all`), not here — the layer's compute reads no dispatcher (the search's
//!   floor relies on that, `floor.rs`).
//! - **per-expert launches**: Transformer Engine's `GroupedLinear` (`--moe-grouped-gemm`,
//!   Megatron-Core's `TEGroupedMLP`) issues one cuBLAS GEMM per local expert; each is priced at
//!   its own shape with the architecture's GEMM latency (`gemm_fwd`), so `local experts × expert
//!   GEMMs` latencies per pass, and, after a dropless dispatch, with the framework's host time
//!   per expert GEMM (`EvalOptions::expert_gemm_host`: the dispatcher's host sync leaves the
//!   host no lead over the launches; [`Evaluator::expert_host`]). The math itself runs at the rate of one large GEMM on Hopper
//!   (`results/h100/grouped.csv`: 16 experts × 512 rows × 3072 × 4096 at 677 TF/s as 16 cuBLAS
//!   calls, 729 as one grouped kernel), so expert GEMMs pay tile waves only where the
//!   architecture's dense GEMMs do (`wave_quantization`).
//! - **the dropless dispatcher's host sync**: the `alltoall` dispatcher copies the split sizes
//!   to the host before its all-to-all (`token_dispatcher.py`, `MoEAlltoAllTokenDispatcher`'s
//!   `cuda_sync_point`), unless the input is padded to capacity
//!   (`--moe-pad-expert-input-to-capacity`, equal splits known beforehand). It is priced with
//!   the dispatch itself (the cost model's `cpufetch` on each unequal all-to-all, `ep.rs`),
//!   where the dispatcher is known.
//!
//! The router and the copies are HBM-bound: `memory_bound_time` of their bytes under the
//! architecture's constants, nothing per model or per run.
//!
//! **Dense einsum dispatch** (`EvalOptions::moe_dense_dispatch`: DeepSpeed-MoE before v0.19.4,
//! `CostProfile::moe_dense_dispatch`). DeepSpeed's `MOELayer` has no permutation: it runs
//! GShard's Algorithm 2, `einsum("sec,sm->ecm", dispatch_mask, x)` into the `E × C` capacity
//! slots and `einsum("sec,ecm->sm", combine_weights, expert_out)` back
//! (`deepspeed/moe/sharded_moe.py @ v0.9.2:L495,L541`; `USE_EINSUM = True`, L111), over the
//! `S × E × C` one-hot masks its gate builds (`top1gating`/`top2gating`, L270, L335). `S` is
//! the rank's tokens at the layer's input and `C = ⌈k·cf·S/E⌉` (`_capacity`, L157-166, `cf·2`
//! for top-2; at least `min_capacity`, `deepspeed/moe/layer.py @ v0.9.2:L44`), so `E·C ≈ k·cf·S`
//! and each einsum is a dense GEMM of `2·S·(E·C)·h` FLOPs, growing with the square of the
//! tokens per GPU. They take the place of the permutation items:
//!
//! - forward: the dispatch GEMM (`m = E·C, n = h, k = S`) and the combine GEMM (`m = S, n = h,
//!   k = E·C`), priced with the class's GEMMs (`GemmPricer`); plus the gate's mask passes,
//!   [`DENSE_MASK_FWD_BYTES`] per `S·E·C` element.
//! - backward: the dispatch's input gradient (one GEMM: the mask is a cast boolean, no
//!   gradient), the combine's two (the combine weights', `m = S, n = E·C, k = h`, and the
//!   experts' outputs', `m = E·C, n = h, k = S`); plus [`DENSE_MASK_BWD_BYTES`] per element.
//!
//! Seed 004's baseline and its design both run this layer (the design modifies DeepSpeed-MoE's
//! placement and all-to-all, §4.2.2), with the same `S` and `E·C`.

use autoplan_cost::compute::memory_bound_time_with;
use serde::Serialize;

use super::classes::Class;
use super::compute::ACT;
use super::ctx::Ctx;
use super::Evaluator;
use crate::comm::Pass;

/// Bytes per `t × E` score element of the router's forward, fp32: the score function reads the
/// logits and writes the scores (4 + 4), top-k reads them (4) and writes Megatron's dense
/// `[t, E]` probabilities (4) and routing map (1), the load-balancing statistic reads both
/// (4 + 1) (`router.py`, `TopKRouter.routing`).
pub(super) const ROUTER_FWD_BYTES: f64 = 22.0;
/// Bytes per score element of the router's backward: the probabilities' gradient and the
/// scores read (4 + 4), the logits' gradient written (4), the balancing loss's gradient read
/// and added (4 + 4).
pub(super) const ROUTER_BWD_BYTES: f64 = 20.0;

/// Bytes per `S × E × C` mask element of DeepSpeed-MoE's gate in the forward (dense einsum
/// dispatch): `einsum("se,sc->sec")` writes the fp32 combine weights (4), `.bool()` reads them
/// and writes the dispatch mask (4 + 1), `dispatch_mask.type_as(x)` reads it and writes it in the
/// activations' dtype (1 + 2), `combine_weights.type_as(x)` casts the weights (4 + 2)
/// (`deepspeed/moe/sharded_moe.py @ v0.9.2:L270-272, L495, L541`; 16-bit activations).
pub(super) const DENSE_MASK_FWD_BYTES: f64 = 4.0 + 5.0 + (1.0 + ACT) + (4.0 + ACT);
/// Bytes per mask element in the backward: the combine weights' gradient cast back to fp32
/// (2 + 4) and read by `einsum("se,sc->sec")`'s backward into the gates' gradient (4).
pub(super) const DENSE_MASK_BWD_BYTES: f64 = (ACT + 4.0) + 4.0;
/// DeepSpeed-MoE's smallest capacity per expert (`min_capacity`, `deepspeed/moe/layer.py @
/// v0.9.2:L44`).
const DEEPSPEED_MIN_CAPACITY: f64 = 4.0;

/// One line of the MoE work table: one item of a MoE layer's work, per step on the bottleneck
/// stage (it is compute: on the critical path, nothing hides it).
#[derive(Debug, Clone, Serialize)]
pub struct MoeWorkRow {
    /// The layer kind (`moe`, or `mtp` for a MoE MTP module).
    pub layer: autoplan_graph::LayerKind,
    pub what: &'static str,
    pub pass: Pass,
    /// HBM bytes per call (0 for the launches).
    pub bytes: f64,
    /// Calls per step on the bottleneck stage (launches: kernels per step).
    pub calls_per_step: f64,
    pub time_per_call: f64,
    /// Seconds per step.
    pub time: f64,
}

/// The router's and the copies' seconds of one MoE layer for one micro-batch on one GPU.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct MoeWork {
    pub(super) router_fwd: f64,
    pub(super) router_bwd: f64,
    pub(super) permute_fwd: f64,
    pub(super) permute_bwd: f64,
    pub(super) unpermute_fwd: f64,
    pub(super) unpermute_bwd: f64,
    /// Bytes of each item (forward, backward), for the table.
    bytes: [f64; 6],
    /// Expert GEMM launches per forward (local experts × expert GEMMs) and the latency each.
    launches: f64,
    /// The permutation items are DeepSpeed-MoE's dense einsums (the table's names).
    dense: bool,
}

impl MoeWork {
    pub(super) fn fwd(&self) -> f64 {
        self.router_fwd + self.permute_fwd + self.unpermute_fwd
    }

    pub(super) fn bwd(&self) -> f64 {
        self.router_bwd + self.permute_bwd + self.unpermute_bwd
    }
}

impl Evaluator {
    /// The router's and the permutation copies' work of class `c` (a MoE layer or a MoE MTP
    /// module) for one micro-batch on one GPU; zero for a class without routed experts.
    pub(super) fn moe_work(&self, c: &Class, x: &Ctx) -> MoeWork {
        let Some(fc1) = c.gemms.iter().find(|g| g.expert) else {
            return MoeWork::default();
        };
        // Rows the GPU's experts take (the busiest GPU's: `gemm_rows`), and the tokens whose
        // outputs they make (the EP-and-moe_tp group's tokens of this rank).
        let (rows, count, _) = self.gemm_rows(c.kind, fc1, x);
        let r = rows * count;
        let tokens = x.t_rank * x.mt;
        let h = self.hidden;
        let scores = x.t_rank * self.experts;
        let t = |b: f64| memory_bound_time_with(&self.gpu, &self.eff, b);
        let perm = 2.0 * r * h * ACT;
        let unperm = (r + tokens) * h * ACT;
        let bytes = [
            ROUTER_FWD_BYTES * scores,
            ROUTER_BWD_BYTES * scores,
            perm,
            unperm,
            unperm,
            perm + r * h * ACT,
        ];
        let launches = count * c.gemms.iter().filter(|g| g.expert).count() as f64;
        if self.opts.moe_dense_dispatch {
            return self.dense_dispatch(x, bytes, launches);
        }
        MoeWork {
            router_fwd: t(bytes[0]),
            router_bwd: t(bytes[1]),
            permute_fwd: t(bytes[2]),
            permute_bwd: t(bytes[3]),
            unpermute_fwd: t(bytes[4]),
            unpermute_bwd: t(bytes[5]),
            bytes,
            launches,
            dense: false,
        }
    }

    /// [`Evaluator::moe_work`] under DeepSpeed-MoE's dense einsum dispatch (the module docs):
    /// the router as Megatron's (`bytes[0..2]`), the einsum GEMMs and the gate's mask passes in
    /// place of the permutation copies (their `bytes` are the GEMMs' operands and the masks').
    fn dense_dispatch(&self, x: &Ctx, mut bytes: [f64; 6], launches: f64) -> MoeWork {
        // The gate sees the rank's activations at the layer's input (every TP rank a full copy
        // without SP: DeepSpeed drops the duplicates after the dispatch einsum, L507).
        let s = if x.sp { x.t_rank } else { x.m_tok };
        let e = self.experts;
        let h = self.hidden;
        // Capacity per expert: `cf · k` padded slots per token; dropless (`drop_tokens=False`)
        // pads every expert to the busiest one's count (L209-212).
        let per_token = match self.capacity {
            Some(cf) => cf * self.top_k,
            None => self.top_k * self.imbalance,
        };
        let ec = e * (per_token * s / e).ceil().max(DEEPSPEED_MIN_CAPACITY);
        let flops = 2.0 * s * ec * h;
        let g = |m: f64, n: f64, k: f64| {
            (
                self.gemm.time(flops, m, n, k),
                (m * k + k * n + m * n) * ACT,
            )
        };
        let mask = s * ec;
        let t = |b: f64| memory_bound_time_with(&self.gpu, &self.eff, b);
        let (dispatch, dispatch_b) = g(ec, h, s);
        let (dispatch_dx, dispatch_dx_b) = g(s, h, ec);
        let (combine, combine_b) = g(s, h, ec);
        let (combine_dw, combine_dw_b) = g(s, ec, h);
        let (combine_dy, combine_dy_b) = g(ec, h, s);
        bytes[2] = dispatch_b + DENSE_MASK_FWD_BYTES * mask;
        bytes[3] = dispatch_dx_b;
        bytes[4] = combine_b;
        bytes[5] = combine_dw_b + combine_dy_b + DENSE_MASK_BWD_BYTES * mask;
        MoeWork {
            router_fwd: t(bytes[0]),
            router_bwd: t(bytes[1]),
            permute_fwd: dispatch + t(DENSE_MASK_FWD_BYTES * mask),
            permute_bwd: dispatch_dx,
            unpermute_fwd: combine,
            unpermute_bwd: combine_dw + combine_dy + t(DENSE_MASK_BWD_BYTES * mask),
            bytes,
            launches,
            dense: true,
        }
    }

    /// Host time each local expert GEMM waits for beyond the GPU's latency: the framework's
    /// `EvalOptions::expert_gemm_host` under dropless dispatch, whose device-to-host copy of
    /// the token counts keeps the host from running ahead of the experts' launches; 0 under
    /// capacity-padded dispatch, whose splits the host knows beforehand.
    #[inline]
    pub(super) fn expert_host(&self) -> f64 {
        if self.capacity.is_none() {
            self.opts.expert_gemm_host
        } else {
            0.0
        }
    }

    /// The table rows of `w` for a class listed `mult` times per step (micro-batches × layers
    /// of the bottleneck stage).
    pub(super) fn moe_rows(
        &self,
        layer: autoplan_graph::LayerKind,
        w: &MoeWork,
        mult: f64,
        out: &mut Vec<MoeWorkRow>,
    ) {
        if mult <= 0.0 || w.launches == 0.0 {
            return;
        }
        let lat = self.eff.gemm_latency + self.expert_host();
        let names = if w.dense {
            [
                "dispatch einsum sec,sm->ecm + gate masks (DeepSpeed-MoE)",
                "dispatch einsum backward (1 GEMM)",
                "combine einsum sec,ecm->sm",
                "combine einsum backward (2 GEMMs) + masks",
            ]
        } else {
            [
                "token permutation (into expert order)",
                "token permutation backward",
                "token un-permutation (weighted, top-k sum)",
                "token un-permutation backward (+ probs grad)",
            ]
        };
        let items: [(&'static str, Pass, f64, f64, f64); 8] = [
            (
                "router scores, top-k, balancing statistic",
                Pass::Forward,
                w.bytes[0],
                1.0,
                w.router_fwd,
            ),
            (
                "router backward",
                Pass::Backward,
                w.bytes[1],
                1.0,
                w.router_bwd,
            ),
            (names[0], Pass::Forward, w.bytes[2], 1.0, w.permute_fwd),
            (names[1], Pass::Backward, w.bytes[3], 1.0, w.permute_bwd),
            (names[2], Pass::Forward, w.bytes[4], 1.0, w.unpermute_fwd),
            (names[3], Pass::Backward, w.bytes[5], 1.0, w.unpermute_bwd),
            (
                "expert GEMM launches (one per local expert)",
                Pass::Forward,
                0.0,
                w.launches,
                lat,
            ),
            (
                "expert GEMM launches (one per local expert)",
                Pass::Backward,
                0.0,
                2.0 * w.launches,
                lat,
            ),
        ];
        for (what, pass, bytes, calls, time) in items {
            let calls = calls * mult;
            out.push(MoeWorkRow {
                layer,
                what,
                pass,
                bytes,
                calls_per_step: calls,
                time_per_call: time,
                time: calls * time,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EvalOptions;
    use autoplan_cost::calibration::dgx_h100;
    use autoplan_plan::Plan;

    #[test]
    fn deepspeed_moe_einsum_dispatch_hand_computed() {
        use autoplan_plan::framework::CostProfile;
        // Seed 004's 45M Transformer-XL MoE (h 512, 8 experts, top-1, capacity factor 1) at
        // batch 40 on 8 TITAN Xps: S = 5 · 512 = 2560 tokens per GPU, C = ⌈2560 / 8⌉ = 320.
        let mut model = autoplan_graph::resolve_model("thesis-txl-45m").expect("bundled");
        model.training.global_batch = 40;
        let cluster = autoplan_cluster::resolve_cluster("thesis-2node").expect("bundled");
        let plan: Plan = "tp=1,pp=1,dp=8,ep=8,mbs=5,recompute=none".parse().unwrap();
        let opts = EvalOptions::default()
            .with_profile(&CostProfile::DEEPSPEED_MOE_2023, model.training.precision);
        let ev = Evaluator::new(&model, &cluster, opts);
        let x = ev.ctx(&plan);
        let c = &ev.classes[super::super::classes::ClassId::Moe as usize];
        let w = ev.moe_work(c, &x);
        let (s, ec, h) = (2560.0, 8.0 * 320.0, 512.0);
        let f = 2.0 * s * ec * h;
        let g = |m, n, k| ev.gemm.time(f, m, n, k);
        let mb = |b| memory_bound_time_with(&ev.gpu, &ev.eff, b);
        let mask = s * ec;
        assert_eq!(DENSE_MASK_FWD_BYTES, 18.0);
        assert_eq!(DENSE_MASK_BWD_BYTES, 10.0);
        assert_eq!(w.permute_fwd, g(ec, h, s) + mb(18.0 * mask));
        assert_eq!(w.unpermute_fwd, g(s, h, ec));
        assert_eq!(w.permute_bwd, g(s, h, ec));
        assert_eq!(w.unpermute_bwd, g(s, ec, h) + g(ec, h, s) + mb(10.0 * mask));
        // The router is Megatron's either way.
        let gather = Evaluator::new(&model, &cluster, EvalOptions::default());
        let p = gather.moe_work(c, &gather.ctx(&plan));
        assert_eq!((w.router_fwd, w.router_bwd), (p.router_fwd, p.router_bwd));
        // S² against S: the einsums cost more than the copies they replace.
        assert!(w.fwd() > 10.0 * p.fwd() && w.bwd() > 10.0 * p.bwd());
        // DeepSpeed 0.19.5 gathers by index (`deepspeed`: no einsum); the table names the items.
        let ds =
            EvalOptions::default().with_profile(&CostProfile::DEEPSPEED, model.training.precision);
        let ds = Evaluator::new(&model, &cluster, ds);
        assert_eq!(ds.moe_work(c, &ds.ctx(&plan)), p);
        let rep = ev.report(&plan).expect("fits");
        assert!(rep
            .moe
            .iter()
            .any(|r| r.what.starts_with("dispatch einsum")));
        assert!(!rep
            .moe
            .iter()
            .any(|r| r.what.starts_with("token permutation")));
    }

    #[test]
    fn qwen3_235b_tp4_ep8_work_hand_computed() {
        // Qwen3-235B-A22B (h 4096, 128 experts, top-8, balanced) at tp 4 with SP, ep 8, one
        // 4096-token sequence: a rank routes t = 1024 tokens, its 16 local experts take
        // R = 1024 · 8 = 8192 rows (every EP rank sends and receives t·k rows).
        let model = autoplan_graph::resolve_model("qwen3-235b-a22b").expect("bundled");
        let cluster = dgx_h100(32);
        let ev = Evaluator::new(&model, &cluster, EvalOptions::default());
        let plan: Plan = "tp=4,sp=on,pp=8,vpp=4,schedule=interleaved,dp=8,ep=8,mbs=1,zero=1"
            .parse()
            .unwrap();
        let x = ev.ctx(&plan);
        let c = &ev.classes[super::super::classes::ClassId::Moe as usize];
        let w = ev.moe_work(c, &x);
        let (t, r, h, e) = (1024.0, 8192.0, 4096.0, 128.0);
        let want = [
            22.0 * t * e,
            20.0 * t * e,
            2.0 * r * h * 2.0,
            (r + t) * h * 2.0,
            (r + t) * h * 2.0,
            3.0 * r * h * 2.0,
        ];
        for (got, want) in w.bytes.iter().zip(want) {
            assert!((got / want - 1.0).abs() < 1e-12, "{got} vs {want}");
        }
        let mb = |b| memory_bound_time_with(&ev.gpu, &ev.eff, b);
        assert_eq!(w.permute_fwd, mb(want[2]));
        assert_eq!(w.unpermute_bwd, mb(want[5]));
        assert_eq!(w.fwd(), mb(want[0]) + mb(want[2]) + mb(want[4]));
        // 16 local experts × (fc1 with SwiGLU's gate and up fused, fc2).
        assert_eq!(w.launches, 32.0);
        // A dense layer has none of it.
        let dense = &ev.classes[super::super::classes::ClassId::Attn as usize];
        assert_eq!(ev.moe_work(dense, &x), MoeWork::default());
        // The report lists the eight items of the MoE layers, calls = layers × micro-batches.
        let rep = ev.report(&plan).expect("fits");
        let moe: Vec<_> = rep
            .moe
            .iter()
            .filter(|r| r.layer == autoplan_graph::LayerKind::Moe)
            .collect();
        assert_eq!(moe.len(), 8);
        assert!(moe
            .iter()
            .all(|r| (r.time - r.calls_per_step * r.time_per_call).abs() <= 1e-12 * r.time));
        assert_eq!(moe[6].calls_per_step * 2.0, moe[7].calls_per_step);
    }
}
