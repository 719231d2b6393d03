//! A framework's cost profile ([`autoplan_plan::framework::CostProfile`]) as evaluation
//! options: the one place the profile's mechanisms reach the evaluator.

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
    pub fn with_profile(self, p: &CostProfile) -> EvalOptions {
        EvalOptions {
            dp_overlap: p.dp_overlap,
            dp_overlap_with_pp: p.dp_overlap_with_pp,
            zero_grad_all_reduce: p.zero_grad_all_reduce,
            moe_dense_dispatch: p.moe_dense_dispatch,
            activation_offload_overlap: p.activation_offload_overlap,
            unpriced_compute: p.unpriced_compute,
            tp_overlap_hides: p.tp_overlap_hides,
            tp_bwd_async: p.tp_bwd_async,
            elementwise: p.elementwise,
            attention: if p.fused_attention {
                AttentionKernel::Flash
            } else {
                AttentionKernel::Unfused
            },
            ..self
        }
    }
}
