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
//!   (`sort_chunks_by_idxs`, with more than one local expert) is not priced — the layer's
//!   compute reads no dispatcher (the search's floor relies on that, `floor.rs`).
//! - **per-expert launches**: Transformer Engine's `GroupedLinear` (`--moe-grouped-gemm`,
//!   Megatron-Core's `TEGroupedMLP`) issues one cuBLAS GEMM per local expert; each is priced at
//!   its own shape with the architecture's GEMM latency (`gemm_fwd`), so `local experts × expert
//!   GEMMs` latencies per pass. The math itself runs at the rate of one large GEMM on Hopper
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
        MoeWork {
            router_fwd: t(bytes[0]),
            router_bwd: t(bytes[1]),
            permute_fwd: t(bytes[2]),
            permute_bwd: t(bytes[3]),
            unpermute_fwd: t(bytes[4]),
            unpermute_bwd: t(bytes[5]),
            bytes,
            launches,
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
        let lat = self.eff.gemm_latency;
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
            (
                "token permutation (into expert order)",
                Pass::Forward,
                w.bytes[2],
                1.0,
                w.permute_fwd,
            ),
            (
                "token permutation backward",
                Pass::Backward,
                w.bytes[3],
                1.0,
                w.permute_bwd,
            ),
            (
                "token un-permutation (weighted, top-k sum)",
                Pass::Forward,
                w.bytes[4],
                1.0,
                w.unpermute_fwd,
            ),
            (
                "token un-permutation backward (+ probs grad)",
                Pass::Backward,
                w.bytes[5],
                1.0,
                w.unpermute_bwd,
            ),
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
