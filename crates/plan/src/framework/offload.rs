//! Which offloads to host memory a framework runs (the `offload_optimizer`, `offload_params`
//! and `offload_activations` knobs), each rule with its source.

use super::*;
use checks::Refuse;

/// Optimizer-state offload to host memory (`offload_optimizer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffloadRules {
    /// Optimizer-state offload at all.
    pub optimizer: bool,
    /// Only with ZeRO stage 1 (Megatron-Core's distributed optimizer).
    pub needs_zero1: bool,
    /// Only with a sharding stage of 1 or more (DeepSpeed `offload_optimizer`: stages 1–3).
    pub needs_zero: bool,
    /// A fraction below 1 only with ZeRO stage 3 (DeepSpeed `ratio < 1`).
    pub partial_needs_zero3: bool,
    /// Parameter offload (`offload_params`; `Plan::check` asks a parameter shard and the
    /// whole optimizer on the host of every framework).
    pub params: bool,
    /// The optimizer offloaded only together with the parameters (torchtitan's one switch).
    pub together: bool,
    /// Activation offload (`offload_activations`) at all.
    pub activations: bool,
    /// Activation offload only without pipeline parallelism (Megatron-Core `cpu_offloading`).
    pub activations_single_stage: bool,
    /// Activation offload only without recompute (Megatron-Core `cpu_offloading`).
    pub activations_no_recompute: bool,
    /// Fewer layers offloaded than the model has (Megatron-Core: `N < num_layers`; `all`
    /// refused).
    pub activations_below_all: bool,
    /// Activation offload only of full recompute's checkpoints, of every layer (`all`;
    /// DeepSpeed `cpu_checkpointing`).
    pub activations_checkpoints: bool,
}

impl OffloadRules {
    /// Every offload autoplan prices, with no rule (`Framework::Any`).
    pub const ANY: OffloadRules = OffloadRules {
        optimizer: true,
        needs_zero1: false,
        needs_zero: false,
        partial_needs_zero3: false,
        params: true,
        together: false,
        activations: true,
        activations_single_stage: false,
        activations_no_recompute: false,
        activations_below_all: false,
        activations_checkpoints: false,
    };
}

/// The offload knobs against the framework's rules (`layers`: the model's transformer
/// blocks).
pub(super) fn check_offload(
    c: &Capabilities,
    plan: &Plan,
    layers: u32,
    refuse: &Refuse,
) -> Result<(), Refusal> {
    let pct = plan.offload_optimizer;
    let r = c.offload;
    check_activations(c, plan, layers, refuse)?;
    if plan.offload_params && !r.params {
        return Err(refuse(
            Knob::OffloadParams,
            "offload the parameters to host memory",
            match c.framework {
                Framework::MegatronCore { .. } => {
                    "Megatron-Core's CPU offload flags move the optimizer state only \
                     (--optimizer-cpu-offload, args.py @ core_v0.19.0:L2781-2790); \
                     frameworks.md §1.9"
                }
                _ => "frameworks.md",
            },
        ));
    }
    if pct == 0 {
        return Ok(());
    }
    let k = Knob::OffloadOptimizer;
    if !r.optimizer || r.together && !plan.offload_params {
        return Err(refuse(
            k,
            "offload the optimizer state alone to host memory",
            match c.framework {
                Framework::TorchTitan => {
                    "[training] enable_cpu_offload is FSDP's CPUOffloadPolicy (parameters, \
                     gradients and optimizer state together), job_config.py @ v0.2.2:L242-308; \
                     frameworks.md §2.2"
                }
                _ => "frameworks.md",
            },
        ));
    }
    if r.needs_zero1 && plan.zero.stage != 1 {
        return Err(refuse(
            k,
            "offload the optimizer without the distributed optimizer (zero=1)",
            "--optimizer-cpu-offload requires --use-precision-aware-optimizer, which requires \
             --use-distributed-optimizer, args.py @ core_v0.19.0:L1803-1811, \
             optimizer_config.py @ core_v0.19.0:L430-436; frameworks.md §1.9",
        ));
    }
    if r.needs_zero && plan.zero.stage == 0 {
        return Err(refuse(
            k,
            "offload the optimizer without ZeRO (stage 1, 2 or 3)",
            "zero_optimization.offload_optimizer is valid for stages 1, 2, 3, \
             deepspeed/runtime/zero/offload_config.py @ v0.19.5; frameworks.md §3.3",
        ));
    }
    if r.partial_needs_zero3 && pct < 100 && plan.zero.stage != 3 {
        return Err(refuse(
            k,
            "offload a fraction of the optimizer state below 1 without ZeRO stage 3",
            "offload_optimizer ratio < 1 needs stage 3, offload_config.py @ v0.19.5:L388-393; \
             frameworks.md §3.3",
        ));
    }
    Ok(())
}

/// `offload_activations` against the framework's rules.
fn check_activations(
    c: &Capabilities,
    plan: &Plan,
    layers: u32,
    refuse: &Refuse,
) -> Result<(), Refusal> {
    let n = plan.offload_activations;
    if n == 0 {
        return Ok(());
    }
    let r = c.offload;
    let k = Knob::OffloadActivations;
    if !r.activations {
        return Err(refuse(
            k,
            "offload activations to host memory",
            match c.framework {
                Framework::TorchTitan => {
                    "torchtitan v0.2.2 has no activation offload: its one CPU offload, \
                     [training] enable_cpu_offload, is FSDP's CPUOffloadPolicy (parameters, \
                     gradients, optimizer state), job_config.py @ v0.2.2:L270-274; \
                     frameworks.md §2.2"
                }
                _ => "frameworks.md",
            },
        ));
    }
    // Megatron-Core's `cpu_offloading` (transformer_config.py @ core_v0.19.2:L1707-1722;
    // frameworks.md §1.7).
    let megatron = "transformer_config.py @ core_v0.19.2:L1707-1722 (cpu_offloading); \
                    frameworks.md §1.7";
    if r.activations_single_stage && plan.pp > 1 {
        return Err(refuse(
            k,
            "offload activations with pipeline parallelism (pp > 1)",
            megatron,
        ));
    }
    if r.activations_no_recompute && plan.recompute != crate::Recompute::None {
        return Err(refuse(
            k,
            "offload activations with activation recomputation",
            megatron,
        ));
    }
    if r.activations_below_all && (n == crate::offload_activations::ALL || n >= layers) {
        return Err(refuse(
            k,
            "offload the activations of every layer (--cpu-offloading-num-layers must be \
             below num_layers)",
            megatron,
        ));
    }
    // DeepSpeed's `cpu_checkpointing` moves every checkpointed layer's input to the CPU
    // (checkpointing.py @ v0.19.5:L529-531, L1024; config.py:L84-85).
    let deepspeed = "activation_checkpointing.cpu_checkpointing offloads the checkpoints of \
                     full recompute, of every checkpointed layer, \
                     deepspeed/runtime/activation_checkpointing/checkpointing.py @ \
                     v0.19.5:L529-531, L1024; frameworks.md §3";
    if r.activations_checkpoints && plan.recompute != crate::Recompute::Full {
        return Err(refuse(
            k,
            "offload activations without full recompute",
            deepspeed,
        ));
    }
    if r.activations_checkpoints && n != crate::offload_activations::ALL {
        return Err(refuse(
            k,
            "offload the activations of some layers only (offload_activations=all)",
            deepspeed,
        ));
    }
    Ok(())
}
