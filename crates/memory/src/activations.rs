//! Stored activations: one block's bytes under each recompute mode, a stage's micro-batch,
//! and the micro-batches in flight.

use autoplan_plan::{PipelineSplit, Plan, Recompute, RecomputeModules, Schedule};

use crate::{Acts, MemoryOptions, ModelMemory, B16};

impl ModelMemory {
    /// Stored activation bytes of one transformer block for one micro-batch on one GPU, with
    /// `recompute` applied (selective: the plan's [`Plan::recompute_modules`]) and no
    /// full-recompute working set: the Korthikanti et al. 2022 per-layer figure (see the crate
    /// docs). `moe` picks the MoE block kind.
    pub fn block_activation_bytes(
        &self,
        plan: &Plan,
        opts: &MemoryOptions,
        moe: bool,
        recompute: Recompute,
    ) -> f64 {
        let modules = match recompute {
            Recompute::None => RecomputeModules(0),
            Recompute::Selective => plan.recompute_modules,
            Recompute::Full => return self.block_input_bytes(plan),
        };
        self.block_bytes(plan, opts, moe, modules)
    }

    /// A block's input, all that full recompute keeps of it: `2·T·h` (`/t` with SP).
    pub(crate) fn block_input_bytes(&self, plan: &Plan) -> f64 {
        let seq_div = if plan.sp { plan.tp.max(1) as f64 } else { 1.0 };
        let tokens = self.seq_len * plan.mbs as f64 / plan.cp.max(1) as f64;
        tokens * B16 * self.hidden / seq_div
    }

    /// Stored bytes of one block when the Megatron-Core `modules` are recomputed. Each module
    /// drops what it produces and keeps its input (Megatron-Core `transformer_layer.py`,
    /// `CheckpointWithoutOutput` / `tensor_parallel.checkpoint` per module):
    /// - `core_attn`: the `s×s` scores (only stored by an unfused attention kernel);
    /// - `layernorm`: each pre-norm's output, the next GEMM's input (`2·h` per norm, 1 byte
    ///   per element under FP8);
    /// - `mla_up_proj`: MLA's `Q`, `K`, `V` (the `q_b`/`kv_b` outputs after RoPE);
    /// - `moe_act`: the routed experts' activation output, their `fc2` input;
    /// - `shared_experts`: the shared experts' inner activations;
    /// - `mlp` / `moe`: everything of the dense MLP / MoE layer but its input (the norm input)
    ///   and the dropout mask after it.
    pub(crate) fn block_bytes(
        &self,
        plan: &Plan,
        opts: &MemoryOptions,
        moe: bool,
        m: RecomputeModules,
    ) -> f64 {
        let tp = plan.tp.max(1) as f64;
        let seq_div = if plan.sp { tp } else { 1.0 };
        let tokens = self.seq_len * plan.mbs as f64 / plan.cp.max(1) as f64;
        let keep_scores = !m.has(RecomputeModules::CORE_ATTN) && !opts.flash_attention;
        let kv_rep = self.kv_heads.max(tp) / self.kv_heads;
        // FP8: GEMM inputs take 1 byte instead of 2.
        let lin = if self.fp8 { 0.5 } else { 0.0 };
        let acts = |x: Acts| {
            (x.seq - lin * x.lin_seq) / seq_div
                + (x.split - lin * x.lin_split) / tp
                + x.kv * kv_rep / tp
                + if keep_scores { x.scores / tp } else { 0.0 }
        };
        // The pre-norm output is the first GEMM's input (a `lin_seq` term of every part).
        let drop_norm_out = |mut x: Acts| {
            if m.has(RecomputeModules::LAYERNORM) {
                x.seq -= B16 * self.hidden;
                x.lin_seq -= B16 * self.hidden;
            }
            x
        };
        // Only the input (the norm input) and the dropout mask after the layer stay.
        let input_only = Acts {
            seq: B16 * self.hidden + self.dropout_bytes,
            ..Acts::default()
        };
        let mut attn = drop_norm_out(self.attn_act);
        if m.has(RecomputeModules::MLA_UP_PROJ) {
            attn.split -= self.mla_qkv;
        }
        let mut per_token = acts(attn);
        if moe {
            if m.has(RecomputeModules::MOE) {
                return tokens * (per_token + acts(input_only));
            }
            let mut fixed = drop_norm_out(self.moe_act);
            if m.has(RecomputeModules::SHARED_EXPERTS) {
                fixed.split = 0.0;
                fixed.lin_split = 0.0;
            }
            let (mut inner, mut inner_lin) = (self.moe_routed_inner, self.moe_routed_inner_lin);
            if m.has(RecomputeModules::MOE_ACT) {
                inner -= inner_lin;
                inner_lin = 0.0;
            }
            let moe_tp = plan.moe_tp.max(1) as f64;
            // Tokens entering the MoE layer are the SP shard (tp copies without SP).
            per_token += acts(fixed)
                + (self.load_factor
                    * ((1.0 - lin) * self.moe_routed_in * moe_tp + inner - lin * inner_lin))
                    / seq_div;
        } else if m.has(RecomputeModules::MLP) {
            per_token += acts(input_only);
        } else {
            per_token += acts(drop_norm_out(self.mlp_act));
        }
        tokens * per_token
    }
    /// Activations of one micro-batch of stage `stage`, with recompute; returns (stored bytes
    /// excluding logits, the extra working set of one full-recompute block, the number of
    /// recomputed blocks, logits bytes, the stored bytes of an average block of the stage).
    pub(crate) fn stage_acts(
        &self,
        plan: &Plan,
        opts: &MemoryOptions,
        stage: u32,
        dense: f64,
        moe: f64,
    ) -> (f64, f64, f64, f64, f64) {
        let pp = plan.pp.max(1);
        let tp = plan.tp.max(1) as f64;
        let seq_div = if plan.sp { tp } else { 1.0 };
        let tokens = self.seq_len * plan.mbs as f64 / plan.cp.max(1) as f64;
        let blocks = dense + moe;
        let none = |is_moe| self.block_activation_bytes(plan, opts, is_moe, Recompute::None);
        let mode = |is_moe| self.block_activation_bytes(plan, opts, is_moe, plan.recompute);
        // `count · bytes` of one block kind, not priced where the stage has none of it (the
        // evaluator asks this of every plan: pricing a dense model's MoE block is waste).
        fn times(count: f64, bytes: impl Fn(bool) -> f64, is_moe: bool) -> f64 {
            if count == 0.0 {
                0.0
            } else {
                count * bytes(is_moe)
            }
        }
        let all_none = times(dense, none, false) + times(moe, none, true);
        let all_mode = if plan.recompute == Recompute::None {
            all_none
        } else {
            times(dense, mode, false) + times(moe, mode, true)
        };
        // Blocks recomputed: all, or the first N of each of the vpp chunks.
        let recomputed = match (plan.recompute, plan.recompute_layers) {
            (Recompute::None, _) => 0.0,
            (_, None) => blocks,
            (_, Some(n)) => (n as f64 * plan.vpp.max(1) as f64).min(blocks),
        };
        let frac = if blocks > 0.0 {
            recomputed / blocks
        } else {
            0.0
        };
        let mut stored = frac * all_mode + (1.0 - frac) * all_none;
        let per_block = if blocks > 0.0 { stored / blocks } else { 0.0 };
        // Full recompute: while a block is recomputed its selective-level activations exist
        // in addition to the other checkpoints (its own checkpoint is part of them). The
        // block's size is the stage's average, as for `recompute_layers` above; the caller
        // scales it by min(1, recomputed blocks in flight), which keeps full ≤ selective.
        let working = if plan.recompute == Recompute::Full && recomputed > 0.0 {
            let sel = |is_moe| self.block_bytes(plan, opts, is_moe, RecomputeModules::DEFAULT);
            let avg = (dense * sel(false) + moe * sel(true)) / blocks;
            (avg - mode(false)).max(0.0)
        } else {
            0.0
        };
        let mut logits = 0.0;
        if stage == 0 && self.dropout {
            stored += tokens * self.hidden / seq_div; // embedding dropout mask
        }
        if stage == 0 && self.embedding_norm {
            stored += tokens * B16 * self.hidden / seq_div; // embedding norm input
        }
        if stage + 1 == pp {
            let unit = 128.0 * tp;
            let vocab_gpu = (self.vocab / unit).ceil() * unit / tp;
            // Final-norm input and LM-head input (Korthikanti §4.3), then fp32 logits.
            stored += tokens * 2.0 * B16 * self.hidden / seq_div;
            logits = (1.0 + self.mtp_modules) * 4.0 * tokens * vocab_gpu;
            if self.mtp_modules > 0.0 {
                // Each MTP module: its block plus two norm inputs and the projection input.
                let blk = if self.mtp_block_is_moe {
                    mode(true)
                } else {
                    mode(false)
                };
                stored += self.mtp_modules * (blk + tokens * 3.0 * B16 * self.hidden / seq_div);
            }
        }
        (stored, working, recomputed, logits, per_block)
    }

    /// Activation offload on a stage of `blocks` blocks whose average block stores
    /// `per_block` bytes per micro-batch (`offload_activations`, `autoplan_plan::
    /// offload_activations`): (bytes of one micro-batch in host memory, bytes HBM keeps for
    /// the copy in flight). The offloaded layers' stored activations leave HBM; the framework
    /// keeps one layer's worth on the GPU: Transformer Engine releases a layer only when its
    /// copy's window closes and reloads one layer ahead of the backward
    /// (`cpu_offload.py @ TE v2.8.0:L481-545, L620-644`), DeepSpeed brings one checkpoint back
    /// for the layer it recomputes (`checkpointing.py @ v0.19.5:L625-627`).
    pub(crate) fn offloaded_acts(&self, plan: &Plan, blocks: f64, per_block: f64) -> (f64, f64) {
        if plan.offload_activations == 0 || blocks <= 0.0 {
            return (0.0, 0.0);
        }
        let n = plan.offloaded_layers(blocks.round() as u32) as f64;
        (n * per_block, per_block)
    }

    /// Stored activation bytes per micro-batch that a stage of `dense` + `moe` blocks offloads
    /// (`offload_activations`): what goes down in each forward and comes back in each backward
    /// (the evaluator's transfers).
    pub fn offloaded_activation_bytes(
        &self,
        plan: &Plan,
        opts: &MemoryOptions,
        stage: u32,
        dense: f64,
        moe: f64,
    ) -> f64 {
        if plan.offload_activations == 0 {
            return 0.0;
        }
        let (.., per_block) = self.stage_acts(plan, opts, stage, dense, moe);
        self.offloaded_acts(plan, dense + moe, per_block).0
    }

    /// Micro-batches in flight on `stage` (units of the stage's per-micro-batch activations).
    pub(crate) fn in_flight(&self, plan: &Plan, stage: u32) -> f64 {
        let pp = plan.pp.max(1) as f64;
        let i = stage as f64;
        let n = self.global_batch / (plan.mbs.max(1) as f64 * plan.dp.max(1) as f64);
        match plan.schedule {
            Schedule::OneF1B | Schedule::ZeroBubble => n.min(pp - i),
            Schedule::Interleaved => {
                let v = plan.vpp.max(1) as f64;
                let chunks = (n * v).min(2.0 * (pp - i - 1.0) + (v - 1.0) * pp + 1.0);
                match plan.stage_layout_for_blocks(self.blocks) {
                    Some(l) if l.split != PipelineSplit::Blocks && l.blocks(stage) > 0 => {
                        // Chunks of unequal blocks (the embedding or the loss fills a slot):
                        // Megatron's warm-up runs the forwards in groups of pp micro-batches
                        // per chunk (`microbatch_group_size_per_vp_stage` = pp, frameworks.md
                        // §1.2), forward k on chunk ⌊k/pp⌋ mod v; weigh each chunk's forwards
                        // in flight by its share of the stage's blocks.
                        let (p, vu) = (plan.pp.max(1), plan.vpp.max(1));
                        let f = chunks.round() as u32;
                        let (cycles, rem) = (f / (p * vu), f % (p * vu));
                        let held: f64 = (0..vu)
                            .map(|c| {
                                let k = cycles * p + rem.saturating_sub(c * p).min(p);
                                k as f64 * l.chunk_blocks(stage, c)
                            })
                            .sum();
                        held / l.blocks(stage) as f64
                    }
                    _ => chunks / v,
                }
            }
            Schedule::DualPipe => n.min(pp + 1.0),
        }
    }
}
