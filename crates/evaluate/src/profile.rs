//! A framework's cost profile ([`autoplan_plan::framework::CostProfile`]) as evaluation
//! options: the one place the profile's mechanisms reach the evaluator.

use autoplan_cluster::{Cluster, Precision};
use autoplan_plan::framework::CostProfile;

use crate::{AttentionKernel, EvalOptions};

impl EvalOptions {
    /// These options with the overlap and kernel mechanisms of profile `p`: the DP reduction
    /// overlapped with the backward or not (`dp_overlap`), ZeRO-1/2's reduction an all-reduce
    /// or a reduce-scatter, the backward's input-gradient TP collectives asynchronous or not,
    /// the attention core fused or not, the MoE dispatch a gather or
    /// dense einsums, the elementwise ops fused or run as kernels of their own, and the compute
    /// its runs spend beyond the priced kernels (`unpriced_compute`, fitted per profile).
    /// The TP overlap is the plan's (`tp_overlap`), which the profile's runs set
    /// (`CostProfile::tp_comm_overlap`) and the capability table bounds.
    ///
    /// `precision` is the training precision: FP16 training reduces FP16 gradients. Megatron
    /// forces FP32 gradient accumulation and reduction under `--bf16` only
    /// (`training/arguments.py` @ core 0.19.2 L1170-1194: "bfloat16 requires gradient
    /// accumulation and all-reduce to be done in fp32"); under `--fp16`
    /// `accumulate_allreduce_grads_in_fp32` keeps its default, off, and the DDP's gradient
    /// buffer takes the parameters' dtype (frameworks.md §1's "20 (fp16/fp16)" bytes per
    /// parameter, the optimizer's FP32 copy of the gradient among them). A profile that
    /// reduces in the training dtype (`reduce_in_training_dtype`: DeepSpeed) moves 16-bit
    /// gradients whatever it accumulates them in, unless the training is FP32 or TF32 (FP8
    /// and FP4 runs keep BF16 parameters and gradients).
    pub fn with_profile(self, p: &CostProfile, precision: Precision) -> EvalOptions {
        EvalOptions {
            grad_bytes: if precision == Precision::Fp16 {
                2.0
            } else {
                self.grad_bytes
            },
            grad_reduce_bytes: (p.reduce_in_training_dtype
                && !matches!(precision, Precision::Fp32 | Precision::Tf32))
            .then_some(2.0),
            dp_overlap: p.dp_overlap,
            dp_overlap_with_pp: p.dp_overlap_with_pp,
            zero_grad_all_reduce: p.zero_grad_all_reduce,
            moe_dense_dispatch: p.moe_dense_dispatch,
            activation_offload_overlap: p.activation_offload_overlap,
            unpriced_compute: p.unpriced_compute,
            expert_gemm_host: p.expert_gemm_host,
            tp_overlap_hides: p.tp_overlap_hides,
            tp_bwd_async: p.tp_bwd_async,
            elementwise: p.elementwise,
            attention: p.attention,
            // Where the parameters live between uses (fp32 under PyTorch's mixed precision):
            // the memory's layout, not a cost.
            memory: autoplan_memory::MemoryOptions {
                fp32_params: p.fp32_params,
                ..self.memory
            },
            ..self
        }
    }

    /// Bytes per gradient element the DP and EDP reductions move: the framework's cast
    /// (`grad_reduce_bytes`) where it has one, the gradient buffer's dtype otherwise.
    pub fn reduce_bytes(&self) -> f64 {
        self.grad_reduce_bytes.unwrap_or(self.grad_bytes)
    }

    /// Bytes per gradient element of ZeRO-1/2's bucketed reduction with `cp`-way context
    /// parallelism: as [`Self::reduce_bytes`], except that the framework that casts its
    /// gradients (DeepSpeed) casts them to FP32 there under sequence parallelism (Ulysses,
    /// which is CP there: `allreduce_bucket`, `zero/stage_1_and_2.py` @ v0.16.9 L1510-1513).
    pub fn zero12_reduce_bytes(&self, cp: f64) -> f64 {
        match self.grad_reduce_bytes {
            Some(_) if cp > 1.0 => 4.0,
            _ => self.reduce_bytes(),
        }
    }

    /// These options on `cluster`, whatever the framework and the options
    /// asked for: what its GPUs decide (applied by `Evaluator::new`, so `search`, `evaluate`,
    /// `sweep`, `report` and `validate` agree). Attention is unfused on a GPU no fused kernel
    /// runs on (`GpuArch::runs_fused_attention`: V100, Pascal), the `s×s` scores computed and
    /// kept.
    pub(crate) fn on(self, cluster: &Cluster) -> EvalOptions {
        let mut o = self;
        if !cluster.gpu.arch.runs_fused_attention() {
            o.attention = AttentionKernel::Unfused;
        }
        o
    }
}
