//! Export a plan as Megatron-LM (Megatron-Core 0.14–0.19 `pretrain_gpt.py`) command-line flags.
//!
//! Only the flags the plan decides are emitted (parallel degrees, schedule, batch, recompute,
//! optimizer sharding, dispatcher, overlaps); the model's own flags (`--num-layers`,
//! `--hidden-size`, ...) stay in the user's launch script. What Megatron-Core cannot run is
//! the capability table's (`framework.rs`): a plan it refuses is refused here with its reason;
//! a knob the flags cannot express is an error naming it, never a silently dropped flag.

use autoplan_graph::ModelSpec;

use crate::knob::{Context, Knob, CP_COMMS, DISPATCHERS};
use crate::{CpComm, Dim, Dispatcher, Framework, Plan, Recompute, Refusal, Schedule};

/// A plan knob that Megatron-LM has no flag for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Megatron-LM cannot express {knob}={value}: {reason}")]
pub struct Unsupported {
    pub knob: &'static str,
    pub value: String,
    pub reason: String,
}

fn unsupported(knob: &'static str, value: impl ToString, reason: &'static str) -> Unsupported {
    Unsupported {
        knob,
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

impl From<Refusal> for Unsupported {
    /// The capability table's refusal, with its reason and source.
    fn from(r: Refusal) -> Unsupported {
        Unsupported {
            knob: r.knob.key(),
            value: r.knob.value(&r.plan),
            reason: r.to_string(),
        }
    }
}

impl Plan {
    /// Megatron-LM flags of this plan, for `model` (which fixes the batch, sequence length and
    /// stage layout). Call after [`Plan::check`]: the flags of an invalid plan are not
    /// meaningful. Errors name the first knob Megatron-LM cannot express.
    pub fn megatron_args(&self, model: &ModelSpec) -> Result<Vec<String>, Unsupported> {
        self.megatron_args_for(model, Framework::default())
    }

    /// [`Plan::megatron_args`] for a given Megatron-Core version (`framework` must be
    /// Megatron-Core): the capability table's check first, with its reason. For GPUs of one
    /// node (NVLink inside a node only); [`Plan::megatron_args_on`] says which.
    pub fn megatron_args_for(
        &self,
        model: &ModelSpec,
        framework: Framework,
    ) -> Result<Vec<String>, Unsupported> {
        self.megatron_args_on(model, framework, false)
    }

    /// [`Plan::megatron_args_for`] on a cluster whose NVLink domain spans several nodes
    /// (`mnnvl`: an NVL72 rack of 4-GPU trays), where autoplan prices the EP group's dispatch
    /// inside the domain over NVLink. There the `flex` dispatcher runs the HybridEP backend,
    /// "the only backend that supports multi-node NVLink" (`--moe-flex-dispatcher-backend
    /// hybridep`, from 0.16; frameworks.md §1.6); DeepEP's own backend would cross the trays
    /// over the network. Before 0.16 there is no such backend: the plan is not exported.
    pub fn megatron_args_on(
        &self,
        model: &ModelSpec,
        framework: Framework,
        mnnvl: bool,
    ) -> Result<Vec<String>, Unsupported> {
        if !matches!(framework, Framework::MegatronCore { .. }) {
            return Err(Unsupported {
                knob: "framework",
                value: framework.spec(),
                reason: "the Megatron export needs --framework megatron-core".to_string(),
            });
        }
        framework.check_on(self, model, mnnvl)?;
        let mut a: Vec<String> = Vec::new();
        let mut flags: Vec<String> = Vec::new();
        let ctx = Context::new(self, model.moe.is_some());
        self.megatron_degrees(&ctx, model, &mut a, &mut flags);
        self.megatron_stages(model, &mut a, &mut flags)?;
        self.megatron_schedule_recompute(&mut a)?;
        self.megatron_zero(&mut a, &mut flags)?;
        self.megatron_offload(&mut a, &mut flags);
        self.megatron_activation_offload(&mut a);
        self.megatron_comm(&ctx, model, mnnvl, &mut a, &mut flags)?;
        self.megatron_order(&ctx, &mut flags)?;
        a.extend(flags);
        Ok(a)
    }

    /// The degrees, batch and sequence length, and the sequence-parallel flag.
    fn megatron_degrees(
        &self,
        ctx: &Context,
        model: &ModelSpec,
        a: &mut Vec<String>,
        flags: &mut Vec<String>,
    ) {
        // The degrees and the micro-batch size, by their knobs' flags (the expert degrees for
        // MoE models only).
        for k in [
            Knob::Tp,
            Knob::Pp,
            Knob::Cp,
            Knob::Ep,
            Knob::MoeTp,
            Knob::Mbs,
        ] {
            if let Some(flag) = k.megatron_flag().filter(|_| k.matters(ctx)) {
                kv_push(a, flag, k.value(self));
            }
        }
        kv_push(
            a,
            "--global-batch-size",
            model.training.global_batch.to_string(),
        );
        kv_push(a, "--seq-length", model.training.seq_len.to_string());
        if self.sp && Knob::Sp.matters(ctx) {
            flags.extend(Knob::Sp.megatron_flag().map(String::from));
        }
    }

    /// The pipeline stage layout (uneven and virtual stages).
    fn megatron_stages(
        &self,
        model: &ModelSpec,
        a: &mut Vec<String>,
        flags: &mut Vec<String>,
    ) -> Result<(), Unsupported> {
        // Uneven stages (Megatron-Core `--decoder-first/last-pipeline-num-layers`) need the
        // middle stages even, and `--num-layers-per-virtual-pipeline-stage` / virtual stages
        // need every stage's blocks a multiple of vpp; any other layout is spelt out with
        // `--pipeline-model-parallel-layout` (0.13+; frameworks.md §1.2).
        if let Some(layout) = self.stage_blocks(model) {
            let vpp = self.vpp.max(1);
            let even =
                layout.first == layout.last && (layout.pp <= 2 || layout.middle == layout.first);
            // Megatron's `--account-for-embedding/loss-in-pipeline-split` treat the embedding
            // and the loss as one block each: with `(blocks + 2)` divisible by `pp·vpp`, the
            // first and last stages get one block fewer than the middle ones.
            // A plan's `pipeline_split` names them; a blocks-only layout of that shape is the
            // same split.
            let per_stage = (model.layers + 2) / layout.pp;
            let split = match self.pipeline_split {
                crate::PipelineSplit::Blocks
                    if !even
                        && layout.pp > 2
                        && (model.layers + 2).is_multiple_of(layout.pp * vpp)
                        && layout.first + 1 == per_stage
                        && layout.last + 1 == per_stage
                        && layout.middle == per_stage
                        && layout.middle_extra == 0 =>
                {
                    crate::PipelineSplit::EmbeddingLoss
                }
                s => s,
            };
            let account_for = split != crate::PipelineSplit::Blocks;
            // Layouts the first/last and virtual-stage flags cannot express go out as an
            // explicit `--pipeline-model-parallel-layout`.
            let ragged = (layout.pp > 2 && layout.middle_extra > 0)
                || (self.schedule == Schedule::Interleaved
                    && !account_for
                    && (0..layout.pp).any(|s| layout.blocks(s) % vpp != 0));
            if ragged {
                kv_push(
                    a,
                    "--pipeline-model-parallel-layout",
                    layout_string(&layout, vpp, model.mtp_modules),
                );
                return Ok(());
            }
            if split.embedding() > 0 {
                flags.push("--account-for-embedding-in-pipeline-split".into());
            }
            if split.loss() > 0 {
                flags.push("--account-for-loss-in-pipeline-split".into());
            }
            if !even && !account_for {
                kv_push(
                    a,
                    "--decoder-first-pipeline-num-layers",
                    layout.first.to_string(),
                );
                kv_push(
                    a,
                    "--decoder-last-pipeline-num-layers",
                    layout.last.to_string(),
                );
            }
            if self.schedule == Schedule::Interleaved {
                if even && !account_for {
                    kv_push(
                        a,
                        "--num-layers-per-virtual-pipeline-stage",
                        (layout.first / self.vpp.max(1)).to_string(),
                    );
                } else {
                    kv_push(
                        a,
                        "--num-virtual-stages-per-pipeline-rank",
                        self.vpp.to_string(),
                    );
                }
            }
        }
        Ok(())
    }

    /// The pipeline schedule and the recompute flags.
    fn megatron_schedule_recompute(&self, a: &mut Vec<String>) -> Result<(), Unsupported> {
        // The schedule (1F1B or interleaved) is the capability table's: no flag beyond vpp.
        match self.recompute {
            Recompute::None => {}
            Recompute::Selective => {
                kv_push(a, "--recompute-granularity", "selective".into());
                if self.recompute_modules != crate::RecomputeModules::DEFAULT {
                    a.push("--recompute-modules".into());
                    a.extend(self.recompute_modules.names().map(String::from));
                }
            }
            Recompute::Full => {
                kv_push(a, "--recompute-granularity", "full".into());
                match self.recompute_layers {
                    // Recompute every block, checkpointing one block at a time.
                    None => {
                        kv_push(a, "--recompute-method", "uniform".into());
                        kv_push(a, "--recompute-num-layers", "1".into());
                    }
                    // The first N blocks of each (virtual) stage.
                    Some(n) => {
                        kv_push(a, "--recompute-method", "block".into());
                        kv_push(a, "--recompute-num-layers", n.to_string());
                    }
                }
            }
        }
        Ok(())
    }

    /// Optimizer sharding (ZeRO) and the gradient/parameter overlaps.
    fn megatron_zero(
        &self,
        a: &mut Vec<String>,
        flags: &mut Vec<String>,
    ) -> Result<(), Unsupported> {
        // ZeRO: 1 = distributed optimizer; 2/3 = Megatron-FSDP sharding strategies; stage 3
        // without resharding = Torch-FSDP2 with `--torch-fsdp2-no-reshard-after-forward`;
        // stage-1 HSDP = `--num-distributed-optimizer-instances` (frameworks.md §1.1, §1.4).
        // Which modes Megatron runs (HSDP only at stage 1, Torch-FSDP2 with pp = ep = 1) is
        // the capability table's.
        let z = self.zero;
        match z.stage {
            0 => {}
            1 => {
                flags.push("--use-distributed-optimizer".into());
                // No group (0): one instance, the flag's default.
                if let Some(instances) = (self.dp * self.cp).checked_div(z.group) {
                    kv_push(
                        a,
                        "--num-distributed-optimizer-instances",
                        instances.to_string(),
                    );
                }
            }
            3 if z.keeps_gathered() => {
                flags.push("--use-torch-fsdp2".into());
                flags.push("--torch-fsdp2-no-reshard-after-forward".into());
                // Torch-FSDP2 asserts gradient-accumulation fusion off (args.py @
                // core_v0.19.0:L997-1030; frameworks.md §1.4).
                flags.push("--no-gradient-accumulation-fusion".into());
            }
            2 | 3 => {
                flags.push("--use-megatron-fsdp".into());
                // Megatron-FSDP asserts the `fsdp_dtensor` checkpoint format (args.py @
                // core_v0.19.0:L1145-1146, core_v0.14.0:L638-639; frameworks.md §1.4).
                kv_push(a, "--ckpt-format", "fsdp_dtensor".into());
                kv_push(
                    a,
                    "--data-parallel-sharding-strategy",
                    if z.stage == 2 {
                        "optim_grads"
                    } else {
                        "optim_grads_params"
                    }
                    .into(),
                );
            }
            _ => return Err(unsupported("zero", z, "ZeRO stages are 0 to 3")),
        }
        if self.dp * self.cp > 1 {
            // Gradient reduction overlapped with backward, as the evaluator assumes.
            flags.push("--overlap-grad-reduce".into());
            // `--overlap-param-gather` needs the distributed optimizer or Megatron-FSDP, not
            // Torch-FSDP2 (frameworks.md §1.4).
            if self.zero.shards_optimizer() && !self.zero.keeps_gathered() {
                flags.push("--overlap-param-gather".into());
            }
        }
        Ok(())
    }

    /// Context-parallel comm, TP/SP transition, MoE dispatcher and scheme, and TP overlap.
    fn megatron_comm(
        &self,
        ctx: &Context,
        model: &ModelSpec,
        mnnvl: bool,
        a: &mut Vec<String>,
        flags: &mut Vec<String>,
    ) -> Result<(), Unsupported> {
        if let (Some(flag), Some(v)) = (
            Knob::CpComm
                .megatron_flag()
                .filter(|_| Knob::CpComm.matters(ctx)),
            CP_COMMS.megatron(self.cp_comm),
        ) {
            kv_push(a, flag, v.into());
        }
        if let (CpComm::Hierarchical { a2a }, true) = (self.cp_comm, Knob::CpComm.matters(ctx)) {
            // `a2a+p2p` needs the level sizes, a2a group first (`args.py @ core_v0.19.0:
            // L562-567`, `model_parallel_config.py:L103-110`; frameworks.md §1.5).
            kv_push(a, "--cp-comm-type", "a2a+p2p".into());
            a.push("--hierarchical-context-parallel-sizes".into());
            a.push(a2a.to_string());
            a.push((self.cp / a2a.max(1)).to_string());
        }
        if model.moe.is_some() {
            // Megatron-Core takes the dispatcher flag for every MoE model, EP or not.
            if let (Some(flag), Some(v)) = (
                Knob::Dispatcher.megatron_flag(),
                DISPATCHERS.megatron(self.dispatcher),
            ) {
                kv_push(a, flag, v.into());
            }
            if self.dispatcher == Dispatcher::DeepEp {
                if mnnvl && Knob::Dispatcher.matters(ctx) {
                    // On a multi-node NVLink domain the flex dispatcher runs HybridEP's
                    // backend (0.16+; earlier versions were refused by `check_on`).
                    a.extend(["--moe-flex-dispatcher-backend".into(), "hybridep".into()]);
                } else {
                    a.push("--moe-enable-deepep".into());
                }
            }
            if self.ep_overlap && Knob::EpOverlap.matters(ctx) {
                flags.extend(Knob::EpOverlap.megatron_flag().map(String::from));
            }
        }
        if self.tp_overlap && Knob::TpOverlap.matters(ctx) {
            flags.extend(Knob::TpOverlap.megatron_flag().map(String::from));
        }
        Ok(())
    }

    /// The rank order (which orders Megatron runs, and the placement, are the capability
    /// table's): `--use-tp-pp-dp-mapping` gives tp-cp-ep-pp-dp (`initialize.py @
    /// core_v0.19.0:L388`; frameworks.md §1.1). Dimensions of size 1 (dense and folded) do not
    /// matter.
    fn megatron_order(&self, ctx: &Context, flags: &mut Vec<String>) -> Result<(), Unsupported> {
        let class = |o: [Dim; 4]| ctx.order_class(&crate::RankOrder(o));
        let ours = ctx.order_class(&self.order);
        if ours != class([Dim::Tp, Dim::Cp, Dim::Dp, Dim::Pp])
            && ours == class([Dim::Tp, Dim::Cp, Dim::Pp, Dim::Dp])
        {
            flags.push("--use-tp-pp-dp-mapping".into());
        }
        Ok(())
    }
}

/// Megatron-Core's `--pipeline-model-parallel-layout` of `layout` with `vpp` virtual stages
/// per rank: each rank's blocks split as evenly as its chunks allow (the first chunks take the
/// remainder), stages listed `vpp0:pp0, vpp0:pp1, …, vpp1:pp0, …` and separated by `|`, `E`
/// (embedding) opening the first and the `mtp` MTP layers and `L` (loss) closing the last
/// (`pipeline_parallel_layer_layout.py @ core_v0.19.0:L84-140,L283-321`; frameworks.md §1.2).
fn layout_string(layout: &crate::StageLayout, vpp: u32, mtp: u32) -> String {
    let mut stages = Vec::new();
    for chunk in 0..vpp {
        for rank in 0..layout.pp {
            let b = layout.blocks(rank);
            let n = b / vpp + u32::from(chunk < b % vpp);
            let mut st = String::new();
            if chunk == 0 && rank == 0 {
                st.push('E');
            }
            st.push_str(&"t".repeat(n as usize));
            if chunk + 1 == vpp && rank + 1 == layout.pp {
                st.push_str(&"m".repeat(mtp as usize));
                st.push('L');
            }
            stages.push(st);
        }
    }
    stages.join("|")
}

fn kv_push(a: &mut Vec<String>, k: &str, v: String) {
    a.push(k.to_string());
    a.push(v);
}
