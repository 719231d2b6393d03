//! What recompute runs again before the backward: the selective modules' forward work, the
//! forward collectives it repeats, and the share of a stage's blocks it covers.

use autoplan_cost::compute::memory_bound_time_with;
use autoplan_plan::{Plan, Recompute, RecomputeModules};

use super::classes::{Class, ClassId, NCLASS};
use super::compute::ACT;
use super::costs::ClassCost;
use super::ctx::Ctx;
use super::Evaluator;
use crate::comm::CommKind;

/// The share of a stage's `n` blocks that recompute covers (`recompute_layers`, all by
/// default); 0 for a stage without blocks. `recompute_layers` counts the blocks of one model
/// chunk (Megatron's `--recompute-method block --recompute-num-layers N`: the first N of each
/// virtual stage's `TransformerBlock`, frameworks.md §1.7), so a stage of `vpp`
/// chunks recomputes `N · vpp` of its blocks, as autoplan-memory stores them.
#[inline]
pub(super) fn rc_frac(plan: &Plan, n: u32) -> f64 {
    if n == 0 {
        0.0
    } else {
        plan.recompute_layers.map_or(1.0, |r| {
            r.saturating_mul(plan.vpp.max(1)).min(n) as f64 / n as f64
        })
    }
}

impl Evaluator {
    /// Selective recompute of class `id` (Megatron-Core `--recompute-modules`): the forward
    /// work of the modules in `m` run again before the backward. `fwd` is the class's forward,
    /// `core` the attention core's (`compute`'s `core`).
    /// - `core_attn`: the attention core (and an unfused softmax);
    /// - `layernorm`: each pre-norm, an HBM pass reading and writing `h` per token of the
    ///   (sequence-parallel) shard;
    /// - `mla_up_proj`: the `q_b` and `kv_b` GEMMs (RoPE is elementwise, not counted);
    /// - `moe_act`: the routed experts' activation function (HBM-bound);
    /// - `shared_experts`: the shared experts' GEMMs and activation function;
    /// - `mlp` / `moe`: the whole forward of the layer (its collectives: `recompute_comm`).
    ///
    /// An MTP module's block is priced by [`Evaluator::selective_rcs`].
    fn selective_rc(
        &self,
        m: RecomputeModules,
        id: ClassId,
        c: &Class,
        x: &Ctx,
        fwd: f64,
        core: f64,
    ) -> f64 {
        // `fwd` and `core` carry the profile's unpriced compute already (`class_compute`);
        // the kernels priced here get the same factor.
        let f = 1.0 + self.opts.unpriced_compute;
        let ln = if m.has(RecomputeModules::LAYERNORM) {
            let shard = if x.sp { 1.0 / x.tp } else { 1.0 };
            f * memory_bound_time_with(
                &self.gpu,
                &self.eff,
                2.0 * ACT * self.hidden * x.m_tok * shard,
            )
        } else {
            0.0
        };
        let core = if m.has(RecomputeModules::CORE_ATTN) {
            core
        } else {
            0.0
        };
        match id {
            ClassId::Attn => {
                let up = if m.has(RecomputeModules::MLA_UP_PROJ) {
                    f * self.gemm_fwd(c.kind, &c.up_proj, x)
                } else {
                    0.0
                };
                core + ln + up
            }
            ClassId::Mlp if m.has(RecomputeModules::MLP) => fwd,
            ClassId::Mlp => ln,
            ClassId::Moe if m.has(RecomputeModules::MOE) => fwd,
            ClassId::Moe => {
                let mut t = ln;
                if m.has(RecomputeModules::SHARED_EXPERTS) {
                    t += f
                        * (self.gemm_fwd(c.kind, &c.shared, x)
                            + self.activation_fn_time(c.kind, c.shared.iter(), x));
                }
                if m.has(RecomputeModules::MOE_ACT) {
                    let routed = c.gemms.iter().filter(|g| g.expert);
                    t += f * self.activation_fn_time(c.kind, routed, x);
                }
                t
            }
            ClassId::Mtp => core,
            _ => 0.0,
        }
    }

    /// [`Evaluator::selective_rc`] of every class from their forward times `fwd` and attention
    /// cores `core`. An MTP module repeats the last block's attention and MLP/MoE (`mtp_reuse`):
    /// it recomputes what they do; otherwise its attention core only.
    fn selective_rcs(
        &self,
        m: RecomputeModules,
        x: &Ctx,
        fwd: &[f64; NCLASS],
        core: &[f64; NCLASS],
    ) -> [f64; NCLASS] {
        let mut rc = [0.0; NCLASS];
        for id in ClassId::ALL {
            let i = id as usize;
            rc[i] = self.selective_rc(m, id, &self.classes[i], x, fwd[i], core[i]);
        }
        if self.mtp_reuse {
            let mlp = self.classes[ClassId::Mtp as usize].mtp_mlp() as usize;
            rc[ClassId::Mtp as usize] = rc[ClassId::Attn as usize] + rc[mlp];
        }
        rc
    }

    /// Replaces each class's `rc_sel` (the attention core on entry) by what selective
    /// recompute of modules `m` runs again ([`Evaluator::selective_rcs`]).
    pub(super) fn price_selective(
        &self,
        m: RecomputeModules,
        x: &Ctx,
        costs: &mut [ClassCost; NCLASS],
    ) {
        let fwd = costs.map(|c| c.fwd);
        let core = costs.map(|c| c.rc_sel);
        let rc = self.selective_rcs(m, x, &fwd, &core);
        for (c, r) in costs.iter_mut().zip(rc) {
            c.rc_sel = r;
        }
    }

    /// The kinds of forward communication (bits of `CommKind::index`) that the plan's recompute
    /// runs again for class `id`: full recompute re-runs a block's forward with its TP, CP and
    /// EP collectives; selective recompute of `core_attn` the CP exchange inside the attention
    /// core, of `mlp` the MLP's TP collectives, of `moe` the MoE layer's TP and EP ones.
    #[inline]
    pub(super) fn recompute_comm(plan: &Plan, id: ClassId) -> u8 {
        let m = plan.recompute_modules;
        match (plan.recompute, id) {
            (Recompute::Full, id) if id.is_block() => Self::block_comm_kinds(id),
            (Recompute::Selective, ClassId::Attn | ClassId::Mtp)
                if m.has(RecomputeModules::CORE_ATTN) =>
            {
                bit(CommKind::Cp)
            }
            (Recompute::Selective, ClassId::Mlp) if m.has(RecomputeModules::MLP) => {
                bit(CommKind::Tp)
            }
            (Recompute::Selective, ClassId::Moe) if m.has(RecomputeModules::MOE) => {
                bit(CommKind::Tp) | bit(CommKind::Ep)
            }
            _ => 0,
        }
    }

    /// Every kind of forward communication a block's recompute can repeat (TP, CP, EP); none
    /// outside the blocks. Full recompute repeats them all; the floor collects them all.
    #[inline]
    pub(super) fn block_comm_kinds(id: ClassId) -> u8 {
        if id.is_block() {
            bit(CommKind::Tp) | bit(CommKind::Cp) | bit(CommKind::Ep)
        } else {
            0
        }
    }
}

/// The bit of kind `k` in a set of kinds.
#[inline]
fn bit(k: CommKind) -> u8 {
    1u8 << k.index()
}
