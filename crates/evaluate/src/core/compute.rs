//! What a class computes on one GPU for one micro-batch: its GEMMs (at their launch shapes),
//! the attention core and the memory-bound elementwise kernels, forward and backward. No
//! communication (the parts' files) and no plan knob but the degrees.

use autoplan_cluster::Precision;
use autoplan_cost::compute::{
    attention_bwd_time_with, attention_core_time_with, attention_fwd_time_with, bytes_per_element,
    memory_bound_time_with, AttnCall,
};
use autoplan_graph::{LayerKind, ModelSpec, TpSplit};

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

/// The attention core's kernel shapes, from the model (not the plan): its heads and head dims,
/// and its blocks' kinds (full causal, sliding window) with their share of the blocks.
#[derive(Debug, Clone, Copy)]
pub(super) struct AttnShape {
    heads: f64,
    d_qk: f64,
    d_v: f64,
    /// (share of the blocks, mean keys per query, most keys per query tile, masked edge tiles
    /// per query tile) of each kind; a kind the model lacks has share 0.
    kinds: [(f64, f64, f64, f64); 2],
}

impl AttnShape {
    /// The attention blocks of `model`: causal ones attend to `s/2` keys on average and at
    /// most `s`, with the diagonal tile (½) masked; windowed ones (`w < s`) to `w − w²/2s` and
    /// at most `w`, with the diagonal tile (½) and, for the `1 − w/s` of the query tiles past
    /// the first `w` tokens, the window's lower edge (½) masked: `1 − w/2s` (autoplan-cost's
    /// compute module docs). The keys are the graph's (`ModelSpec::mean_keys`).
    pub(super) fn of(model: &ModelSpec) -> AttnShape {
        let s = model.training.seq_len as f64;
        let layers = model.layers.max(1) as f64;
        let kinds = model.attention_classes().map(|(n, b)| {
            let keys = model.mean_keys(b);
            match model.window {
                Some(w) if model.is_windowed_block(b) && (w.tokens as f64) < s => {
                    let w = w.tokens as f64;
                    (n as f64 / layers, keys, w, 1.0 - w / (2.0 * s))
                }
                _ => (n as f64 / layers, keys, s, 0.5),
            }
        });
        AttnShape {
            heads: model.heads as f64,
            d_qk: model.head_dim() as f64,
            d_v: model.v_head_dim() as f64,
            kinds,
        }
    }
}

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
    /// The forward time of the column-parallel GEMMs that read the class's TP input side (the
    /// QKV or MLA up-projections, `fc1`): the time of their weight-gradient GEMMs, which an
    /// asynchronous input-gradient collective runs beside (`CostProfile::tp_bwd_async`,
    /// `tp.rs`). Zero for the MTP module, whose GEMM times are reused.
    pub(super) gemm_in: f64,
}

impl Evaluator {
    /// GEMM time of one class's forward pass on one GPU.
    pub(super) fn gemm_fwd(&self, kind: LayerKind, gemms: &[G], x: &Ctx) -> f64 {
        self.gemm_fwd_parts(kind, gemms, x).0
    }

    /// (GEMM time of one class's forward pass, what the backward's casts exceed the forward's
    /// by). The backward casts the output gradient for dgrad and wgrad, priced as twice a cast
    /// of the forward's input on all the GEMM's rows; the forward's own cast can be smaller or
    /// gone. Under FP8 with delayed scaling a norm-fed GEMM's input
    /// (`G::norm_fed`) is quantized by the norm kernel itself: Transformer Engine's
    /// `LayerNormLinear` runs its quantized norm, and for a delayed-scaling quantizer
    /// (`Float8Quantizer`, whose scale is known before the tensor is) that kernel is fully
    /// fused (`csrc/extensions/normalization.cpp` @ transformer-engine-torch 2.9.0, L108-109:
    /// `Impl::FULLY_FUSED`), so the forward has no cast pass for it. Current scaling fuses
    /// only the norm and its amax, then quantizes in a pass of its own (`FUSED_NORM_AMAX_FP8`,
    /// L116-120), as MXFP8 and block scaling do after an unfused norm (`UNFUSED`), and NVFP4
    /// after its fused amax: the cast below, on the rank's own rows under sequence parallelism
    /// (before the all-gather).
    ///
    /// The third figure is the part of the first spent in the dense column-parallel GEMMs
    /// ([`ComputeCost::gemm_in`]).
    pub(super) fn gemm_fwd_parts(&self, kind: LayerKind, gemms: &[G], x: &Ctx) -> (f64, f64, f64) {
        let (mut t, mut extra, mut t_in) = (0.0, 0.0, 0.0);
        // Consecutive GEMMs of one shape (e.g. a MoE layer's identical shared experts) cost the
        // same.
        let mut last = (f64::NAN, f64::NAN, f64::NAN, f64::NAN, 0.0, 0.0);
        for g in gemms {
            let (rows, count, tp) = self.gemm_rows(kind, g, x);
            let (n, k) = match g.split {
                TpSplit::Column => (g.out_f / tp, g.in_f),
                TpSplit::Row => (g.out_f, g.in_f / tp),
                TpSplit::Replicated => (g.out_f, g.in_f),
            };
            let input_side = g.split == TpSplit::Column && !g.expert;
            if (rows, n, k, count) == (last.0, last.1, last.2, last.3) {
                t += last.4;
                extra += last.5;
                if input_side {
                    t_in += last.4;
                }
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
            if g.expert {
                // Each local expert's launch waits on the host after a dropless dispatch
                // (`EvalOptions::expert_gemm_host`, `moe.rs`).
                tg += count * self.expert_host();
            }
            let mut more = 0.0;
            if low && !head16 {
                // FP8 (FP4) GEMMs quantize their 16-bit input (read 2 B, write 1 B (0.5 B) per
                // element; Transformer Engine's cast), a memory-bound pass per GEMM, whatever
                // the scaling recipe. Current scaling's amax is a second pass (2 B read) not
                // itemised here: on the H100 the pair took 20 µs per 4096 × 2048 input where
                // this term gives 15 (results/h100/fp8cast.csv), and no other recipe's cast is
                // measured.
                let cast = ACT + bytes_per_element(self.precision);
                // A norm-fed input is quantized before sequence parallelism's all-gather, on
                // the rank's own `s/tp` rows (`layernorm_linear.py` @ transformer-engine 2.9.0,
                // L245-266: `quantizer(ln_out)`, then `gather_along_first_dim(…, quantizer)`;
                // torchao's `PrepareFloat8ModuleInput` likewise, `float8/float8_tensor_parallel.py`
                // @ torchao 0.18.0 L172-178, "the float8 cast happens before the all-gather").
                let pass = |r: f64| memory_bound_time_with(&self.gpu, e, cast * r * count * k);
                let full = pass(rows);
                let own = if g.norm_fed && self.precision == Precision::Fp8 {
                    0.0
                } else if g.norm_fed && x.sp {
                    pass(rows / x.tp)
                } else {
                    full
                };
                tg += own;
                more = full - own;
            }
            last = (rows, n, k, count, tg, more);
            t += tg;
            extra += more;
            if input_side {
                t_in += tg;
            }
        }
        (t, extra, t_in)
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
        } else if kind == LayerKind::Attention && g.split == TpSplit::Replicated && x.sp {
            // MLA's down-projections run `duplicated` on each TP rank's own rows under SP
            // (Megatron-Core's `TELinear(parallel_mode="duplicated")`, `gpt_layer_specs.py` @
            // core 0.19.2 L123-125); without SP every rank projects the whole sequence.
            (x.m_tok / x.tp * g.rows_per_token, g.count, x.tp)
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

    /// The fused attention core of one micro-batch on one GPU, (forward, backward), as the
    /// kernels run it (autoplan-cost's [`AttnCall`]): `mbs · heads / tp` problems per call.
    /// Under CP a rank's work is its ring's `cp` steps (Megatron-Core's load-balanced chunks,
    /// `cp.rs` module docs), each one call of its `s/cp` queries against `s/(2cp)` keys on
    /// average: step 0 the local chunk pair under the block's mask, the others unmasked. Every
    /// CP mode is priced so (the work per rank is the same; Ulysses and the all-gather run it
    /// as fewer, longer calls whose tile losses differ by the per-call latency and the causal
    /// tail): the compute reads no communication knob, as `floor.rs` requires.
    fn flash_core(&self, x: &Ctx) -> (f64, f64) {
        let a = &self.attn;
        let problems = x.m_tok * x.cp / self.seq * a.heads / x.tp;
        let q = self.seq / x.cp;
        let (mut f, mut b) = (0.0, 0.0);
        for (share, keys, max_keys, edge) in a.kinds {
            if share <= 0.0 {
                continue;
            }
            let first = AttnCall {
                problems,
                queries: q,
                keys: keys / x.cp,
                max_keys: max_keys / x.cp,
                edge,
                d_qk: a.d_qk,
                d_v: a.d_v,
            };
            let fwd = |c: &AttnCall| {
                attention_fwd_time_with(&self.gpu, &self.attn_eff, c, 0.0, self.attn_precision)
            };
            let bwd = |c: &AttnCall| {
                attention_bwd_time_with(&self.gpu, &self.attn_eff, c, 0.0, self.attn_precision)
            };
            let (mut kf, mut kb) = (fwd(&first), bwd(&first));
            if max_keys < self.seq {
                // A window's key tiles are a subset of the causal kernel's: never slower (the
                // continuous tile count overstates the edges when `w` is within a tile of `s`).
                let causal = AttnCall::causal(problems, q, a.d_qk, a.d_v);
                kf = kf.min(fwd(&causal));
                kb = kb.min(bwd(&causal));
            }
            if x.cp > 1.0 {
                let step = AttnCall::full(problems, q, keys / x.cp, a.d_qk, a.d_v);
                kf += (x.cp - 1.0) * fwd(&step);
                kb += (x.cp - 1.0) * bwd(&step);
            }
            f += share * kf;
            b += share * kb;
        }
        (f, b)
    }

    /// Forward/backward/recompute compute of one class (no communication); `gemm`, when
    /// given, the class's forward GEMM time already known.
    fn compute(&self, c: &Class, x: &Ctx, gemm: Option<f64>) -> ComputeCost {
        // The MTP module's reused GEMM times keep their casts (`extra` 0).
        let (gemm, extra, gemm_in) = match gemm {
            Some(g) => (g, 0.0, 0.0),
            None => self.gemm_fwd_parts(c.kind, &c.gemms, x),
        };
        let (mut core_f, mut core_b, mut score_f) = (0.0, 0.0, 0.0);
        if c.attn_core > 0.0 {
            let heads_div = x.tp;
            let causal = c.attn_core * x.m_tok / heads_div;
            let io = (2.0 * c.q_elems + c.cp_kv) * x.m_tok / heads_div * ACT;
            match self.opts.attention {
                AttentionKernel::Flash | AttentionKernel::FlashAttention2 => {
                    let (f, b) = self.flash_core(x);
                    core_f = f.max(memory_bound_time_with(&self.gpu, &self.eff, io));
                    core_b = b.max(memory_bound_time_with(&self.gpu, &self.eff, 2.0 * io));
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
        // The elementwise ops the profile runs as kernels of their own (`elementwise.rs`):
        // hidden-sized tensors replicated over TP without sequence parallelism, the others
        // split over TP. Zero (and no time) when every chain is fused.
        let (eager_f, eager_b) = if c.unfused.is_zero() {
            (0.0, 0.0)
        } else {
            let u = &c.unfused;
            let hidden = if x.sp { 1.0 / x.tp } else { 1.0 };
            let bytes = |i: usize| x.m_tok * (u.hidden[i] * hidden + u.sharded[i] / x.tp);
            let t = |b: f64| memory_bound_time_with(&self.gpu, &self.eff, b);
            (t(bytes(0)), t(bytes(1)))
        };
        // A MoE layer's router and token permutation copies (`moe.rs`; zero elsewhere).
        let moe = self.moe_work(c, x);
        let fwd = gemm + core_f + score_f + mem_f + eager_f + moe.fwd();
        // The backward's two output-gradient casts per GEMM are on all its rows, whatever the
        // forward's input cast was (`gemm_fwd_parts`).
        let bwd = 2.0 * (gemm + extra) + core_b + 2.0 * score_f + 2.0 * mem_f + eager_b + moe.bwd();
        ComputeCost {
            fwd,
            bwd,
            rc_full: fwd,
            core: core_f + score_f,
            core_bwd: core_b + 2.0 * score_f,
            gemm,
            gemm_in,
        }
    }

    /// [`Evaluator::compute`] of every class the model has (the others stay zero), in one
    /// order: the MTP module reuses the GEMM times of the classes it repeats (`mtp_reuse`).
    /// `run`'s class costs and the step floor both start from it.
    pub(super) fn class_compute(&self, x: &Ctx) -> [ComputeCost; NCLASS] {
        let key = ComputeKey::new(self.cache_id, x);
        super::ctx::cached(&COMPUTE_CACHE, key.slot(), key, || {
            self.class_compute_uncached(x)
        })
    }

    /// [`Evaluator::class_compute`] computed afresh.
    fn class_compute_uncached(&self, x: &Ctx) -> [ComputeCost; NCLASS] {
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
        // The framework's compute beyond the priced kernels (`CostProfile::unpriced_compute`),
        // on every class alike, after the MTP module has reused the unscaled GEMM times.
        let f = 1.0 + self.opts.unpriced_compute;
        if f != 1.0 {
            for c in &mut out {
                *c = ComputeCost {
                    fwd: c.fwd * f,
                    bwd: c.bwd * f,
                    rc_full: c.rc_full * f,
                    core: c.core * f,
                    core_bwd: c.core_bwd * f,
                    gemm: c.gemm * f,
                    gemm_in: c.gemm_in * f,
                };
            }
        }
        out
    }

    /// The model has layers of class `id` (the MoE class needs experts, the MTP class modules).
    #[inline]
    pub(super) fn has_class(&self, id: ClassId) -> bool {
        !(id == ClassId::Moe && self.experts == 0.0 || id == ClassId::Mtp && self.mtp == 0)
    }
}

/// What [`Evaluator::class_compute`] reads: the evaluator (its model, GPU and options, fixed
/// at construction) and the context's degrees, tokens and routing figures (`compute`,
/// `gemm_fwd`, `flash_core` and `moe_work` read no other field of [`Ctx`]: not the groups,
/// the micro-batch count, the pipeline or the algorithm mode), as exact bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct ComputeKey {
    evaluator: u64,
    bits: [u64; 10],
}

impl ComputeKey {
    pub(super) fn new(evaluator: u64, x: &Ctx) -> ComputeKey {
        ComputeKey {
            evaluator,
            bits: [
                x.tp.to_bits(),
                x.cp.to_bits(),
                x.ep.to_bits(),
                x.mt.to_bits(),
                x.m_tok.to_bits(),
                x.t_rank.to_bits(),
                x.ep_imb.to_bits(),
                x.recv.to_bits(),
                x.replicas.to_bits(),
                u64::from(x.sp),
            ],
        }
    }

    /// A multiplicative hash of the key's fields.
    #[inline]
    pub(super) fn hash(&self) -> u64 {
        let mut h = self.evaluator;
        for (i, b) in self.bits.iter().enumerate() {
            h ^= b.rotate_left(7 * i as u32);
        }
        h.wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }

    /// The direct-mapped slot of the key.
    #[inline]
    fn slot(&self) -> usize {
        (self.hash() >> (64 - COMPUTE_CACHE_BITS)) as usize
    }
}

/// log2 of the compute cache's slots.
const COMPUTE_CACHE_BITS: u32 = 6;

thread_local! {
    /// Class compute costs computed on this thread, across evaluations and floors: the plans
    /// and bounds of one search repeat the same degrees and micro-batch under every knob,
    /// rank order and pipeline depth. Exact keys, so a hit returns what computing again
    /// would, bit for bit (as the collective cache, `ctx.rs`).
    static COMPUTE_CACHE: super::ctx::Slots<ComputeKey, [ComputeCost; NCLASS], { 1 << COMPUTE_CACHE_BITS }> =
        const { [const { std::cell::RefCell::new(None) }; 1 << COMPUTE_CACHE_BITS] };
}

#[cfg(test)]
mod tests {
    use autoplan_cluster::{resolve_cluster, Precision};
    use autoplan_cost::compute::{attention_bwd_time, attention_fwd_time, AttnCall};
    use autoplan_graph::{resolve_model, ModelSpec, SlidingWindow};
    use autoplan_plan::Plan;

    use crate::core::Evaluator;
    use crate::EvalOptions;

    fn llama(seq: u32) -> ModelSpec {
        let mut m = resolve_model("llama3-8b").expect("bundled");
        m.training.seq_len = seq;
        m.training.global_batch = 64;
        m
    }

    /// 64 H100s and a tp 2 plan with sequence parallelism over them.
    fn tp2_sp_on_64() -> (autoplan_cluster::Cluster, Plan) {
        let c = resolve_cluster("h100x256")
            .expect("bundled")
            .with_gpus(64)
            .expect("64");
        let plan = Plan {
            tp: 2,
            dp: 32,
            sp: true,
            ..Plan::default()
        };
        (c, plan)
    }

    fn core(m: &ModelSpec, tp: u32, cp: u32) -> (f64, f64) {
        let c = resolve_cluster("h100x256")
            .expect("bundled")
            .with_gpus(64)
            .expect("64");
        let ev = Evaluator::new(m, &c, EvalOptions::default());
        let plan = Plan {
            tp,
            cp,
            dp: 64 / (tp * cp),
            sp: tp > 1,
            ..Plan::default()
        };
        ev.flash_core(&ev.ctx(&plan))
    }

    #[test]
    fn a_cp_rank_runs_its_rings_steps_as_calls() {
        // Llama-3-8B (32 heads, head dim 128), 128K tokens, tp 4: 8 heads per GPU. cp 4: the
        // local causal pair of chunks (32K queries) and 3 unmasked steps of 32K queries
        // against 16K keys on average (cp.rs module docs).
        let g = resolve_cluster("h100x256").expect("bundled").gpu;
        let p = Precision::Bf16;
        let (f, b) = core(&llama(131072), 4, 4);
        let first = AttnCall::causal(8.0, 32768.0, 128.0, 128.0);
        let step = AttnCall::full(8.0, 32768.0, 16384.0, 128.0, 128.0);
        let want_f =
            attention_fwd_time(&g, &first, 0.0, p) + 3.0 * attention_fwd_time(&g, &step, 0.0, p);
        let want_b =
            attention_bwd_time(&g, &first, 0.0, p) + 3.0 * attention_bwd_time(&g, &step, 0.0, p);
        assert!((f / want_f - 1.0).abs() < 1e-12 && (b / want_b - 1.0).abs() < 1e-12);
        // Without CP: one causal call over the sequence.
        let (f1, _) = core(&llama(131072), 4, 1);
        let whole = attention_fwd_time(&g, &AttnCall::causal(8.0, 131072.0, 128.0, 128.0), 0.0, p);
        assert!((f1 / whole - 1.0).abs() < 1e-12);
        // The causal work splits evenly (load balancing), and the shards' calls run at their
        // own (per-shard) rate: a little over a quarter of the whole, never under.
        assert!(f >= f1 / 4.0 && f < 1.05 * f1 / 4.0, "{f} vs {}", f1 / 4.0);
        // Short shards pay more: 8K tokens over cp 8 (1K per rank) lose to their tiles.
        let (f8, _) = core(&llama(8192), 1, 8);
        let (f8_1, _) = core(&llama(8192), 1, 1);
        assert!(f8 > 1.2 * f8_1 / 8.0, "{f8} vs {}", f8_1 / 8.0);
    }

    #[test]
    fn unfused_elementwise_bytes_are_priced_as_one_memory_bound_pass_each_way() {
        // Llama-3-8B at 8K tokens, tp 2 with sequence parallelism, eager torchtitan against
        // fused: the attention class's forward grows by the memory-bound time of the bytes
        // the eager kernels add (the norm's over h/tp, RoPE's over Q and K / tp), the backward
        // by its backward bytes, and nothing else changes.
        use autoplan_cost::compute::memory_bound_time;
        use autoplan_plan::framework::CostProfile;
        let m = llama(8192);
        let (c, plan) = tp2_sp_on_64();
        let fused = Evaluator::new(&m, &c, EvalOptions::default());
        let eager = Evaluator::new(
            &m,
            &c,
            EvalOptions::default()
                .with_profile(&CostProfile::TORCHTITAN_EAGER, m.training.precision),
        );
        let attn = crate::core::classes::ClassId::Attn as usize;
        let (f, e) = (
            fused.class_compute(&fused.ctx(&plan))[attn],
            eager.class_compute(&eager.ctx(&plan))[attn],
        );
        let tokens = 8192.0; // mbs 1
        let fwd = tokens * (32.0 * 4096.0 + 16.0 * 40.0 * 128.0) / 2.0;
        let bwd = tokens * (64.0 * 4096.0 + 16.0 * 40.0 * 128.0) / 2.0;
        let want_f = memory_bound_time(&c.gpu, fwd);
        let want_b = memory_bound_time(&c.gpu, bwd);
        assert!(
            ((e.fwd - f.fwd) / want_f - 1.0).abs() < 1e-9,
            "{} vs {want_f}",
            e.fwd - f.fwd
        );
        assert!(
            ((e.bwd - f.bwd) / want_b - 1.0).abs() < 1e-9,
            "{} vs {want_b}",
            e.bwd - f.bwd
        );
        assert_eq!((e.gemm, e.core, e.core_bwd), (f.gemm, f.core, f.core_bwd));
    }

    #[test]
    fn delayed_scaling_folds_the_norm_fed_casts_into_the_norm() {
        // Llama-3-8B at tp 2 with SP, 8192 tokens: under delayed scaling the QKV and FC1 inputs
        // are quantized by the norm kernel (no cast pass), under current scaling they are cast
        // in a pass of their own (read 2 B, write 1 B per element of the h-wide input) on the
        // rank's 4096 rows, before the all-gather; the proj and FC2 casts, and every backward
        // cast, are the same in both.
        use autoplan_cost::compute::memory_bound_time;
        let (c, plan) = tp2_sp_on_64();
        let class = |p: Precision, id: crate::core::classes::ClassId| {
            let mut m = llama(8192);
            m.training.precision = p;
            let ev = Evaluator::new(&m, &c, EvalOptions::default());
            ev.class_compute(&ev.ctx(&plan))[id as usize]
        };
        let cast = memory_bound_time(&c.gpu, 3.0 * 4096.0 * 4096.0);
        for id in [
            crate::core::classes::ClassId::Attn,
            crate::core::classes::ClassId::Mlp,
        ] {
            let (delayed, current) = (class(Precision::Fp8, id), class(Precision::Fp8Current, id));
            let gap = current.fwd - delayed.fwd;
            assert!((gap / cast - 1.0).abs() < 1e-9, "{id:?}: {gap} vs {cast}");
            assert!(
                (delayed.bwd - current.bwd).abs() < 1e-12 * current.bwd,
                "{id:?}"
            );
        }
        // The head, not norm-fed (and in 16 bits), is the same.
        let head = crate::core::classes::ClassId::Head;
        assert_eq!(
            class(Precision::Fp8, head).fwd,
            class(Precision::Fp8Current, head).fwd
        );
        // MLA: the up-projections behind the latent norms (q_b on the 1536-wide q latent,
        // kv_b on the 512-wide kv latent), not the down-projections on the block input.
        let mut m = resolve_model("deepseek-v3").expect("bundled");
        m.training.global_batch = 64;
        let attn = |p: Precision| {
            let mut m = m.clone();
            m.training.precision = p;
            let ev = Evaluator::new(&m, &c, EvalOptions::default());
            let plan = Plan {
                dp: 64,
                ..Plan::default()
            };
            ev.class_compute(&ev.ctx(&plan))[crate::core::classes::ClassId::Attn as usize]
        };
        let (delayed, current) = (attn(Precision::Fp8), attn(Precision::Fp8Current));
        let tokens = f64::from(m.training.seq_len);
        let want = memory_bound_time(&c.gpu, 3.0 * tokens * 1536.0)
            + memory_bound_time(&c.gpu, 3.0 * tokens * 512.0);
        let gap = current.fwd - delayed.fwd;
        assert!((gap / want - 1.0).abs() < 1e-9, "MLA: {gap} vs {want}");
        assert!((delayed.bwd - current.bwd).abs() < 1e-12 * current.bwd);
    }

    #[test]
    fn mla_down_projections_run_on_the_ranks_own_rows_under_sp() {
        // DeepSeek-V3 at tp 2: the q and kv down-projections (replicated weights) project the
        // rank's s/2 rows with SP (Megatron-Core's `duplicated` TELinear), all s without; the
        // up-projections are column-parallel on all s either way.
        use autoplan_graph::{LayerKind, TpSplit};
        let mut m = resolve_model("deepseek-v3").expect("bundled");
        m.training.global_batch = 64;
        let (c, mut plan) = tp2_sp_on_64();
        let ev = Evaluator::new(&m, &c, EvalOptions::default());
        let attn = &ev.classes[crate::core::classes::ClassId::Attn as usize];
        let tokens = f64::from(m.training.seq_len);
        let mut gemm = |sp: bool| {
            plan.sp = sp;
            let x = ev.ctx(&plan);
            for g in &attn.gemms {
                let (rows, _, _) = ev.gemm_rows(LayerKind::Attention, g, &x);
                let want = match (g.split, sp) {
                    (TpSplit::Replicated, true) => tokens / 2.0,
                    _ => tokens,
                };
                assert_eq!(rows, want, "{:?} sp {sp}", g.split);
            }
            assert!(attn.gemms.iter().any(|g| g.split == TpSplit::Replicated));
            ev.class_compute(&x)[crate::core::classes::ClassId::Attn as usize].gemm
        };
        assert!(gemm(true) < gemm(false));
    }

    #[test]
    fn a_sliding_window_costs_its_window() {
        // Every block windowed at 4K: work ∝ s·w, so doubling the sequence doubles the core
        // (causal: ×4).
        let win = |seq| {
            let mut m = llama(seq);
            m.window = Some(SlidingWindow {
                tokens: 4096,
                full_every: 0,
            });
            core(&m, 1, 1).0
        };
        let r = win(65536) / win(32768);
        assert!((r - 2.0).abs() < 0.1, "windowed ×{r}");
        let r = core(&llama(65536), 1, 1).0 / core(&llama(32768), 1, 1).0;
        assert!((r - 4.0).abs() < 0.2, "causal ×{r}");
        // Half the blocks windowed (gpt-oss's alternation): between the two.
        let mut half = llama(65536);
        half.window = Some(SlidingWindow {
            tokens: 4096,
            full_every: 2,
        });
        let (h, w, c) = (core(&half, 1, 1).0, win(65536), core(&llama(65536), 1, 1).0);
        assert!((h - 0.5 * (w + c)).abs() / h < 1e-9, "{h} {w} {c}");
    }
}
