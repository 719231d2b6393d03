//! The capability table of each framework and version (sources in each entry).

use super::*;

/// Megatron-Core `0.<minor>`.
pub(super) fn megatron(fw: Framework, minor: u8) -> Capabilities {
    // FP8 recipes by version (`--fp8-recipe` choices: 0.13–0.15 tensorwise, delayed, mxfp8,
    // blockwise; `--fp4-format` from 0.15; transformer_config.py @ core_v0.19.0:L566-579;
    // frameworks.md §1.8, flag table §1.0).
    const P14: &[Precision] = &[
        Precision::Fp32,
        Precision::Fp16,
        Precision::Bf16,
        Precision::Fp8,
        Precision::Fp8Current,
        Precision::Fp8Block,
        Precision::Mxfp8,
    ];
    const P15: &[Precision] = &[
        Precision::Fp32,
        Precision::Fp16,
        Precision::Bf16,
        Precision::Fp8,
        Precision::Fp8Current,
        Precision::Fp8Block,
        Precision::Mxfp8,
        Precision::Nvfp4,
    ];
    Capabilities {
        framework: fw,
        // schedules.py @ core_v0.19.0:L48-163: no pipelining, 1F1B, interleaved 1F1B (combined
        // 1F1B is the EP overlap, not a schedule choice); no ZB/ZB-V/DualPipe (frameworks.md §1.2).
        schedules: &[Schedule::OneF1B, Schedule::Interleaved],
        interleaved_microbatches_multiple_of_pp: true,
        cp: CpModes {
            ring: true,
            all_to_all: true,
            all_gather: true,
            hierarchical: true,
        },
        sharding: ShardModes {
            ddp_with_model_parallel: true,
            zero1: true,
            // `--use-megatron-fsdp` (0.14+) `optim_grads` / `optim_grads_params`.
            zero2: true,
            zero3: true,
            // `--use-torch-fsdp2 --torch-fsdp2-no-reshard-after-forward` (0.13+), PP = EP = 1.
            zero3_noreshard: true,
            noreshard_with_pp_ep: false,
            zero23_with_pp: true,
            // `--num-distributed-optimizer-instances` (0.10+).
            hsdp1: true,
            // Hybrid FSDP (`--outer-dp-sharding-strategy`, 0.16+) shards the outer group too:
            // not autoplan's replicated HSDP groups.
            hsdp3: false,
            pp_once_per_step: false,
        },
        ep_overlap: EpOverlapRules {
            supported: true,
            only_schedule: None,
            pp_needs_vpp: true,
            no_full_recompute: true,
            // `"moe"` not in recompute_modules: since 0.15.
            no_moe_recompute: minor >= 15,
            no_all_gather_dispatcher: true,
            needs_ep: true,
            no_recompute: false,
        },
        tp_overlap: true,
        tp_overlap_needs_sp: true,
        sp_always_with_tp: false,
        selective_recompute: true,
        // 0.14 added shared_experts (frameworks.md §1.7): every module autoplan knows.
        recompute_modules: RecomputeModules::ALL.0,
        full_recompute_layers: true,
        // `--decoder-first/last-pipeline-num-layers` and `--pipeline-model-parallel-layout`
        // (0.13+; frameworks.md §1.2).
        uneven_layouts: true,
        rank_orders: MEGATRON_ORDERS,
        precisions: if minor >= 15 { P15 } else { P14 },
        expert_parallel: true,
        moe_tp_one_or_tp: false,
        moe_tp_schemes: &[MoeTpScheme::GroupAllToAll],
        // `--moe-token-dispatcher-type {allgather,alltoall,flex}` (+ DeepEP backend).
        dispatchers: &[
            Dispatcher::AllToAll,
            Dispatcher::AllGather,
            Dispatcher::DeepEp,
        ],
        transitions: &[TpSpTransition::AllReduceSlice],
        balanced_placement: false,
        kv_head_replication: minor >= 19,
        library: None,
        // `--optimizer-cpu-offload`, `--optimizer-offload-fraction`,
        // `--overlap-cpu-optimizer-d2h-h2d` (0.12+, flag table; args.py @
        // core_v0.19.0:L2781-2790; frameworks.md §1.9), on the distributed optimizer only.
        offload: OffloadRules {
            optimizer: true,
            needs_zero1: true,
            needs_zero: false,
            partial_needs_zero3: false,
            // No parameter offload (frameworks.md §1.9 lists optimizer offload only).
            params: false,
            together: false,
            // `--cpu-offloading-num-layers N` (N > 0 sets `cpu_offloading`, arguments.py @
            // core_v0.19.2:L1869-1870; Transformer Engine's `get_cpu_offload_context`,
            // transformer_block.py @ core_v0.19.2:L298-319): no PP, no recompute,
            // `N < num_layers` (transformer_config.py @ core_v0.19.2:L1707-1722; frameworks.md
            // §1.7). The fine-grained module offload
            // (`--fine-grained-activation-offloading`, L1846-1880) offloads module inputs, not
            // layers: not priced.
            activations: true,
            activations_single_stage: true,
            activations_no_recompute: true,
            activations_below_all: true,
            activations_checkpoints: false,
        },
    }
}

/// torchtitan v0.2.2 (frameworks.md §2).
pub(super) fn torchtitan(fw: Framework) -> Capabilities {
    Capabilities {
        framework: fw,
        // 1F1B, Interleaved1F1B and DualPipeV (V-shaped DualPipe) from
        // `pipeline_parallel_schedule` (§2.1).
        schedules: &[Schedule::OneF1B, Schedule::Interleaved, Schedule::DualPipe],
        interleaved_microbatches_multiple_of_pp: true,
        cp: CpModes {
            ring: true,
            all_to_all: false,
            all_gather: true,
            hierarchical: false,
        },
        sharding: ShardModes {
            ddp_with_model_parallel: false,
            zero1: false,
            zero2: false,
            zero3: true,
            zero3_noreshard: true,
            noreshard_with_pp_ep: true,
            zero23_with_pp: true,
            hsdp1: false,
            hsdp3: true,
            // Its pipelining is PyTorch's: an FSDP stage gathers and reduces once per step
            // (`ShardModes::pp_once_per_step`), so with PP the plan's sharding is zero=1 (1:G).
            pp_once_per_step: true,
        },
        ep_overlap: EpOverlapRules {
            supported: true,
            only_schedule: Some(Schedule::DualPipe),
            pp_needs_vpp: false,
            no_full_recompute: false,
            no_moe_recompute: false,
            no_all_gather_dispatcher: false,
            needs_ep: true,
            no_recompute: true,
        },
        // Async TP (`enable_async_tensor_parallel`, with compile), SP always on with TP.
        tp_overlap: true,
        tp_overlap_needs_sp: true,
        sp_always_with_tp: true,
        selective_recompute: false,
        recompute_modules: 0,
        full_recompute_layers: false,
        // `module_fqns_per_model_part` gives explicit stage contents (§2.1).
        uneven_layouts: true,
        rank_orders: DEFAULT_ORDER,
        // bf16/fp32, Float8 tensorwise (current scaling), MXFP8 (§2.5).
        precisions: &[
            Precision::Fp32,
            Precision::Bf16,
            Precision::Fp8Current,
            Precision::Mxfp8,
        ],
        expert_parallel: true,
        moe_tp_one_or_tp: true,
        moe_tp_schemes: &[MoeTpScheme::GroupAllToAll],
        dispatchers: &[Dispatcher::AllToAll, Dispatcher::DeepEp],
        transitions: &[TpSpTransition::AllReduceSlice],
        balanced_placement: false,
        kv_head_replication: true,
        library: None,
        // `enable_cpu_offload` offloads parameters and gradients with the optimizer state
        // (FSDP CPUOffloadPolicy; frameworks.md §2.2): both or neither, no optimizer-only
        // offload.
        offload: OffloadRules {
            optimizer: true,
            needs_zero1: false,
            needs_zero: false,
            partial_needs_zero3: false,
            params: true,
            together: true,
            // No activation offload in v0.2.2 (job_config.py @ v0.2.2:L270-274: the CPU
            // offload is FSDP's, of parameters, gradients and optimizer state).
            activations: false,
            activations_single_stage: false,
            activations_no_recompute: false,
            activations_below_all: false,
            activations_checkpoints: false,
        },
    }
}

/// DeepSpeed v0.19.5 (frameworks.md §3; tensor parallelism through Megatron-DeepSpeed).
pub(super) fn deepspeed(fw: Framework) -> Capabilities {
    Capabilities {
        framework: fw,
        schedules: &[Schedule::OneF1B],
        interleaved_microbatches_multiple_of_pp: true,
        cp: CpModes {
            ring: false,
            all_to_all: true,
            all_gather: false,
            hierarchical: false,
        },
        sharding: ShardModes {
            ddp_with_model_parallel: true,
            zero1: true,
            zero2: true,
            zero3: true,
            zero3_noreshard: false,
            noreshard_with_pp_ep: false,
            zero23_with_pp: false,
            hsdp1: false,
            // MiCS (`mics_shard_size`, stage 3; zero3.rst @ v0.19.5:L157-190).
            hsdp3: true,
            pp_once_per_step: false,
        },
        ep_overlap: EpOverlapRules {
            supported: false,
            only_schedule: None,
            pp_needs_vpp: false,
            no_full_recompute: false,
            no_moe_recompute: false,
            no_all_gather_dispatcher: false,
            needs_ep: false,
            no_recompute: false,
        },
        tp_overlap: false,
        tp_overlap_needs_sp: true,
        sp_always_with_tp: false,
        selective_recompute: false,
        recompute_modules: 0,
        full_recompute_layers: false,
        uneven_layouts: false,
        rank_orders: DEFAULT_ORDER,
        precisions: &[Precision::Fp32, Precision::Fp16, Precision::Bf16],
        expert_parallel: false,
        moe_tp_one_or_tp: false,
        moe_tp_schemes: &[MoeTpScheme::GroupAllToAll],
        dispatchers: &[Dispatcher::AllToAll],
        transitions: &[TpSpTransition::AllReduceSlice],
        balanced_placement: false,
        kv_head_replication: true,
        library: None,
        // `zero_optimization.offload_optimizer {device: cpu, ratio}`: stages 1-3, `ratio < 1`
        // stage 3 only (offload_config.py @ v0.19.5:L388-393; frameworks.md §3.3).
        offload: OffloadRules {
            optimizer: true,
            needs_zero1: false,
            needs_zero: true,
            partial_needs_zero3: true,
            // `zero_optimization.offload_param`: stage 3 only (§3.3), which `Plan::check`
            // asks of every parameter offload.
            params: true,
            together: false,
            // `activation_checkpointing.cpu_checkpointing`: full recompute's checkpoints of
            // every layer to the CPU (checkpointing.py @ v0.19.5:L529-531, L1024).
            activations: true,
            activations_single_stage: false,
            activations_no_recompute: false,
            activations_below_all: false,
            activations_checkpoints: true,
        },
    }
}
