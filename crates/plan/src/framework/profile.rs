//! Cost profiles: what a framework (and version era) overlaps and fuses, the part of a run's
//! cost that is the framework's and not the plan's (issue 17 item 4). One home for each such
//! rule; the evaluator turns a profile into its options (`autoplan_evaluate::EvalOptions::
//! with_profile`), `evaluate`/`search` take it from `--framework` ([`Framework::profile`]), and
//! `validate` maps each published row to the profile of the stack it ran (a rule on its
//! source, `autoplan_evaluate::validate`).
//!
//! A profile holds mechanisms, not constants: no profile carries a fitted number, so the
//! efficiency constants stay one set per GPU architecture (`autoplan_cost::compute::ARCH_TABLE`).

use super::Framework;

/// The cost mechanisms of one framework version era.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CostProfile {
    /// Short name (`validate`'s per-framework summary, docs/frameworks.md).
    pub name: &'static str,
    /// The DP gradient reduction (all-reduce, or the distributed optimizer's reduce-scatter)
    /// runs bucketed during the backward pass, and ZeRO-1's parameter all-gather during the
    /// forward. `false`: after the backward pass, on the critical path. FSDP / ZeRO-3
    /// prefetching is priced on its own (`zero.rs`: it overlaps in every framework that runs
    /// it), so this flag only reaches stages 0–2.
    pub dp_overlap: bool,
    /// The runs overlapped the TP collectives with the GEMMs (Megatron-Core's
    /// `--tp-comm-overlap` through Transformer Engine's userbuffers, torchtitan's async TP).
    /// What a published row of the profile is evaluated with; what a framework *can* run is
    /// its capability table (`Capabilities::tp_overlap`).
    pub tp_comm_overlap: bool,
    /// ZeRO-1/2 gradients are reduced by an all-reduce of each bucket, each rank keeping its
    /// slice, not a reduce-scatter: DeepSpeed's `average_tensor` with its default
    /// `use_multi_rank_bucket_allreduce` (stage_1_and_2.py @ v0.19.5:L1288-1443; frameworks.md
    /// §3.5), twice a reduce-scatter's bytes.
    pub zero_grad_all_reduce: bool,
    /// The attention core is one fused FlashAttention-class kernel (no `s×s` scores in HBM);
    /// `false`: the scores computed, masked, soft-maxed and stored by separate kernels.
    pub fused_attention: bool,
    /// Offloaded activations (`offload_activations`) move on their own CUDA streams, the next
    /// layer's prefetched, beside the compute (Transformer Engine's
    /// `AsyncDoubleBufferGroupOffloadHandler`, `cpu_offload.py @ TE v2.8.0:L302-353`, which
    /// Megatron-Core's `--cpu-offloading-num-layers` uses). `false`: copied on the compute stream, exposed
    /// (DeepSpeed's `cpu_checkpointing` moves each checkpoint with `tensor.to(device)`,
    /// `runtime/utils.py @ v0.19.5:L164-177`, `checkpointing.py:L529-531, L625-627`).
    pub activation_offload_overlap: bool,
    /// Where each mechanism's value comes from.
    pub source: &'static str,
    /// What the framework does that costs time and the profile does not price, and what
    /// measurement would settle it (`validate` prints it beside the profile's rows beyond
    /// 20%); empty where nothing framework-specific is known to be missing.
    pub not_modelled: &'static str,
}

impl CostProfile {
    /// Megatron-Core as NVIDIA's recipes run it (NeMo, Megatron-Bridge, the MoE ModelZoo,
    /// MLPerf's NVIDIA submissions): `--overlap-grad-reduce --overlap-param-gather`,
    /// `--tp-comm-overlap`, Transformer Engine's fused attention.
    pub const MEGATRON_CORE: CostProfile = CostProfile {
        name: "megatron-core",
        dp_overlap: true,
        tp_comm_overlap: true,
        zero_grad_all_reduce: false,
        fused_attention: true,
        activation_offload_overlap: true,
        source: "frameworks.md §1.3 (TP comm overlap), §1.4 (overlap-grad-reduce, \
                 overlap-param-gather with the distributed optimizer)",
        not_modelled: "",
    };

    /// Megatron-LM v1 (2020; `meg20_` rows): its `LocalDDP` all-reduces the gradients after
    /// the backward pass; attention unfused (scale-mask-softmax kernel); no TP overlap.
    pub const MEGATRON_LM_2020: CostProfile = CostProfile {
        name: "megatron-lm-2020",
        dp_overlap: false,
        tp_comm_overlap: false,
        zero_grad_all_reduce: false,
        fused_attention: false,
        activation_offload_overlap: true,
        source: "Megatron-LM v1 README (2020) and Shoeybi+19 §3: LocalDDP reduces after \
                 backward; published_runs_SOURCES.md §2",
        not_modelled: "",
    };

    /// Megatron-LM 2021–22 (`nar21_`, `kor22_`): torch DDP buckets overlap the gradient
    /// all-reduce with the backward; unfused attention (FlashAttention came in 2023); no TP
    /// overlap (Korthikanti+22 §4: TP collectives on the critical path).
    pub const MEGATRON_LM_2021: CostProfile = CostProfile {
        name: "megatron-lm-2021",
        dp_overlap: true,
        tp_comm_overlap: false,
        zero_grad_all_reduce: false,
        fused_attention: false,
        activation_offload_overlap: true,
        source: "Narayanan+21 §4 (torch DDP), Korthikanti+22 §4; published_runs_SOURCES.md §2",
        not_modelled: "",
    };

    /// Plain Megatron-LM of 2023 run with its defaults (MegaScale's baseline, commit
    /// 285068c8): `--overlap-grad-reduce` off (its default, arguments.py, still off in
    /// Megatron-Core: frameworks.md §1.4), `--tp-comm-overlap` off (default), no
    /// `--use-flash-attn` (default off). MegaScale (Jiang+24 §3.2–3.3) lists exactly these —
    /// DP/TP/PP communication overlap and FlashAttention-2 — among what it adds over this
    /// baseline.
    pub const MEGATRON_LM_2023: CostProfile = CostProfile {
        name: "megatron-lm-2023",
        dp_overlap: false,
        tp_comm_overlap: false,
        zero_grad_all_reduce: false,
        fused_attention: false,
        activation_offload_overlap: true,
        source: "Megatron-LM argument defaults (frameworks.md §1.3, §1.4); MegaScale \
                 (Jiang+24) §3.2-3.3 names these as its additions to the baseline (the flags \
                 are the defaults at the commit, inferred: the run's arguments would settle \
                 them)",
        not_modelled: "",
    };

    /// Megatron-DeepSpeed of 2021–22 (MT-NLG, BLOOM, GPT-NeoX): DeepSpeed reduces ZeRO-0/1
    /// gradients at the accumulation boundary, after the backward (`overlap_comm` resolves to
    /// false below stage 3; frameworks.md §3.3, §3.5); no TP overlap (frameworks.md §3, the
    /// capability table); attention unfused (Megatron's fused scale-mask-softmax of 2021).
    pub const MEGATRON_DEEPSPEED_2022: CostProfile = CostProfile {
        name: "megatron-deepspeed",
        dp_overlap: false,
        tp_comm_overlap: false,
        zero_grad_all_reduce: true,
        fused_attention: false,
        activation_offload_overlap: false,
        source: "deepspeed/runtime/zero/config.py overlap_comm default and stage_1_and_2.py \
                 (frameworks.md §3.3, §3.5); pre-FlashAttention Megatron kernels",
        not_modelled: "DeepSpeed's pipeline engine (blocking send/recv through two-rank \
                       broadcast groups, one instruction at a time) and DeepSpeed's activation \
                       checkpointing (which can partition the saved activations over TP and \
                       gather them before each recompute) are not priced: the rows run 24-37% \
                       slower per block and micro-batch than these kernels predict. An Nsight \
                       Systems trace of one pipeline stage of a Megatron-DeepSpeed step on A100 \
                       would settle their cost",
    };

    /// DeepSpeed 0.19.5 (`--framework deepspeed`): gradient reduction after the backward below
    /// stage 3 (`overlap_comm` default, frameworks.md §3.3); the attention kernel is the
    /// model code's (fused, as every current model code has it).
    pub const DEEPSPEED: CostProfile = CostProfile {
        name: "deepspeed",
        dp_overlap: false,
        tp_comm_overlap: false,
        zero_grad_all_reduce: true,
        fused_attention: true,
        activation_offload_overlap: false,
        source: "deepspeed/runtime/zero/config.py @ v0.19.5:L382-386 (frameworks.md §3.3)",
        not_modelled:
            "DeepSpeed's pipeline engine (blocking send/recv, one instruction at a time) is \
                       priced as Megatron's 1F1B; a trace of one pipeline stage would settle it",
    };

    /// torchtitan (FSDP2): FSDP2 prefetches the next unit's all-gather and overlaps the
    /// reduce-scatter with the backward (`fully_shard`, frameworks.md §3.6); SDPA's fused
    /// kernels; TP overlap only as async TP, which a row names.
    pub const TORCHTITAN: CostProfile = CostProfile {
        name: "torchtitan",
        dp_overlap: true,
        tp_comm_overlap: false,
        zero_grad_all_reduce: false,
        fused_attention: true,
        activation_offload_overlap: false,
        source: "frameworks.md §2.1 (enable_async_tensor_parallel off by default), §3.6 (FSDP2)",
        not_modelled: "torch.compile's fusions, Float8's scaling kernels under FSDP2, PyTorch's \
                       experimental context-parallel SDPA (all-gather rotation by default, \
                       frameworks.md §2.1) and the 500 W power cap of the 96 GB H100s are not modelled; \
                       a trace of one step at 32K (cp 1) and 256K (cp 8), and the GEMM rate under the \
                       500 W cap, would settle them",
    };

    /// llm-foundry / Composer (PyTorch FSDP1, `FULL_SHARD`, `BACKWARD_PRE` prefetch, Flash
    /// Attention): overlapped as FSDP2; no tensor parallelism.
    pub const LLM_FOUNDRY: CostProfile = CostProfile {
        name: "llm-foundry",
        dp_overlap: true,
        tp_comm_overlap: false,
        zero_grad_all_reduce: false,
        fused_attention: true,
        activation_offload_overlap: false,
        source: "llm-foundry benchmarking README (FSDP FULL_SHARD, Flash Attention); \
                 frameworks.md §3.6",
        not_modelled: "eager PyTorch elementwise kernels (LayerNorm, GELU, residual adds: each a read \
                       and a write of the activation, where the model prices fused kernels' traffic) \
                       and FSDP1's host-side issue of each unit's all-gather (limit_all_gathers) are \
                       not priced; a trace of one MPT-7B step on 512 H100s would settle the split",
    };

    /// Every profile, for listings and tests.
    pub const ALL: [CostProfile; 8] = [
        CostProfile::MEGATRON_CORE,
        CostProfile::MEGATRON_LM_2020,
        CostProfile::MEGATRON_LM_2021,
        CostProfile::MEGATRON_LM_2023,
        CostProfile::MEGATRON_DEEPSPEED_2022,
        CostProfile::DEEPSPEED,
        CostProfile::TORCHTITAN,
        CostProfile::LLM_FOUNDRY,
    ];
}

impl CostProfile {
    /// The profile of this name ([`CostProfile::ALL`]).
    pub fn named(name: &str) -> Option<CostProfile> {
        CostProfile::ALL.into_iter().find(|p| p.name == name)
    }
}

impl Framework {
    /// The cost profile of the framework `--framework` names. `any` prices as Megatron-Core
    /// (the default framework: its overlaps are the best autoplan prices).
    pub fn profile(self) -> CostProfile {
        match self {
            Framework::MegatronCore { .. } | Framework::Any => CostProfile::MEGATRON_CORE,
            Framework::TorchTitan => CostProfile::TORCHTITAN,
            Framework::DeepSpeed => CostProfile::DEEPSPEED,
        }
    }
}
