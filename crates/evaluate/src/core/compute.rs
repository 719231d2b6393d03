//! What a class computes on one GPU for one micro-batch: its GEMMs (at their launch shapes),
//! the attention core and the memory-bound elementwise kernels, forward and backward. No
//! communication (the parts' files) and no plan knob but the degrees.

use autoplan_cost::compute::{attention_core_time_with, bytes_per_element, memory_bound_time_with};
use autoplan_graph::{LayerKind, TpSplit};

use super::classes::{Class, ClassId, G, NCLASS};
use super::ctx::Ctx;
use super::Evaluator;
use crate::AttentionKernel;

/// Bytes of a 16-bit activation element (activations move in bf16/fp16 even under FP8 GEMMs).
pub(super) const ACT: f64 = 2.0;
/// Without sequence parallelism, the LayerNorm/dropout/residual tensors are replicated on every
/// TP rank: Korthikanti 2022 eq. 2, `sbh(10 + 24/t + ...)` of `34·sbh` → 10/34 of the
/// elementwise traffic is not divided by `tp`.
const NON_TP_ACT_FRACTION: f64 = 10.0 / 34.0;

/// Compute of one class for one micro-batch on one GPU (no communication).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ComputeCost {
    /// Forward: GEMMs, attention core (and unfused scores), elementwise kernels.
    pub(super) fwd: f64,
    /// Backward: twice the GEMMs and elementwise work, the attention core's backward.
    pub(super) bwd: f64,
    /// Full recompute of one block: the forward again.
    pub(super) rc_full: f64,
    /// The attention core's forward (with an unfused softmax): what selective recompute of
    /// `core_attn` runs again ([`Evaluator::selective_rc`]'s `core`).
    pub(super) core: f64,
    /// The attention core's backward (what a CP ring's backward steps hide behind).
    pub(super) core_bwd: f64,
    /// The forward GEMMs alone (the window TP overlap hides behind; the MTP module's reuse).
    pub(super) gemm: f64,
}

impl Evaluator {
    /// GEMM time of one class's forward pass on one GPU.
    pub(super) fn gemm_fwd(&self, kind: LayerKind, gemms: &[G], x: &Ctx) -> f64 {
        let mut t = 0.0;
        // Consecutive GEMMs of one shape (e.g. a MoE layer's identical shared experts) cost the
        // same.
        let mut last = (f64::NAN, f64::NAN, f64::NAN, f64::NAN, 0.0);
        for g in gemms {
            let (rows, count, tp) = self.gemm_rows(kind, g, x);
            let (n, k) = match g.split {
                TpSplit::Column => (g.out_f / tp, g.in_f),
                TpSplit::Row => (g.out_f, g.in_f / tp),
                TpSplit::Replicated => (g.out_f, g.in_f),
            };
            if (rows, n, k, count) == (last.0, last.1, last.2, last.3) {
                t += last.4;
                continue;
            }
            // The local experts' GEMMs: Transformer Engine's `GroupedLinear` (Megatron-Core's
            // `TEGroupedMLP`) issues one cuBLAS GEMM per local expert, so each is priced at its
            // own shape (`rows` tokens of one expert) with its own latency (the per-expert
            // launches, listed in the MoE work table: `moe.rs`); their concurrency over TE's
            // side streams is not credited.
            let e = &self.eff;
            // FP8 training keeps the LM head in 16 bits: Megatron-Core's `output_layer` is a
            // plain `ColumnParallelLinear`, outside Transformer Engine's `fp8_autocast`.
            let low = self.precision.is_low_precision();
            let head16 = kind == LayerKind::LmHead && low;
            let pricer = if head16 { &self.gemm16 } else { &self.gemm };
            let mut tg = count * pricer.time(2.0 * rows * n * k, rows, n, k);
            if low && !head16 {
                // FP8 (FP4) GEMMs quantize their 16-bit input (read 2 B, write 1 B (0.5 B) per
                // element; Transformer Engine's cast), a memory-bound pass per GEMM, whatever
                // the scaling recipe. Current scaling's amax is a second pass (2 B read) not
                // itemised here: on the H100 the pair took 20 µs per 4096 × 2048 input where
                // this term gives 15 (results/h100/fp8cast.csv), and no other recipe's cast is
                // measured.
                let cast = ACT + bytes_per_element(self.precision);
                tg += memory_bound_time_with(&self.gpu, e, cast * rows * count * k);
            }
            last = (rows, n, k, count, tg);
            t += tg;
        }
        t
    }

    /// (Rows per matrix, local matrices, the TP-like degree splitting it) of GEMM `g`.
    #[inline]
    pub(super) fn gemm_rows(&self, kind: LayerKind, g: &G, x: &Ctx) -> (f64, f64, f64) {
        if g.expert {
            // Tokens reaching one local expert: every rank of the expert's moe_tp × ep block
            // sends its t_rank · rows_per_token (= k/E) tokens; padded dispatch fills the
            // capacity `cf · top_k / E` per token, dropless dispatch waits for the most loaded
            // expert (the model's load imbalance).
            let skew = match self.capacity {
                Some(cf) => cf * self.top_k / self.k_eff.max(1e-9),
                None => x.ep_imb,
            };
            let rows = x.t_rank * x.mt * x.ep * g.rows_per_token * skew;
            (rows, g.count / x.ep, x.mt)
        } else if kind == LayerKind::Moe && g.split == TpSplit::Replicated {
            // The router sees the sequence-parallel slice.
            (x.t_rank * g.rows_per_token, g.count, x.tp)
        } else {
            (x.m_tok * g.rows_per_token, g.count, x.tp)
        }
    }

    /// HBM seconds of the activation function between the `fc1` (column) and `fc2` (row)
    /// GEMMs of `gemms`: it reads what `fc1` wrote and writes what `fc2` reads, 16-bit.
    pub(super) fn activation_fn_time<'g>(
        &self,
        kind: LayerKind,
        gemms: impl Iterator<Item = &'g G>,
        x: &Ctx,
    ) -> f64 {
        let mut bytes = 0.0;
        for g in gemms {
            let (rows, count, tp) = self.gemm_rows(kind, g, x);
            bytes += rows
                * count
                * ACT
                * match g.split {
                    TpSplit::Column => g.out_f / tp,
                    TpSplit::Row => g.in_f / tp,
                    TpSplit::Replicated => 0.0,
                };
        }
        memory_bound_time_with(&self.gpu, &self.eff, bytes)
    }

    /// Forward/backward/recompute compute of one class (no communication); `gemm`, when
    /// given, the class's forward GEMM time already known.
    fn compute(&self, c: &Class, x: &Ctx, gemm: Option<f64>) -> ComputeCost {
        let gemm = gemm.unwrap_or_else(|| self.gemm_fwd(c.kind, &c.gemms, x));
        let (mut core_f, mut core_b, mut score_f) = (0.0, 0.0, 0.0);
        if c.attn_core > 0.0 {
            let heads_div = x.tp;
            let causal = c.attn_core * x.m_tok / heads_div;
            let io = (2.0 * c.q_elems + c.cp_kv) * x.m_tok / heads_div * ACT;
            match self.opts.attention {
                AttentionKernel::Flash => {
                    core_f = attention_core_time_with(
                        &self.gpu,
                        &self.eff,
                        causal,
                        io,
                        self.attn_precision,
                    );
                    core_b = self.eff.attn_bwd * core_f;
                }
                AttentionKernel::Unfused => {
                    // The full s×s scores are computed, masked, soft-maxed and stored.
                    core_f = attention_core_time_with(
                        &self.gpu,
                        &self.eff,
                        2.0 * causal,
                        io,
                        self.attn_precision,
                    );
                    core_b = 2.0 * core_f;
                    score_f = memory_bound_time_with(
                        &self.gpu,
                        &self.eff,
                        2.0 * c.score * x.m_tok / heads_div,
                    );
                }
            }
        }
        let split = match c.kind {
            LayerKind::CrossEntropy | LayerKind::LmHead => 1.0 / x.tp,
            _ if x.sp => 1.0 / x.tp,
            _ => NON_TP_ACT_FRACTION + (1.0 - NON_TP_ACT_FRACTION) / x.tp,
        };
        // Elementwise kernels write what is stored for backward and read it back once.
        let mem_f = memory_bound_time_with(&self.gpu, &self.eff, 2.0 * c.act * x.m_tok * split);
        // A MoE layer's router and token permutation copies (`moe.rs`; zero elsewhere).
        let moe = self.moe_work(c, x);
        let fwd = gemm + core_f + score_f + mem_f + moe.fwd();
        let bwd = 2.0 * gemm + core_b + 2.0 * score_f + 2.0 * mem_f + moe.bwd();
        ComputeCost {
            fwd,
            bwd,
            rc_full: fwd,
            core: core_f + score_f,
            core_bwd: core_b + 2.0 * score_f,
            gemm,
        }
    }

    /// [`Evaluator::compute`] of every class the model has (the others stay zero), in one
    /// order: the MTP module reuses the GEMM times of the classes it repeats (`mtp_reuse`).
    /// `run`'s class costs and the step floor both start from it.
    pub(super) fn class_compute(&self, x: &Ctx) -> [ComputeCost; NCLASS] {
        let mut out = [ComputeCost::default(); NCLASS];
        let attn = ClassId::Attn as usize;
        out[attn] = self.compute(&self.classes[attn], x, None);
        for id in ClassId::ALL {
            if !self.has_class(id) || id == ClassId::Attn {
                continue;
            }
            let c = &self.classes[id as usize];
            out[id as usize] = if id == ClassId::Mtp && self.mtp_reuse {
                // An MTP module = projection + the last block's attention and MLP/MoE + the
                // shared head: reuse the GEMM times of those classes.
                let own = self.gemm_fwd(c.kind, &c.gemms[..1], x);
                let g = own
                    + out[attn].gemm
                    + out[c.mtp_mlp() as usize].gemm
                    + out[ClassId::Head as usize].gemm;
                self.compute(c, x, Some(g))
            } else {
                self.compute(c, x, None)
            };
        }
        out
    }

    /// The model has layers of class `id` (the MoE class needs experts, the MTP class modules).
    #[inline]
    pub(super) fn has_class(&self, id: ClassId) -> bool {
        !(id == ClassId::Moe && self.experts == 0.0 || id == ClassId::Mtp && self.mtp == 0)
    }
}
