//! The optimizer step: a memory-bound pass over this GPU's shard of the parameters.

use autoplan_cost::compute::memory_bound_time_with;
use autoplan_graph::Optimizer;
use autoplan_plan::Zero;

use super::ctx::Ctx;
use super::pipeline::StageTime;
use super::Evaluator;

/// HBM bytes per parameter of one mixed-precision Adam step: read fp32 grad (4), read + write
/// fp32 master, m and v (3 × 8), write the 16-bit weight (2), grad-norm read for clipping (4).
const ADAM_BYTES_PER_PARAM: f64 = 34.0;
/// Adam with BF16 moments: m and v read + write at 2 bytes instead of 4 (34 − 8).
const ADAM_BF16_MOMENTS_BYTES_PER_PARAM: f64 = 26.0;
/// SGD with momentum: grad (4) + master and momentum read/write (16) + weight (2) + norm (4).
const SGD_BYTES_PER_PARAM: f64 = 26.0;

impl Evaluator {
    /// The optimizer step: memory-bound over this GPU's shard of the parameters of the stage
    /// `pmax` holding the most (dense ones sharded over dp × cp, experts over edp, from ZeRO 1; over the shard group
    /// under HSDP).
    pub(super) fn optimizer_time(&self, zero: Zero, x: &Ctx, pmax: &StageTime) -> f64 {
        let (opt_params, per_param) = self.optimizer_shard(zero, x, pmax);
        memory_bound_time_with(&self.gpu, &self.eff, per_param * opt_params)
    }

    /// This GPU's optimizer shard of the stage `pmax` (parameters) and the bytes the step
    /// streams per parameter.
    pub(super) fn optimizer_shard(&self, zero: Zero, x: &Ctx, pmax: &StageTime) -> (f64, f64) {
        // Sharded over the data-parallel group, or the HSDP shard group (`Zero::shard_size`).
        let (shard_d, shard_e) = if zero.shards_optimizer() {
            (
                zero.shard_size(x.g_dp.size) as f64,
                zero.shard_size(x.g_edp.size) as f64,
            )
        } else {
            (1.0, 1.0)
        };
        let per_param = match self.model.training.optimizer {
            Optimizer::Adam => ADAM_BYTES_PER_PARAM,
            Optimizer::AdamBf16Moments => ADAM_BF16_MOMENTS_BYTES_PER_PARAM,
            Optimizer::Sgd => SGD_BYTES_PER_PARAM,
        };
        let opt_params = pmax.params_dense / shard_d + pmax.params_expert / shard_e;
        (opt_params, per_param)
    }
}
