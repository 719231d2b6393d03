//! The rules Megatron-Core, torchtitan and DeepSpeed apply when they launch a job that the per-knob capability
//! rows do not capture: rules across knobs and the model (the sequence length against tp·cp,
//! the FSDP and expert meshes, DeepEP's conditions, FP8 with compile or TP, the even pipeline
//! split). `--emit torchtitan|deepspeed` writes only plans that pass them, and the search ranks
//! only those (`Framework::check`).

use super::*;

/// torchtitan v0.2.2's launch rules (frameworks.md §2.1, §2.5).
pub(super) fn check_torchtitan(
    plan: &Plan,
    model: &ModelSpec,
    ctx: &Context,
    refuse: &Refuse,
) -> Result<(), Refusal> {
    // `seq_len % (tp·2·cp) == 0` with CP (`parallel_dims.seq_len_divisor`, parallel_dims.py @
    // v0.2.2:L365-372; asserted in deepseek_v3/infra/parallelize.py @ v0.2.2:L60-66).
    if plan.cp > 1 && !model.training.seq_len.is_multiple_of(2 * plan.tp * plan.cp) {
        return Err(refuse(
            Knob::Cp,
            "run context parallelism on a sequence length that is not a multiple of 2·tp·cp",
            "parallel_dims.seq_len_divisor, parallel_dims.py @ v0.2.2:L365-372; frameworks.md §2.1",
        ));
    }
    // CP is folded into the FSDP mesh (`fsdp = dp_shard·cp`): an HSDP shard group holds whole
    // CP groups (parallel_dims.py @ v0.2.2:L133-160).
    let z = plan.zero;
    if Knob::Zero.matters(ctx) && z.group > 0 && !z.group.is_multiple_of(plan.cp) {
        return Err(refuse(
            Knob::Zero,
            "shard inside HSDP groups that split a context-parallel group",
            "meshes pp, dp_replicate, fsdp = dp_shard·cp, tp, parallel_dims.py @ v0.2.2:L133-160; \
             frameworks.md §2.1",
        ));
    }
    if ctx.moe && plan.ep * plan.moe_tp > 1 {
        // The expert mesh borrows its ranks from fsdp·tp: `efsdp = dp_shard·cp·tp/(etp·ep)`
        // (parallel_dims.py @ v0.2.2:L195-205); dp_shard·cp is the HSDP group where one is set.
        let fsdp = if z.group > 0 {
            z.group
        } else {
            plan.dp * plan.cp
        };
        if !(fsdp * plan.tp).is_multiple_of(plan.ep * plan.moe_tp) {
            return Err(refuse(
                Knob::Ep,
                "borrow the expert-parallel ranks from an FSDP·TP mesh they do not divide",
                "efsdp = dp_shard·cp·tp/(etp·ep), parallel_dims.py @ v0.2.2:L195-205; \
                 frameworks.md §2.1",
            ));
        }
        // `deepep` needs EP > 1 and ETP disabled (deepseek_v3/infra/parallelize.py @
        // v0.2.2:L96-110).
        if plan.dispatcher == Dispatcher::DeepEp && (plan.ep <= 1 || plan.moe_tp > 1) {
            return Err(refuse(
                Knob::Dispatcher,
                "dispatch through DeepEP without expert parallelism or with expert tensor \
                 parallelism",
                "expert_parallel_comm_backend deepep needs EP > 1 and ETP disabled, \
                 deepseek_v3/infra/parallelize.py @ v0.2.2:L96-110; frameworks.md §2.1",
            ));
        }
    }
    let precision = model.training.precision;
    // Async TP needs `compile.enable` (tensor_parallel.py @ v0.2.2:L16-25), and MX with
    // compile and TP > 1 is rejected (mx.py @ v0.2.2:L42-53).
    if precision == Precision::Mxfp8 && plan.tp > 1 && plan.tp_overlap {
        return Err(refuse(
            Knob::TpOverlap,
            "overlap TP communication (async TP, which needs compile) in MXFP8 with tp > 1",
            "async TP requires compile, tensor_parallel.py @ v0.2.2:L16-25; MX with compile and \
             TP > 1 is rejected, mx.py @ v0.2.2:L42-53; frameworks.md §2.1, §2.5",
        ));
    }
    // DeepSeek-V3 (MLA) tensorwise FP8 with TP raises NotImplementedError
    // (deepseek_v3/infra/parallelize.py @ v0.2.2:L75-85).
    if precision == Precision::Fp8Current
        && plan.tp > 1
        && matches!(model.attention, Attention::Mla { .. })
    {
        return Err(refuse(
            Knob::Tp,
            "train DeepSeek-V3 (MLA) in tensorwise FP8 with tensor parallelism",
            "NotImplementedError, deepseek_v3/infra/parallelize.py @ v0.2.2:L75-85; \
             frameworks.md §2.5",
        ));
    }
    Ok(())
}

/// DeepSpeed v0.19.5's launch rules (frameworks.md §3.4).
pub(super) fn check_deepspeed(
    plan: &Plan,
    model: &ModelSpec,
    refuse: &Refuse,
) -> Result<(), Refusal> {
    // The pipeline engine splits the layers by its partition method (uniform or by
    // parameters, config.py @ v0.19.5:L417-430): equal blocks on every stage is what each of
    // them gives; autoplan's remainder rule and the account-for splits are Megatron's.
    if plan.pp > 1
        && (plan.pipeline_split != crate::PipelineSplit::Blocks
            || !model.layers.is_multiple_of(plan.pp))
    {
        return Err(refuse(
            Knob::PipelineSplit,
            "split the blocks over the pipeline stages other than evenly",
            "pipeline partition methods uniform/parameters only, config.py @ v0.19.5:L417-430; \
             frameworks.md §3.4",
        ));
    }
    Ok(())
}

/// Megatron-Core's rules across knobs, the model and its precision (frameworks.md §1.4; the
/// FP8 rule read in the megatron-core 0.19.2 wheel that `tools/megatron_check` runs).
pub(super) fn check_megatron(
    plan: &Plan,
    model: &ModelSpec,
    ctx: &Context,
    refuse: &Refuse,
) -> Result<(), Refusal> {
    let precision = model.training.precision;
    // Torch-FSDP2 (`zero=3-noreshard`) asserts untied embeddings and no FP16 (args.py @
    // core_v0.19.0:L997-1030, core_v0.14.0:L567-593).
    if Knob::Zero.matters(ctx)
        && plan.zero.keeps_gathered()
        && (model.tied_embeddings || precision == Precision::Fp16)
    {
        return Err(refuse(
            Knob::Zero,
            "run Torch-FSDP2 (zero=3-noreshard) with tied embeddings or in FP16",
            "--use-torch-fsdp2 requires --untie-embeddings-and-output-weights and not --fp16, \
             args.py @ core_v0.19.0:L997-1030; frameworks.md §1.4",
        ));
    }
    // FP8 with delayed scaling cannot recompute `moe_act` or `layernorm`
    // (transformer_config.py @ core_v0.19.2:L1821-1827).
    if precision == Precision::Fp8
        && plan.recompute == Recompute::Selective
        && (plan.recompute_modules.has(RecomputeModules::MOE_ACT)
            || plan.recompute_modules.has(RecomputeModules::LAYERNORM))
    {
        return Err(refuse(
            Knob::Recompute,
            "recompute moe_act or layernorm in FP8 with delayed scaling",
            "\"Delayed scaling does not support moe_act and layernorm recompute for fp8\", \
             transformer_config.py @ core_v0.19.2:L1821-1827 (the megatron-core 0.19.2 wheel; \
             tools/megatron_check)",
        ));
    }
    Ok(())
}

/// The one rule of `any`, the theoretical space: a plan no framework runs whose time autoplan
/// cannot price. The interleaved schedule's bubble, `(pp−1)/vpp` of 1F1B's
/// ([`Schedule::bubble`]), holds for micro-batches issued in groups of pp (Narayanan et al. 2021
/// §2.2.1, the schedule Megatron-Core runs with `microbatch_group_size_per_vp_stage = pp`); with a
/// count that is not a multiple of pp the last group is partial and that formula does not hold.
/// Megatron-Core asserts the multiple (schedules.py @ core_v0.19.0:L1133-1152) and the other
/// rows refuse it, so `any` refuses it too rather than price it wrongly.
pub(super) fn check_any(
    plan: &Plan,
    model: &ModelSpec,
    ctx: &Context,
    refuse: &Refuse,
) -> Result<(), Refusal> {
    let micro = plan.microbatches(model);
    if Knob::Vpp.matters(ctx) && micro > 0 && !micro.is_multiple_of(plan.pp) {
        return Err(refuse(
            Knob::Vpp,
            "price the interleaved schedule with a micro-batch count that is not a multiple of pp",
            "the interleaved bubble (pp−1)/vpp holds for micro-batches in groups of pp \
             (Narayanan et al. 2021 §2.2.1); Megatron-Core asserts the multiple, schedules.py @ \
             core_v0.19.0:L1133-1152; docs/frameworks.md",
        ));
    }
    Ok(())
}
