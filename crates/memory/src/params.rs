//! Parameters on a stage: its blocks, the experts (and redundant copies) of a GPU, the
//! embedding, head and MTP modules.

use autoplan_plan::{PlacementPolicy, Plan, TpSpTransition};

use crate::ModelMemory;

impl ModelMemory {
    /// Blocks of stage `stage` (of the plan's layout), split into (dense, MoE).
    pub(crate) fn stage_blocks(&self, plan: &Plan, stage: u32) -> (f64, f64) {
        let spec_layers = self.blocks;
        // StageLayout needs a ModelSpec only for the block count; rebuild it from the plan.
        let layout = layout_of(plan, spec_layers);
        let (first, n) = match layout {
            Some(l) => (l.first_block(stage), l.blocks(stage)),
            None => {
                // Invalid layout (check() rejects it): spread evenly, rounding up.
                let n = spec_layers.div_ceil(plan.pp.max(1));
                ((stage * n).min(spec_layers), n)
            }
        };
        let end = first + n;
        let dense = self.dense_blocks.min(end).saturating_sub(first);
        (dense as f64, (n - dense.min(n)) as f64)
    }

    /// Redundant expert copies each GPU of the EP group holds per MoE block under the plan's
    /// placement policy: 0 for contiguous placement, `R` for `placement=balanced:R` (seed 004
    /// §4's virtual experts, DeepSeek EPLB's redundant experts), capped at `E − E/ep`: a GPU
    /// holds each expert at most once, so further slots could hold nothing new.
    pub fn replicas_per_gpu(&self, plan: &Plan) -> f64 {
        match plan.placement {
            PlacementPolicy::Contiguous => 0.0,
            PlacementPolicy::Balanced { redundant } => {
                let e = self.expert_count;
                (redundant as f64)
                    .min(e - e / plan.ep.max(1) as f64)
                    .max(0.0)
            }
        }
    }

    /// Routed-expert parameters of one MoE block on one GPU: the `E/ep` experts of its EP rank
    /// plus its [`replicas_per_gpu`](Self::replicas_per_gpu) copies, each split by `moe_tp`.
    /// Replicas are trained copies: their gradients and optimizer state are counted and
    /// sharded over the expert data-parallel group like the experts' own.
    pub fn experts_per_gpu(&self, plan: &Plan) -> f64 {
        if self.expert_count <= 0.0 {
            return 0.0;
        }
        let per_expert = self.experts / self.expert_count;
        let local = self.expert_count / plan.ep.max(1) as f64 + self.replicas_per_gpu(plan);
        per_expert * local / plan.moe_tp.max(1) as f64
    }

    /// Static bytes (weights, grads, optimizer, seed-001 extra) and the gathered weights of
    /// the largest block under ZeRO-3, for the parameters of stage `stage`.
    pub(crate) fn stage_params(
        &self,
        plan: &Plan,
        stage: u32,
        dense: f64,
        moe: f64,
    ) -> StageParams {
        let tp = plan.tp.max(1) as f64;
        let pp = plan.pp.max(1);
        let g = self.kv_heads;
        let attn = self.attn.per_gpu(tp, g);
        let mlp = self.mlp.per_gpu(tp, g);
        let moe_fixed = self.moe_fixed.per_gpu(tp, g);
        let experts = self.experts_per_gpu(plan);
        let blocks = dense + moe;
        let mut ne = blocks * attn + dense * mlp + moe * moe_fixed;
        let mut ex = moe * experts;
        // Vocabulary padded to a multiple of 128·tp (Megatron), split by tp.
        let unit = 128.0 * tp;
        let vocab_gpu = (self.vocab / unit).ceil() * unit / tp;
        if stage == 0 {
            ne += vocab_gpu * self.hidden + self.positions;
        }
        if stage + 1 == pp {
            ne += self.final_norm;
            if !self.tied || pp > 1 {
                ne += vocab_gpu * self.hidden;
            }
            if self.mtp_modules > 0.0 {
                let (blk_ne, blk_ex) = if self.mtp_block_is_moe {
                    (attn + moe_fixed, experts)
                } else {
                    (attn + mlp, 0.0)
                };
                ne += self.mtp_modules * (self.mtp_fixed + blk_ne);
                ex += self.mtp_modules * blk_ex;
            }
        }
        let o_extra = if plan.tp_sp_transition == TpSpTransition::AllToAll {
            blocks * self.attn_out * (1.0 - 1.0 / tp)
        } else {
            0.0
        };
        let largest_block = attn
            + if moe > 0.0 {
                moe_fixed.max(mlp * f64::from(dense > 0.0))
            } else {
                mlp
            };
        StageParams {
            dense: ne,
            expert: ex,
            o_extra,
            largest_dense_block: if blocks > 0.0 { largest_block } else { 0.0 },
            largest_expert_block: if moe > 0.0 { experts } else { 0.0 },
        }
    }
}

pub(crate) struct StageParams {
    /// Non-expert parameters on the GPU (sharded by the dense DP group under ZeRO).
    pub(crate) dense: f64,
    /// Routed-expert parameters on the GPU (sharded by the expert DP group).
    pub(crate) expert: f64,
    /// Seed 001: replicated out_linear parameters beyond the TP split.
    pub(crate) o_extra: f64,
    pub(crate) largest_dense_block: f64,
    pub(crate) largest_expert_block: f64,
}

/// The plan's stage layout for a model of `blocks` blocks.
fn layout_of(plan: &Plan, blocks: u32) -> Option<autoplan_plan::StageLayout> {
    plan.stage_layout_for_blocks(blocks)
}
