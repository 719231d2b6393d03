//! The checks of `Framework::check`, one per group of knobs, each rule with its source.

use super::*;

pub(super) type Refuse<'a> = dyn Fn(Knob, &'static str, &'static str) -> Refusal + 'a;

/// The schedule, the micro-batch rule of the interleaved schedule and uneven stages.
pub(super) fn check_schedule(
    c: &Capabilities,
    plan: &Plan,
    model: &ModelSpec,
    ctx: &Context,
    refuse: &Refuse,
) -> Result<(), Refusal> {
    if !Knob::Schedule.matters(ctx) {
        return Ok(());
    }
    if !c.schedules.contains(&plan.schedule) {
        return Err(refuse(
            Knob::Schedule,
            "run this pipeline schedule",
            c.schedule_source(),
        ));
    }
    let micro = plan.microbatches(model);
    if plan.schedule == Schedule::Interleaved
        && c.interleaved_microbatches_multiple_of_pp
        && !micro.is_multiple_of(plan.pp)
    {
        return Err(refuse(
            Knob::Vpp,
            "run the interleaved schedule with a micro-batch count that is not a multiple of pp",
            match c.framework {
                // `num_microbatches % microbatch_group_size_per_vp_stage` must be 0 or ≥ pp,
                // the group size defaulting to pp: so 0.
                Framework::MegatronCore { .. } => {
                    "schedules.py @ core_v0.19.0:L1133-1152 (group size = pp); frameworks.md §1.2"
                }
                _ => {
                    "autoplan prices the interleaved bubble as (pp−1)/vpp, which holds only for a \
                     multiple of pp (docs/frameworks.md)"
                }
            },
        ));
    }
    if !c.uneven_layouts && (plan.first_stage_layers.is_some() || plan.last_stage_layers.is_some())
    {
        return Err(refuse(
            Knob::FirstStageLayers,
            "place given block counts on the first/last pipeline stage",
            "pipeline partition methods uniform/parameters only, config.py @ v0.19.5:L417-430; \
             frameworks.md §3.4",
        ));
    }
    Ok(())
}

impl Capabilities {
    fn schedule_source(&self) -> &'static str {
        match self.framework {
            Framework::MegatronCore { .. } => {
                "1F1B and interleaved 1F1B only, schedules.py @ core_v0.19.0:L48-163; no \
                 zero-bubble or DualPipe schedule; frameworks.md §1.2"
            }
            Framework::TorchTitan => {
                "1F1B, Interleaved1F1B and DualPipeV; its zero-bubble schedules (InterleavedZeroBubble, \
                 ZBVZeroBubble) need ≥ 2 stages per rank, autoplan's zero-bubble is ZB-H1 with one; \
                 pipeline_parallel.py @ v0.2.2:L96-110,L446-466; frameworks.md §2.1"
            }
            _ => "TrainSchedule (1F1B) only, pipe/schedule.py @ v0.19.5:L189-200; frameworks.md §3.4",
        }
    }
}

/// ZeRO/FSDP/HSDP and context parallelism.
pub(super) fn check_data_parallel(
    c: &Capabilities,
    plan: &Plan,
    ctx: &Context,
    refuse: &Refuse,
) -> Result<(), Refusal> {
    let s = &c.sharding;
    let z = plan.zero;
    let fw = c.framework;
    // A mode that keeps parameters gathered is checked even where the sharding does not
    // matter (dp = 1): its export still names it (`--use-torch-fsdp2`), and the framework
    // validates the flag whatever dp is (tools/megatron_check found a pp = 2, dp = 1 plan).
    if Knob::Zero.matters(ctx) || z.keeps_gathered() {
        let model_parallel = plan.tp > 1 || plan.cp > 1 || plan.pp > 1 || plan.ep > 1;
        // With PP, a framework whose pipelining gathers and reduces an FSDP stage once per
        // step runs that and nothing else (`ShardModes::pp_once_per_step`).
        let once = s.pp_once_per_step && plan.pp > 1;
        let ok = match (z.stage, z.group > 0) {
            (0, _) => s.ddp_with_model_parallel || !model_parallel,
            (1, false) => s.zero1 || once,
            (1, true) => s.hsdp1 || once,
            _ if once => false,
            (2, false) => s.zero2 && (s.zero23_with_pp || plan.pp == 1),
            (3, false) if z.keeps_gathered() => {
                s.zero3_noreshard && (s.noreshard_with_pp_ep || (plan.pp == 1 && plan.ep == 1))
            }
            (3, false) => s.zero3 && (s.zero23_with_pp || plan.pp == 1),
            // HSDP groups keeping the parameters gathered need the no-reshard mode too.
            (3, true) => {
                s.hsdp3
                    && (s.zero23_with_pp || plan.pp == 1)
                    && (!z.keeps_gathered() || s.zero3_noreshard)
            }
            _ => false,
        };
        if !ok {
            return Err(refuse(Knob::Zero, "shard the data-parallel ranks this way", match fw {
                Framework::MegatronCore { .. } => {
                    "distributed optimizer (zero=1, :G by --num-distributed-optimizer-instances), \
                     Megatron-FSDP optim_grads/optim_grads_params (zero=2/3), Torch-FSDP2 \
                     no-reshard (zero=3-noreshard) only with pp = 1 and ep = 1 (arguments.py @ megatron-core 0.19.2:L997-1003), \
                     args.py @ core_v0.19.0:L997-1030,L1100-1165; frameworks.md §1.1, §1.4"
                }
                Framework::TorchTitan => {
                    "FSDP2 fully_shard only (zero=3, 3-noreshard, HSDP 3:G); DDP is 1-D only, \
                     llama3/infra/parallelize.py @ v0.2.2:L148-151; frameworks.md §2.1. With \
                     pp > 1 PyTorch's pipelining gathers an FSDP stage's parameters once and \
                     reduces its gradients once per step: zero=1 (1:G), and only that \
                     (torch/distributed/pipelining/stage.py @ torch 2.15.0:L1129-1133, \
                     L1416-1447)"
                }
                _ => {
                    "ZeRO 2/3 are incompatible with pipeline parallelism (pipe/engine.py @ \
                     v0.19.5:L76-77), HSDP only as MiCS at stage 3, no keep-gathered stage 3; \
                     frameworks.md §3.3"
                }
            }));
        }
    }
    if Knob::CpComm.matters(ctx) {
        let m = &c.cp;
        let ok = match plan.cp_comm {
            CpComm::Ring => m.ring,
            CpComm::AllToAll => m.all_to_all,
            CpComm::AllGather => m.all_gather,
            CpComm::Hierarchical { .. } => m.hierarchical,
        };
        if !ok {
            return Err(refuse(Knob::CpComm, "exchange K/V across context-parallel ranks this way", match fw {
                Framework::MegatronCore { .. } => "--cp-comm-type p2p/a2a/all_gather/a2a+p2p, transformer_config.py @ core_v0.19.0:L987-1003; frameworks.md §1.5",
                Framework::TorchTitan => "context_parallel_rotate_method allgather/alltoall (ring attention), no Ulysses, utils.py @ v0.2.2:L205-216; frameworks.md §2.1",
                _ => "Ulysses sequence parallelism (all-to-all) only; frameworks.md §3.1",
            }));
        }
    }
    Ok(())
}

/// Sequence parallelism, TP overlap, the TP→SP transition and the key/value heads.
pub(super) fn check_tensor(
    c: &Capabilities,
    plan: &Plan,
    model: &ModelSpec,
    ctx: &Context,
    refuse: &Refuse,
) -> Result<(), Refusal> {
    if Knob::TpOverlap.matters(ctx) && plan.tp_overlap {
        if !c.tp_overlap {
            return Err(refuse(
                Knob::TpOverlap,
                "overlap tensor-parallel communication with GEMMs",
                "no TP comm overlap; frameworks.md §3",
            ));
        }
        if c.tp_overlap_needs_sp && !plan.sp {
            return Err(refuse(
                Knob::TpOverlap,
                "overlap TP communication without sequence parallelism",
                "--tp-comm-overlap asserts --sequence-parallel, args.py @ core_v0.19.0:L1401-1402 \
                 (core_v0.14.0:L844-845); frameworks.md §1.3",
            ));
        }
    }
    if Knob::Sp.matters(ctx) && c.sp_always_with_tp && !plan.sp {
        return Err(refuse(
            Knob::Sp,
            "run tensor parallelism without sequence parallelism",
            "the sequence-parallel style is applied with TP, job_config.py @ v0.2.2:L311-484; \
             frameworks.md §2.1",
        ));
    }
    if Knob::Transition.matters(ctx) && !c.transitions.contains(&plan.tp_sp_transition) {
        return Err(refuse(
            Knob::Transition,
            "replace the row-parallel attention output projection by an all-to-all",
            "the attention output projection is row-parallel (seed 001's all-to-all transition \
             is autoplan's own)",
        ));
    }
    if let Attention::Gqa { kv_heads, .. } = model.attention {
        if !c.kv_head_replication && plan.tp > kv_heads {
            return Err(refuse(
                Knob::Tp,
                "replicate key/value heads (tp above the key/value heads)",
                "num_query_groups a multiple or divisor of tp from transformer_config.py @ \
                 core_v0.19.0:L1338-1345; not verified before 0.19 (frameworks.md §1.1)",
            ));
        }
    }
    Ok(())
}

/// Selective recompute, its modules, and full recompute of the first N blocks.
pub(super) fn check_recompute(
    c: &Capabilities,
    plan: &Plan,
    refuse: &Refuse,
) -> Result<(), Refusal> {
    match plan.recompute {
        Recompute::None => Ok(()),
        Recompute::Selective => {
            if !c.selective_recompute || plan.recompute_modules.0 & !c.recompute_modules != 0 {
                return Err(refuse(
                    Knob::Recompute,
                    "recompute these modules selectively",
                    match c.framework {
                        Framework::MegatronCore { .. } => {
                            "--recompute-modules core_attn, moe_act, layernorm, mla_up_proj, mlp, \
                             moe, shared_experts; transformer_config.py @ core_v0.19.0:L518-563; \
                             frameworks.md §1.7"
                        }
                        Framework::TorchTitan => {
                            "activation_checkpoint mode selective is per-op SAC or every N-th \
                             layer, not module sets; activation_checkpoint.py @ v0.2.2:L164-186; \
                             frameworks.md §2.3"
                        }
                        _ => "activation checkpointing of whole layers only; frameworks.md §3.4",
                    },
                ));
            }
            if plan.recompute_layers.is_some() {
                return Err(refuse(
                    Knob::RecomputeLayers,
                    "restrict selective recompute to the first blocks of a stage",
                    "selective requires recompute_method and recompute_num_layers unset, \
                     transformer_config.py @ core_v0.19.0:L1724-1835; frameworks.md §1.7",
                ));
            }
            Ok(())
        }
        Recompute::Full => {
            if plan.recompute_layers.is_some() && !c.full_recompute_layers {
                return Err(refuse(
                    Knob::RecomputeLayers,
                    "recompute only the first N blocks of each stage",
                    "no per-stage block count for activation checkpointing; frameworks.md §2.3, §3.4",
                ));
            }
            Ok(())
        }
    }
}

/// Expert parallelism: the degrees, the scheme, the dispatcher, the placement and the overlap.
pub(super) fn check_experts(
    c: &Capabilities,
    plan: &Plan,
    ctx: &Context,
    refuse: &Refuse,
) -> Result<(), Refusal> {
    if !ctx.moe {
        return Ok(());
    }
    if !c.expert_parallel && (plan.ep > 1 || plan.moe_tp > 1) {
        return Err(refuse(
            Knob::Ep,
            "split experts over GPUs (the reference covers no DeepSpeed-MoE rule)",
            "frameworks.md §3",
        ));
    }
    if c.moe_tp_one_or_tp && plan.moe_tp != 1 && plan.moe_tp != plan.tp {
        return Err(refuse(
            Knob::MoeTp,
            "run an expert-tensor-parallel degree other than 1 or tp",
            "ParallelDims._validate: etp ∈ {tp, 1}, parallel_dims.py @ v0.2.2:L33-57; \
             frameworks.md §2.1",
        ));
    }
    if Knob::MoeTpScheme.matters(ctx) && !c.moe_tp_schemes.contains(&plan.moe_tp_scheme) {
        return Err(refuse(
            Knob::MoeTpScheme,
            "scatter tokens to the expert-tensor-parallel ranks (scheme 1)",
            "expert TP runs after the all-to-all dispatch, all-gather/reduce-scatter inside the \
             group (scheme 2); frameworks.md §1.6",
        ));
    }
    if Knob::Dispatcher.matters(ctx) && !c.dispatchers.contains(&plan.dispatcher) {
        return Err(refuse(
            Knob::Dispatcher,
            "dispatch tokens this way",
            match c.framework {
                Framework::TorchTitan => {
                    "expert_parallel_comm_backend standard (all-to-all) or deepep, \
                     deepseek_v3/infra/parallelize.py @ v0.2.2:L96-110; frameworks.md §2.1"
                }
                _ => "frameworks.md §1.6",
            },
        ));
    }
    if let (PlacementPolicy::Balanced { .. }, true, false) = (
        plan.placement,
        Knob::Placement.matters(ctx),
        c.balanced_placement,
    ) {
        return Err(refuse(
            Knob::Placement,
            "place experts by load with redundant replicas",
            "experts are laid out contiguously over the EP ranks (no redundant experts); \
             frameworks.md §1.6, §2.1",
        ));
    }
    if Knob::EpOverlap.matters(ctx) && plan.ep_overlap {
        check_ep_overlap(c, plan, refuse)?;
    }
    Ok(())
}

/// Megatron-Core's `overlap_moe_expert_parallel_comm` requirements (`transformer_config.py @
/// core_v0.19.0:L2669-2744`, `@ core_v0.14.0:L1298-1337`; the flag first in 0.14,
/// `args.py @ core_v0.14.0:L2889-2892`; frameworks.md §1.6) and torchtitan's DualPipeV-only
/// overlap (`pipeline_parallel_expert_parallel_overlap`, job_config.py @ v0.2.2; no activation
/// checkpointing, dual_pipe_v.py @ v0.2.2:L32-51; frameworks.md §2.1).
pub(super) fn check_ep_overlap(
    c: &Capabilities,
    plan: &Plan,
    refuse: &Refuse,
) -> Result<(), Refusal> {
    let r = &c.ep_overlap;
    const MCORE: &str = "overlap_moe_expert_parallel_comm checks, transformer_config.py @ \
                         core_v0.19.0:L2669-2744 (core_v0.14.0:L1298-1337); frameworks.md §1.6";
    const TITAN: &str = "pipeline_parallel_expert_parallel_overlap is active only with DualPipeV, \
                         pp > 1, ep > 1 and no activation checkpointing, dual_pipe_v.py @ \
                         v0.2.2:L32-51; frameworks.md §2.1";
    let source = match c.framework {
        Framework::TorchTitan => TITAN,
        _ => MCORE,
    };
    let why = if !r.supported {
        Some("overlap the EP all-to-all with computation")
    } else if r
        .only_schedule
        .is_some_and(|s| plan.pp <= 1 || plan.schedule != s)
    {
        Some("overlap EP outside the DualPipeV schedule")
    } else if r.needs_ep && plan.ep <= 1 {
        Some("overlap EP communication with ep = 1")
    } else if r.pp_needs_vpp && plan.pp > 1 && plan.schedule != Schedule::Interleaved {
        Some("overlap EP with pp > 1 without virtual pipeline stages")
    } else if r.no_recompute && plan.recompute != Recompute::None {
        Some("overlap EP with activation recompute")
    } else if r.no_full_recompute && plan.recompute == Recompute::Full {
        Some("overlap EP with full recompute")
    } else if r.no_full_recompute && plan.recompute_layers.is_some() {
        Some("overlap EP with a recompute block count")
    } else if r.no_moe_recompute
        && plan.recompute == Recompute::Selective
        && plan.recompute_modules.has(RecomputeModules::MOE)
    {
        Some("overlap EP with the moe module recomputed")
    } else if r.no_all_gather_dispatcher && plan.dispatcher == Dispatcher::AllGather {
        Some("overlap EP with the all-gather dispatcher")
    } else {
        None
    };
    match why {
        Some(reason) => Err(refuse(Knob::EpOverlap, reason, source)),
        None => Ok(()),
    }
}

/// The rank order, compared with the dimensions of size 1 (dense and folded) dropped.
pub(super) fn check_order(
    c: &Capabilities,
    plan: &Plan,
    ctx: &Context,
    refuse: &Refuse,
) -> Result<(), Refusal> {
    if c.rank_orders.is_empty() {
        return Ok(());
    }
    let ours = ctx.order_class(&plan.order);
    let pos = c
        .rank_orders
        .iter()
        .position(|o| ctx.order_class(&RankOrder(*o)) == ours);
    match pos {
        None => Err(refuse(
            Knob::Order,
            "order ranks this way",
            match c.framework {
                Framework::MegatronCore { .. } => {
                    "tp-cp-ep-dp-pp, or tp-cp-ep-pp-dp with --use-tp-pp-dp-mapping, \
                     parallel_state.py @ core_v0.19.0:L617, initialize.py @ core_v0.19.0:L388; \
                     frameworks.md §1.1"
                }
                Framework::TorchTitan => {
                    "meshes pp, dp_replicate, fsdp (dp_shard·cp), tp, parallel_dims.py @ \
                     v0.2.2:L133-160; frameworks.md §2.1"
                }
                _ => "the reference documents DeepSpeed's default order only; frameworks.md §3",
            },
        )),
        // `--use-tp-pp-dp-mapping` with pp > 1 asserts the expert data-parallel size equals
        // the dense one (`parallel_state.py @ core_v0.19.0:L898-902`; frameworks.md §1.1).
        Some(1) if ctx.moe && plan.pp > 1 && plan.ep * plan.moe_tp > 1 && plan.edp() != plan.dp => {
            Err(refuse(
                Knob::Order,
                "order ranks tp-cp-pp-dp with pp > 1 when the expert data-parallel size differs \
                 from the dense one",
                "--use-tp-pp-dp-mapping asserts expert DP = DP when pp > 1, parallel_state.py @ \
                 core_v0.19.0:L898-902; frameworks.md §1.1",
            ))
        }
        Some(_) => Ok(()),
    }
}
