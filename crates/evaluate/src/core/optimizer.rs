//! The optimizer step: a memory-bound pass over this GPU's shard of the parameters.

use autoplan_cost::compute::memory_bound_time_with;
use autoplan_graph::Optimizer;
use autoplan_plan::Zero;

use super::ctx::Ctx;
use super::pipeline::StageTime;
use super::Evaluator;

/// HBM bytes per parameter of one mixed-precision Adam step, kernel by kernel: the fused Adam
/// update (read the fp32 gradient, read + write the fp32 master weight, m and v: 28), the
/// gradient norm for clipping (read the fp32 gradient: 4), and the copy of the updated master
/// weight into the 16-bit model weight (read 4, write 2: 6). Megatron-Core's distributed
/// optimizer runs that copy as a kernel of its own (`_copy_main_params_to_model_params`) unless
/// `--use-precision-aware-optimizer` (opt-in, frameworks.md §1.9) folds it into the update.
/// Measured on an H200 (`results/h200/adam.csv`, `tools/gpu/kernels_probe.py adam`): each of the
/// three streamed its bytes at 3.3–3.5 TB/s from 256M parameters, 0.75–0.8 of the add's
/// bandwidth (`hbm.csv`), so none moves more than counted (the copy was priced at its 2-byte
/// write alone before: 34).
pub const ADAM_STEP_BYTES: [(&str, f64); 3] = [
    ("adamw-fused", 28.0),
    ("grad-norm", 4.0),
    ("copy-bf16", 6.0),
];
/// The three kernels' bytes per parameter: 38.
pub const ADAM_BYTES_PER_PARAM: f64 =
    ADAM_STEP_BYTES[0].1 + ADAM_STEP_BYTES[1].1 + ADAM_STEP_BYTES[2].1;
/// Adam with BF16 moments: m and v read + write at 2 bytes instead of 4 (38 − 8).
const ADAM_BF16_MOMENTS_BYTES_PER_PARAM: f64 = ADAM_BYTES_PER_PARAM - 8.0;
/// SGD with momentum: grad (4) + master and momentum read/write (16) + norm (4) + the copy to
/// the 16-bit weight (6).
const SGD_BYTES_PER_PARAM: f64 = 30.0;

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
