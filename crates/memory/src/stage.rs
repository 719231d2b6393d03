//! One stage's breakdown: parameters sharded by ZeRO into weights, gradients and optimizer
//! state, activations times the micro-batches in flight (DualPipe: two stages), transient
//! buffers.

use autoplan_plan::{Dispatcher, Plan, Schedule};

use crate::{MemoryBreakdown, MemoryOptions, ModelMemory, B16};

/// Host bytes per offloaded parameter beside its optimizer state: the fp32 gradient copy the
/// CPU optimizer reads (frameworks.md §1.9, `--no-pin-cpu-grads`).
const HOST_GRAD_BYTES: f64 = 4.0;

impl ModelMemory {
    /// The breakdown of a GPU of stage `stage` (DualPipe: of rank `stage`, holding two stages).
    pub(crate) fn stage(&self, plan: &Plan, opts: &MemoryOptions, stage: u32) -> MemoryBreakdown {
        let pp = plan.pp.max(1);
        let (dense, moe) = self.stage_blocks(plan, stage);
        let mut p = self.stage_params(plan, stage, dense, moe);
        let (stored, working, recomputed, mut logits, per_block) =
            self.stage_acts(plan, opts, stage, dense, moe);
        let in_flight = self.in_flight(plan, stage);
        // Activation offload: each micro-batch in flight keeps its offloaded layers in host
        // memory, HBM one layer's worth for the copy in flight (`offloaded_acts`); never more
        // than without offload (the copy in flight is at most what left).
        let offload = |stored: f64, blocks: f64, per_block: f64| {
            let (off, keep) = self.offloaded_acts(plan, blocks, per_block);
            let host = off * in_flight;
            ((stored - off) * in_flight + keep.min(host), host)
        };
        let (kept, mut act_host) = offload(stored, dense + moe, per_block);
        // One block's working set, or less when under one recomputed block is in flight.
        let mut activations = kept + working * (in_flight * recomputed).min(1.0);
        if plan.schedule == Schedule::DualPipe && pp > 1 {
            // DualPipe rank `stage` also holds the mirror stage pp−1−stage.
            let mirror = pp - 1 - stage;
            if mirror != stage {
                let (d2, m2) = self.stage_blocks(plan, mirror);
                let q = self.stage_params(plan, mirror, d2, m2);
                p.dense += q.dense;
                p.expert += q.expert;
                p.o_extra += q.o_extra;
                let (s2, w2, r2, l2, b2) = self.stage_acts(plan, opts, mirror, d2, m2);
                // (pp+1) micro-batches of a stage's activations: half of them of each stage.
                let (k2, h2) = offload(s2, d2 + m2, b2);
                let mirror_acts = k2 + w2 * (in_flight * r2).min(1.0);
                activations = (activations + mirror_acts) / 2.0;
                act_host = (act_host + h2) / 2.0;
                logits += l2;
            }
        }

        // What the data-parallel ranks shard (`Zero`): optimizer state from stage 1, gradients
        // from 2, parameters from 3 (Rajbhandari+20 §5.1–5.3), over the whole group or an HSDP
        // shard group.
        let zero = plan.zero;
        let d_dense = zero.shard_size(plan.dp.max(1) * plan.cp.max(1)) as f64;
        let d_exp = zero.shard_size(plan.edp().max(1)) as f64;
        let shard = |on: bool, d: f64| if on { d } else { 1.0 };
        let (s1, s2, s3) = (
            zero.shards_optimizer(),
            zero.shards_grads(),
            zero.shards_params(),
        );
        // `wb`: the 16-bit copy a ZeRO-3 gather brings up; `kb`: what each rank keeps of a
        // parameter.
        let wb = self.weight_bytes;
        let fp32 = opts.fp32_params && wb < 4.0;
        // Under PyTorch's mixed precision a stage-1 plan is FSDP gathering each pipeline stage
        // once per step (PyTorch's pipelining, `ShardModes::pp_once_per_step`; neither
        // torchtitan nor Composer shards the optimizer state alone): a rank keeps its fp32
        // shard and, for the whole step, the gathered 16-bit copy.
        let once = fp32 && s1 && !s2 && !s3;
        let (kb, gb, ob) = if fp32 {
            // PyTorch's mixed precision (`MemoryOptions::fp32_params`): the fp32 parameter is
            // the optimizer's own, its gradient fp32; the optimizer holds its states alone.
            (4.0, 4.0, self.optimizer_bytes - 4.0)
        } else {
            let gb = if opts.fp32_main_grads { 4.0 } else { wb };
            // Without fp32 main grads the optimizer keeps an fp32 master-gradient copy (if the
            // weights are 16-bit).
            let master_grad = if !opts.fp32_main_grads && wb < 4.0 {
                4.0
            } else {
                0.0
            };
            (wb, gb, self.optimizer_bytes + master_grad)
        };
        // FSDP without resharding after forward keeps the stage's gathered 16-bit parameters
        // from the forward through the backward (frameworks.md §3.6, `reshard_after_forward`
        // False): the sharded copy plus the whole gathered one, where a group is sharded.
        let kept = |d: f64| {
            if (zero.keeps_gathered() || once) && d > 1.0 {
                1.0
            } else {
                0.0
            }
        };
        // The once-per-step gather shards the parameters as stage 3 does.
        let s3 = s3 || once;
        let per_param =
            |d: f64| kb / shard(s3, d) + wb * kept(d) + gb / shard(s2, d) + ob / shard(s1, d);
        // The kept share over the gathered copy's bytes: 1 but under `fp32_params`.
        let r = kb / wb;
        let weights = wb
            * (p.dense * (r / shard(s3, d_dense) + kept(d_dense))
                + p.expert * (r / shard(s3, d_exp) + kept(d_exp)));
        let grads = gb * (p.dense / shard(s2, d_dense) + p.expert / shard(s2, d_exp));
        let opt_params = p.dense / shard(s1, d_dense) + p.expert / shard(s1, d_exp);
        // Optimizer offload (`offload_optimizer`, Megatron-Core's `HybridDeviceOptimizer`,
        // frameworks.md §1.9): the offloaded fraction's optimizer state (fp32 master weights
        // and moments) lives in host memory, with a host copy of its fp32 gradients (the
        // `--no-pin-cpu-grads`/`--no-pin-cpu-params` buffers); the GPU keeps the 16-bit
        // weights and main gradients.
        let off = plan.offload_fraction();
        let optimizer = ob * opt_params * (1.0 - off);
        let mut host = off * opt_params * (ob + HOST_GRAD_BYTES) + act_host;
        // Parameter offload (`offload_params`, ZeRO-Infinity's `offload_param` / FSDP's
        // `CPUOffloadPolicy`, frameworks.md §3.3, §2.2; `autoplan_plan::offload_params`): the
        // ZeRO-3 shard of the 16-bit parameters and of the gradients lives in host memory; HBM
        // keeps the gathered working set (the transient below; without resharding, the
        // gathered copy kept from forward to backward) only.
        let (mut weights, mut grads) = (weights, grads);
        if plan.offload_params && s3 {
            let shard = kb * (p.dense / d_dense + p.expert / d_exp);
            host += shard + grads;
            weights -= shard;
            grads = 0.0;
        }
        let extra = p.o_extra * per_param(d_dense);

        // Transient: ZeRO-3 resharding after forward gathers one block at a time (when it is
        // sharded), MoE dispatch buffers.
        let mut transient: f64 = 0.0;
        if zero.gathers_in_backward() || plan.offload_params {
            let mut gather = 0.0;
            if d_dense > 1.0 || plan.offload_params {
                gather += wb * p.largest_dense_block;
            }
            if d_exp > 1.0 || plan.offload_params {
                gather += wb * p.largest_expert_block;
            }
            // Offloaded parameters come up a block ahead of their use: two blocks resident
            // (Calculon's double buffer for an offloaded class, calculon.md, "Offload
            // (tier 2)").
            transient = gather * if plan.offload_params { 2.0 } else { 1.0 };
        }
        let has_moe =
            moe > 0.0 || (stage + 1 == pp && self.mtp_block_is_moe && self.mtp_modules > 0.0);
        if has_moe {
            transient = transient.max(self.dispatch_buffers(plan));
        }
        MemoryBreakdown {
            weights,
            grads,
            optimizer,
            activations,
            logits,
            extra,
            transient,
            reserve: opts.reserve_bytes,
            host,
            total: 0.0,
            stage,
            in_flight,
        }
        .finish()
    }

    /// Of `dispatchers`, the first whose plans hold the least memory (`None` for an empty
    /// list): memory reads the dispatcher only through its dispatch buffers
    /// (`dispatch_buffers`), one size on every stage, which the stage's transient memory takes
    /// the largest of with its other buffers, so the smallest buffer holds the least on every
    /// stage (a memory floor prices that one alone; `tests/memory.rs` checks it against every
    /// dispatcher).
    pub fn least_memory_dispatcher(
        &self,
        plan: &Plan,
        dispatchers: &[Dispatcher],
    ) -> Option<Dispatcher> {
        let size = |d: Dispatcher| {
            self.dispatch_buffers(&Plan {
                dispatcher: d,
                ..*plan
            })
        };
        dispatchers
            .iter()
            .copied()
            .reduce(|a, b| if size(b) < size(a) { b } else { a })
    }

    /// The MoE dispatch buffers of one micro-batch: the all-to-all's send and receive buffers,
    /// or the all-gathered tokens of the EP group and the received ones.
    fn dispatch_buffers(&self, plan: &Plan) -> f64 {
        let tp = plan.tp.max(1) as f64;
        let seq_div = if plan.sp { tp } else { 1.0 };
        let tokens = self.seq_len * plan.mbs as f64 / plan.cp.max(1) as f64 / seq_div;
        let moe_tp = plan.moe_tp.max(1) as f64;
        let row = B16 * self.hidden;
        let received = tokens * self.top_k * self.load_factor * moe_tp * row;
        if plan.ep.max(1) as f64 * moe_tp <= 1.0 {
            // A dispatch group of one moves nothing: Megatron's all-to-all and all-gather
            // return their input there ("Bypass the function if we are using only 1 GPU",
            // `tensor_parallel/mappings.py` @ core 0.19.2 L133-136, L433-436), so every
            // dispatcher holds the permuted rows alone — the dispatcher does not matter
            // (`Knob::Dispatcher`), and neither does its buffer.
            return received;
        }
        match plan.dispatcher {
            // DeepEP's buffers hold what an all-to-all's do (its RDMA and NVLink staging
            // buffers are allocated once, inside the framework reserve).
            Dispatcher::AllToAll | Dispatcher::DeepEp => tokens * self.top_k * row + received,
            Dispatcher::AllGather => tokens * plan.ep.max(1) as f64 * moe_tp * row + received,
        }
    }
}
