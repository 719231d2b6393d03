//! Tensor parallelism: the collectives of the TP group per class (Megatron's f/g all-reduces,
//! their sequence-parallel all-gather/reduce-scatter form, the TP→SP all-to-all of seed 001,
//! the vocab-parallel embedding, LM head and cross-entropy, the MTP module's).

use autoplan_cost::compute::bytes_per_element;
use autoplan_cost::Collective::{self, AllGather, AllReduce, AllToAll, ReduceScatter};
use autoplan_plan::{Plan, TpSpTransition};

use super::classes::{Class, ClassId};
use super::compute::{ComputeCost, ACT};
use super::ctx::Ctx;
use super::emit::{Comm, Emitter, Hide};
use super::Evaluator;
use crate::comm::{CommKind, Pass, Sink};

/// One TP collective of a table: what it does, its pass, the collective, the side of the
/// block it moves.
type TpCall = (&'static str, Pass, Collective, Side);

/// The tensor a TP collective moves: what the column-parallel GEMMs read (the all-gather before
/// them, the reduce-scatter or `f` all-reduce of their input gradient; `Class::tp_bwd` wide),
/// or what the row-parallel GEMM writes (its reduce-scatter or `g` all-reduce, the all-gather
/// of its output gradient; `Class::tp_fwd` wide).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    In,
    Out,
}
use Side::{In, Out};

/// Sequence parallelism (Korthikanti 2022 §4.2.2): all-gather before the column-parallel GEMM,
/// reduce-scatter after the row-parallel one, forward and (swapped) backward.
const ATTN_SP: [TpCall; 4] = [
    (
        "attention input all-gather (SP)",
        Pass::Forward,
        AllGather,
        In,
    ),
    (
        "attention out reduce-scatter (SP)",
        Pass::Forward,
        ReduceScatter,
        Out,
    ),
    (
        "attention out-grad all-gather (SP)",
        Pass::Backward,
        AllGather,
        Out,
    ),
    (
        "attention input-grad reduce-scatter (SP)",
        Pass::Backward,
        ReduceScatter,
        In,
    ),
];
const MLP_SP: [TpCall; 4] = [
    ("mlp input all-gather (SP)", Pass::Forward, AllGather, In),
    (
        "mlp out reduce-scatter (SP)",
        Pass::Forward,
        ReduceScatter,
        Out,
    ),
    (
        "mlp out-grad all-gather (SP)",
        Pass::Backward,
        AllGather,
        Out,
    ),
    (
        "mlp input-grad reduce-scatter (SP)",
        Pass::Backward,
        ReduceScatter,
        In,
    ),
];
/// Seed 003 §4: the conjugate f/g pair without SP.
const ATTN_FG: [TpCall; 2] = [
    (
        "attention out all-reduce (g)",
        Pass::Forward,
        AllReduce,
        Out,
    ),
    (
        "attention input-grad all-reduce (f)",
        Pass::Backward,
        AllReduce,
        In,
    ),
];
const MLP_FG: [TpCall; 2] = [
    ("mlp out all-reduce (g)", Pass::Forward, AllReduce, Out),
    (
        "mlp input-grad all-reduce (f)",
        Pass::Backward,
        AllReduce,
        In,
    ),
];
/// The MLP of a parallel attention + MLP block (GPT-NeoX `gpt_j_residual`, Black+22 §2.1; PaLM
/// §2; MegaScale §3.1): its partial output is added to the attention's and the sum reduced
/// once, by the attention's `g` (or SP reduce-scatter, whose backward all-gather likewise
/// serves both branches). What stays is the MLP's input side: the backward `f` all-reduce, or
/// under SP the input all-gather and the input-grad reduce-scatter (each branch's
/// column-parallel GEMM reads its own norm's output).
const MLP_PARALLEL_SP: [TpCall; 2] = [MLP_SP[0], MLP_SP[3]];
const MLP_PARALLEL_FG: [TpCall; 1] = [MLP_FG[1]];
/// Megatron SharedExpertMLP: all-gather in, reduce-scatter out, on the SP input.
const SHARED_EXPERT_SP: [TpCall; 4] = [
    (
        "shared-expert input all-gather (SP)",
        Pass::Forward,
        AllGather,
        In,
    ),
    (
        "shared-expert out reduce-scatter (SP)",
        Pass::Forward,
        ReduceScatter,
        Out,
    ),
    (
        "shared-expert out-grad all-gather (SP)",
        Pass::Backward,
        AllGather,
        Out,
    ),
    (
        "shared-expert input-grad reduce-scatter (SP)",
        Pass::Backward,
        ReduceScatter,
        In,
    ),
];
const HEAD_SP: [TpCall; 2] = [
    (
        "lm-head input all-gather (SP)",
        Pass::Forward,
        AllGather,
        In,
    ),
    (
        "lm-head input-grad reduce-scatter (SP)",
        Pass::Backward,
        ReduceScatter,
        In,
    ),
];
const HEAD_F: [TpCall; 1] = [(
    "lm-head input-grad all-reduce (f)",
    Pass::Backward,
    AllReduce,
    In,
)];

/// The TP collectives of one class with the forward GEMM time `gemm` to hide behind.
struct Tp<'p> {
    plan: &'p Plan,
    x: &'p Ctx,
    gemm: f64,
    /// The plan's TP overlap, where the framework's hides anything (`tp_overlap_hides`).
    overlap: bool,
    /// The window an input-gradient collective hides behind: the weight gradient of the
    /// column-parallel GEMMs it follows (`ComputeCost::gemm_in`), under `overlap` (Transformer
    /// Engine's bulk overlap) or where the framework launches it asynchronously
    /// (`EvalOptions::tp_bwd_async`); 0 otherwise.
    wgrad: f64,
    /// Bytes per element of an all-gather in the GEMMs' number format. Under a low-precision
    /// recipe sequence parallelism gathers the GEMM input already quantized and the output
    /// gradient likewise, reduce-scatters staying in 16 bits: Transformer Engine's
    /// `gather_along_first_dim(…, quantizer)` (`distributed.py` @ transformer-engine 2.9.0
    /// L1633-1664: FP8, blockwise FP8, MXFP8 and NVFP4 gathers) from the norm-fed
    /// `LayerNormLinear` (`layernorm_linear.py` L245-266), a column-parallel `Linear`
    /// (`linear.py` L204) and the row-parallel output gradient (`base.py`
    /// `grad_output_preprocess` L1161-1192); torchao's `Float8ColwiseParallel` /
    /// `PrepareFloat8ModuleInput` cast before the gather and `Float8RowwiseParallel` casts
    /// the output gradient before its backward all-gather (`float8/float8_tensor_parallel.py`
    /// @ torchao 0.18.0 L138-150). Block scales are not counted ([`bytes_per_element`]).
    gather_bytes: f64,
}

impl Tp<'_> {
    /// A TP collective of `bytes` in `pass`, hidden per the plan's TP overlap behind the GEMMs
    /// of the same pass (forward `gemm`, backward twice that).
    #[inline]
    fn overlapped(&self, what: &'static str, pass: Pass, op: Collective, bytes: f64) -> Comm {
        let window = match pass {
            Pass::Forward => self.gemm,
            _ => 2.0 * self.gemm,
        };
        let hide = if self.overlap {
            Hide::Tiled {
                tp: self.x.tp,
                window,
            }
        } else {
            Hide::Nothing
        };
        Comm::new(CommKind::Tp, what, pass, op, self.x.g_tp, bytes).hide(hide)
    }

    /// The input gradient's collective of a column-parallel GEMM (backward, input side):
    /// beside the weight-gradient GEMM (`wgrad`). With the plan's TP overlap that is Transformer
    /// Engine's bulk overlap, "Reduce-Scatter overlap with Bprop weight gradient GEMM"
    /// (Megatron-Core's `tp_comm_bulk_dgrad`, on by default, where the pipelined
    /// `tp_comm_overlap_rs_dgrad` is off: `model_parallel_config.py` @ core 0.19.2 L271-294),
    /// not a tiled overlap with the dgrad GEMM; without it, where the framework launches it
    /// asynchronously (Megatron's `LinearWithGradAccumulationAndAsyncCommunication.backward`,
    /// megatron-core 0.1.0 `tensor_parallel/layers.py` L286-327: `all_reduce` or
    /// `_reduce_scatter_base` with `async_op=True`, the wgrad GEMM, then `handle.wait()`).
    /// Either way the overlap never exposes more than no overlap.
    #[inline]
    fn input_grad(&self, what: &'static str, op: Collective, bytes: f64) -> Comm {
        let c = Comm::new(CommKind::Tp, what, Pass::Backward, op, self.x.g_tp, bytes);
        if self.wgrad > 0.0 {
            c.hide(Hide::Behind(self.wgrad))
        } else {
            c
        }
    }

    /// A TP collective that nothing hides.
    #[inline]
    fn exposed(&self, what: &'static str, pass: Pass, op: Collective, bytes: f64) -> Comm {
        Comm::new(CommKind::Tp, what, pass, op, self.x.g_tp, bytes)
    }

    /// Books every call of `calls`, overlapped: a call moves `m_tok` rows of its side's width
    /// (`widths`: input side, output side, elements per token), in 16 bits, an all-gather in
    /// `gather` bytes per element (`Tp::gather_bytes`, or 16 bits for the LM head).
    #[inline]
    fn book<S: Sink>(
        &self,
        e: &mut Emitter<'_, S>,
        calls: &[TpCall],
        widths: (f64, f64),
        gather: f64,
    ) {
        for &(what, pass, op, side) in calls {
            let width = match side {
                In => widths.0,
                Out => widths.1,
            };
            let elem = if op == AllGather { gather } else { ACT };
            let bytes = self.x.m_tok * width * elem;
            e.emit(if side == In && pass == Pass::Backward && op != AllGather {
                self.input_grad(what, op, bytes)
            } else {
                self.overlapped(what, pass, op, bytes)
            });
        }
    }
}

/// Whether class `id`'s TP collectives read the TP→SP transition: only the attention's output
/// takes seed 001's all-to-all (`tp_block`); every other class books the same under either.
#[inline]
pub(super) fn reads_transition(id: ClassId) -> bool {
    id == ClassId::Attn
}

impl Evaluator {
    /// The TP collectives of class `id` (`cc`: its compute, whose GEMM times hide them).
    pub(super) fn tp_comm<S: Sink>(
        &self,
        plan: &Plan,
        c: &Class,
        id: ClassId,
        x: &Ctx,
        cc: &ComputeCost,
        e: &mut Emitter<'_, S>,
    ) {
        if x.tp <= 1.0 {
            return;
        }
        let overlap = plan.tp_overlap && self.opts.tp_overlap_hides;
        let tp = Tp {
            plan,
            x,
            gemm: cc.gemm,
            overlap,
            wgrad: if self.opts.tp_bwd_async || overlap {
                cc.gemm_in
            } else {
                0.0
            },
            gather_bytes: if self.precision.is_low_precision() {
                bytes_per_element(self.precision)
            } else {
                ACT
            },
        };
        let a = x.m_tok * self.hidden * ACT;
        let hidden = (self.hidden, self.hidden);
        match id {
            ClassId::Attn | ClassId::Mlp => Self::tp_block(&tp, c, id, e),
            ClassId::Moe if self.classes[ClassId::Moe as usize].has_tp_shared_experts() => {
                // Shared experts run tensor-parallel over `tp` on the sequence-parallel input
                // (Megatron SharedExpertMLP): all-gather in, reduce-scatter out.
                tp.book(e, &SHARED_EXPERT_SP, hidden, tp.gather_bytes);
            }
            ClassId::Emb => {
                // Vocab-parallel embedding (seed 003 §4): partial lookups all-reduced; with SP
                // reduce-scattered straight into the sequence layout.
                let (what, op) = if x.sp {
                    ("vocab-parallel embedding reduce-scatter", ReduceScatter)
                } else {
                    ("vocab-parallel embedding all-reduce", AllReduce)
                };
                e.emit(tp.exposed(what, Pass::Forward, op, a));
            }
            // The LM head stays in 16 bits under a low-precision recipe (`gemm_fwd_parts`).
            ClassId::Head => tp.book(e, if x.sp { &HEAD_SP } else { &HEAD_F }, hidden, ACT),
            ClassId::Ce => {
                // Parallel cross-entropy (seed 003 §5.2): all-reduce of the b·s row max, the
                // target logit and the sum of exponentials (fp32), not an all-gather of logits.
                let b = x.m_tok * 4.0;
                let what = "cross-entropy max/target/sum-exp all-reduce";
                e.emit(tp.exposed(what, Pass::Forward, AllReduce, b).calls(3.0));
            }
            ClassId::Mtp => {
                let (f, b) = (x.m_tok * c.tp_fwd * ACT, x.m_tok * c.tp_bwd * ACT);
                e.emit(tp.overlapped("mtp module all-reduces (fwd)", Pass::Forward, AllReduce, f));
                e.emit(tp.overlapped("mtp module all-reduces (bwd)", Pass::Backward, AllReduce, b));
            }
            _ => {}
        }
    }

    /// Seed 003 §4: the conjugate f/g pair of Megatron's attention and MLP: one all-reduce of
    /// b·s·h forward (g, after the row-parallel GEMM) and one backward (f, the input gradient).
    /// With SP (Korthikanti 2022 §4.2.2) each becomes an all-gather before the column-parallel
    /// GEMM + a reduce-scatter after the row-parallel one, forward and (swapped) backward, each
    /// (t−1)/t of b·s·h. The input side is the class's `tp_bwd` wide (`h`; MLA's latents), the
    /// output side `tp_fwd`; the all-gathers move the GEMMs' number format.
    fn tp_block<S: Sink>(tp: &Tp<'_>, c: &Class, id: ClassId, e: &mut Emitter<'_, S>) {
        let attn = id == ClassId::Attn;
        let (widths, gather) = ((c.tp_bwd, c.tp_fwd), tp.gather_bytes);
        if reads_transition(id) && tp.plan.tp_sp_transition == TpSpTransition::AllToAll {
            // Seed 001 scheme 2: all-to-all of the attention output (b·s·a·d_v/t per
            // rank) to the sequence layout, then a replicated out_linear.
            let x = tp.x;
            let y = x.m_tok * c.o_elems / x.tp * ACT;
            let (f, b) = (Pass::Forward, Pass::Backward);
            // The all-to-alls are not tiled with a GEMM: all exposed.
            let a2a = |what, pass| tp.exposed(what, pass, AllToAll, y);
            let input = [
                ("attention input all-gather (SP)", f, AllGather, In),
                (
                    "attention input grad reduce-scatter (SP)",
                    b,
                    ReduceScatter,
                    In,
                ),
            ];
            tp.book(e, &input[..1], widths, gather);
            e.emit(a2a("attention out TP→SP all-to-all (seed 001)", f));
            tp.book(e, &input[1..], widths, gather);
            e.emit(a2a("attention out SP→TP all-to-all (grad)", b));
        } else {
            // The graph's MLP node of a parallel block reduces nothing forward (its output
            // joins the attention's reduction).
            let parallel_mlp = !attn && c.tp_fwd == 0.0;
            let calls: &[TpCall] = match (tp.x.sp, attn, parallel_mlp) {
                (true, true, _) => &ATTN_SP,
                (true, false, false) => &MLP_SP,
                (true, false, true) => &MLP_PARALLEL_SP,
                (false, true, _) => &ATTN_FG,
                (false, false, false) => &MLP_FG,
                (false, false, true) => &MLP_PARALLEL_FG,
            };
            tp.book(e, calls, widths, gather);
        }
    }
}
