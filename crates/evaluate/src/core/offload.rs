//! Optimizer offload to host memory (`offload_optimizer`), priced as Megatron-Core runs it
//! (frameworks.md §1.9: `--optimizer-cpu-offload --optimizer-offload-fraction F
//! --overlap-cpu-optimizer-d2h-h2d`, `HybridDeviceOptimizer`):
//!
//! - **memory**: the offloaded fraction's optimizer state leaves HBM for host memory, with a
//!   host copy of its fp32 gradients (`autoplan-memory`, `stage.rs`); the host memory of the
//!   node, shared evenly by its GPUs, must hold it ([`Infeasible::OutOfHostMemory`]);
//! - **time**: after the pipeline flush and the gradient reduction the GPU steps its own share
//!   (`optimizer.rs`) and, for the offloaded share, the gradients go down (fp32, D2H), the CPU
//!   runs Adam and the updated 16-bit weights come back up (H2D). With
//!   `--overlap-cpu-optimizer-d2h-h2d` (which `--emit megatron` writes) the three run as a
//!   pipeline over parameter groups, so the offload costs the slowest of them; nothing of the
//!   step runs beside it (the next forward needs the weights), so it is exposed.
//!   - The transfers use the GPU's share of its host link (`[host] link_gbps / gpus_per_link`:
//!     PCIe measured H2D rates, collectives.md §3; NVLink-C2C, hardware.md §3), D2H and H2D in
//!     their own directions (both links are full duplex).
//!   - The CPU step streams the bytes the GPU's would (`optimizer.rs`: 34 per parameter for
//!     Adam) through the node's host memory bandwidth shared by its GPUs (all step at once),
//!     under the same streaming-efficiency curve as HBM. Calculon prices the optimizer the
//!     same way, as its bytes over the memory tier's bandwidth (calculon.md (c), (d)). The
//!     efficiency curve on host DRAM is an assumption: the notes have no measured CPU Adam
//!     rate. Since a host tier is never faster per GPU than HBM (cluster validation), the
//!     offloaded share never steps faster than on the GPU: offload never shortens a step.

//!
//! Parameter offload (`offload_params`: DeepSpeed ZeRO-Infinity `offload_param`, frameworks.md
//! §3.3; torchtitan `enable_cpu_offload`, FSDP `CPUOffloadPolicy`, §2.2) adds, per
//! micro-batch ([`Evaluator::param_offload_per_mb`]): the GPU's parameter shard comes up over
//! the host link (H2D) before each ZeRO-3 all-gather, forward and, when resharded, backward; the
//! reduce-scattered gradient shard goes down (D2H) after the backward. The framework prefetches
//! the next unit while the current one computes, so, as Calculon prices an offloaded tier
//! (calculon.md, "Offload (tier 2)": exposed = max(0, transfer − block time)), a pass exposes
//! what its transfers take beyond the pass's compute, and at least the first block's share
//! (nothing runs before it arrives). The transfers use the copy engines and the host link,
//! beside the all-gathers on NVLink/the network, so they hide behind the same compute. The
//! optimizer step still prices the whole optimizer offload as above, its gradient download and
//! weight upload included: with the parameters and gradients already on the host those
//! transfers do not run, so the step is an upper bound (the notes have no measured
//! ZeRO-Infinity step to set it by).
//!
//! Activation offload (`offload_activations`: Megatron-Core
//! `--cpu-offloading-num-layers N`, frameworks.md §1.7; DeepSpeed `cpu_checkpointing`, §3) adds,
//! per micro-batch ([`Evaluator::activation_offload_per_mb`]), on the bottleneck stage: the
//! offloaded layers' stored activations go down (D2H) in the forward and come back (H2D) in
//! the backward, over the GPU's share of the host link. How much of that is exposed is the
//! framework's (the profile's `activation_offload_overlap`):
//! - Megatron-Core through Transformer Engine copies on its own D2H and H2D streams: a layer's
//!   copy starts once its forward is done, spread over the following layers' forward, and the
//!   backward reloads a layer ahead of its use (`cpu_offload.py @ TE v2.8.0:L302-353,
//!   L481-545, L620-644`). A pass exposes what its copies take beyond the compute of the
//!   stage's other layers (the first layer's forward, the last layer's backward run before any
//!   copy can), and at least one layer's copy when every layer is offloaded (nothing computes
//!   after the last forward copy or before the first reload);
//! - DeepSpeed copies each checkpoint with `tensor.to(device)` on the compute stream
//!   (`runtime/utils.py @ v0.19.5:L164-177`; `checkpointing.py:L529-531, L625-627`): both
//!   copies exposed.

use autoplan_memory::MemoryBreakdown;
use autoplan_plan::Plan;

use super::ctx::Ctx;
use super::pipeline::StageTime;
use super::Evaluator;
use crate::Infeasible;

/// fp32 gradient bytes per offloaded parameter going down (Megatron's main gradients).
const D2H_BYTES_PER_PARAM: f64 = 4.0;

/// The optimizer step of a plan that offloads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct OffloadTime {
    /// The GPU's own share of the optimizer step, seconds.
    pub(super) gpu_optimizer: f64,
    /// The offloaded share: max of D2H, CPU step and H2D, seconds.
    pub(super) offload: f64,
}

impl Evaluator {
    /// The optimizer step split between the GPU and the host; `None` without offload (or
    /// without a host tier, which `check_host` refuses first).
    pub(super) fn offload(&self, plan: &Plan, x: &Ctx, pmax: &StageTime) -> Option<OffloadTime> {
        let f = plan.offload_fraction();
        if f <= 0.0 {
            return None;
        }
        let host = self.cluster.host?;
        let (params, per_param) = self.optimizer_shard(plan.zero, x, pmax);
        let gpn = self.cluster.node.gpus_per_node;
        let bytes = per_param * params;
        let gpu_optimizer =
            autoplan_cost::compute::memory_bound_time_with(&self.gpu, &self.eff, bytes * (1.0 - f));
        // The offloaded share's bytes at the GPU's HBM rate and efficiency, scaled to the
        // host's bandwidth per GPU.
        let on_gpu =
            autoplan_cost::compute::memory_bound_time_with(&self.gpu, &self.eff, bytes * f);
        let cpu = on_gpu * self.gpu.hbm_bw / host.memory_bw_per_gpu(gpn);
        let link = host.link_bw_per_gpu();
        let d2h = f * params * D2H_BYTES_PER_PARAM / link;
        let h2d = f * params * self.mem.weight_bytes() / link;
        Some(OffloadTime {
            gpu_optimizer,
            offload: cpu.max(d2h).max(h2d),
        })
    }

    /// The exposed host-link time of one micro-batch of a plan that offloads its parameters
    /// (module docs), seconds; 0 without parameter offload (or a host tier).
    pub(super) fn param_offload_per_mb(&self, plan: &Plan, x: &Ctx, pmax: &StageTime) -> f64 {
        if !plan.offload_params || !plan.zero.shards_params() {
            return 0.0;
        }
        let Some(host) = self.cluster.host else {
            return 0.0;
        };
        let z = plan.zero;
        let d_dense = z.shard_size(x.g_dp.size.max(1)).max(1) as f64;
        let d_exp = z.shard_size(x.g_edp.size.max(1)).max(1) as f64;
        let shard = pmax.params_dense / d_dense + pmax.params_expert / d_exp;
        let link = host.link_bw_per_gpu();
        let up = shard * self.mem.weight_bytes() / link;
        let down = shard * self.opts.grad_bytes / link;
        // Forward: the shard comes up; backward: again when resharded, while the gradient
        // shard goes down (the link is full duplex).
        let back = if z.gathers_in_backward() { up } else { 0.0 };
        let backward = back.max(down);
        let units = f64::from(pmax.blocks.max(1));
        let exposed = |t: f64, window: f64| (t - window).max(t / units).max(0.0);
        exposed(up, pmax.fwd) + exposed(backward, pmax.bwd)
    }

    /// The exposed host-link time of one micro-batch of a plan that offloads activations
    /// (module docs), on stage `stage` (`st` its times), seconds; 0 without activation offload.
    pub(super) fn activation_offload_per_mb(&self, plan: &Plan, stage: u32, st: &StageTime) -> f64 {
        if plan.offload_activations == 0 || st.blocks == 0 {
            return 0.0;
        }
        let Some(host) = self.cluster.host else {
            return 0.0;
        };
        let (dense, moe) = (f64::from(st.dense), f64::from(st.moe));
        let bytes = self
            .mem
            .offloaded_activation_bytes(plan, &self.mem_opts, stage, dense, moe);
        let t = bytes / host.link_bw_per_gpu();
        if !self.opts.activation_offload_overlap {
            // Copied on the compute stream: down in the forward, up in the backward.
            return 2.0 * t;
        }
        let blocks = st.blocks;
        let n = plan.offloaded_layers(blocks);
        let b = f64::from(blocks);
        let others = (b - 1.0) / b;
        let last = if n >= blocks { t / f64::from(n) } else { 0.0 };
        let exposed = |window: f64| (t - window).max(last).max(0.0);
        exposed(st.fwd * others) + exposed(st.bwd * others)
    }

    /// The host memory check: the offloaded state of the most loaded GPU against its share of
    /// the node's host memory.
    pub(super) fn check_host(&self, plan: &Plan, m: &MemoryBreakdown) -> Result<(), Infeasible> {
        if !plan.offloads() {
            return Ok(());
        }
        let need = self.mem.host_peak(plan, &self.mem_opts).max(m.host);
        let cap = self
            .cluster
            .host
            .map_or(0.0, |h| h.memory_per_gpu(self.cluster.node.gpus_per_node));
        if need > cap {
            return Err(Infeasible::OutOfHostMemory {
                host_bytes: need,
                capacity_bytes: cap,
            });
        }
        Ok(())
    }
}
