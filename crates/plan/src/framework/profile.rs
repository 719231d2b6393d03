//! Cost profiles: what a framework (and version era) overlaps and fuses, the part of a run's
//! cost that is the framework's and not the plan's (issue 17 item 4). One home for each such
//! rule; the evaluator turns a profile into its options (`autoplan_evaluate::EvalOptions::
//! with_profile`), `evaluate`/`search` take it from `--framework` ([`Framework::profile`]), and
//! `validate` maps each published row to the profile of the stack it ran (a rule on its
//! source, `autoplan_evaluate::validate`).
//!
//! A profile holds mechanisms, and at most one fitted number: `unpriced_compute`, the compute
//! its runs spend beyond the kernels it prices, fitted (`validate --fit-framework`) only for a
//! profile that names what it does not price (`not_modelled`) and whose rows all run slower
//! than priced; every other profile's is 0, and the efficiency constants stay one set per GPU
//! architecture (`autoplan_cost::compute::ARCH_TABLE`), fitted on the rows of profiles that
//! name nothing missing (docs/decisions.md, "A fitted constant per framework").

use serde::Serialize;

use super::Framework;

/// Which of a block's elementwise ops a framework runs as kernels of their own (eager
/// PyTorch), where Megatron-Core runs one fused kernel per chain. The evaluator prices the
/// fused kernels' traffic for every profile (the elementwise term of `autoplan_evaluate`'s
/// compute); each op set here adds the HBM bytes of the intermediate tensors its separate
/// kernels write and read back, from the model's shapes
/// (`autoplan_evaluate::unfused_elementwise_bytes`). Ops that are one kernel either way
/// (LayerNorm, an ungated GELU/ReLU, a residual add without dropout, a bias inside the GEMM's
/// epilogue) have no flag: eager and fused move the same bytes.
///
/// The fused kernels, Megatron-Core @ 0.19.2: `bias_swiglu` (fusions/fused_bias_swiglu.py:L16-70),
/// `bias_dropout_add_fused_train` (fusions/fused_bias_dropout.py:L11-75), the fused RoPE
/// (`apply_rope_fusion`), Transformer Engine's RMSNorm; Megatron-LM turns each on by default
/// (megatron/training/arguments.py:L2755-2767, `--no-bias-swiglu-fusion`, `--no-bias-dropout-
/// fusion`, `--no-rope-fusion` store false).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elementwise {
    /// RMSNorm as PyTorch's composite `rms_norm` (upcast to fp32, `pow`, `mean`, `rsqrt`,
    /// multiply, downcast, times the weight: six kernels over the activation), as torchtitan's
    /// `nn.RMSNorm` and llm-foundry's `LPRMSNorm` (layers/norm.py @ 0.22.0:L71-100) call it.
    pub rmsnorm: bool,
    /// RoPE as torchtitan's `apply_rotary_emb` (models/llama3/model/model.py @ 0.1.0:L90-95):
    /// Q and K upcast to fp32, multiplied as complex numbers, cast back.
    pub rope: bool,
    /// A gated MLP's activation as `act(gate) * up`, two kernels (torchtitan's
    /// `F.silu(w1(x)) * w3(x)`, model.py @ 0.1.0:L236-237; llm-foundry's `MPTGLU`,
    /// layers/ffn.py @ 0.22.0:L215-218).
    pub gated_act: bool,
    /// Dropout a kernel of its own before the residual add (`x + dropout(b)`: llm-foundry's
    /// MPT block, layers/blocks.py @ 0.22.0:L216, L224-227).
    pub dropout: bool,
}

impl Elementwise {
    /// Every chain fused (Megatron-Core, Megatron-LM's jit/apex fusions, torch.compile).
    pub const FUSED: Elementwise = Elementwise {
        rmsnorm: false,
        rope: false,
        gated_act: false,
        dropout: false,
    };
    /// Every op its own kernel: eager PyTorch on the Llama reference code (torchtitan
    /// without `compile`).
    pub const EAGER: Elementwise = Elementwise {
        rmsnorm: true,
        rope: true,
        gated_act: true,
        dropout: true,
    };

    /// No op runs unfused: the profile prices the fused kernels only.
    pub fn is_fused(&self) -> bool {
        *self == Elementwise::FUSED
    }
}

/// The attention core's kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AttentionKernel {
    /// One fused kernel, no `s×s` scores in HBM, the fastest the GPU's vendor stack runs: cuDNN's
    /// (Transformer Engine's fused attention, SDPA's cuDNN backend; FlashAttention-3's class)
    /// on Hopper and Blackwell, FlashAttention-2 on Ampere and Ada (`autoplan_cost::compute`'s
    /// `attn_rate`).
    Flash,
    /// FlashAttention-2's kernels (Dao 2023) whatever the GPU: sm80 code, which on Hopper runs
    /// at about half cuDNN's forward rate (`autoplan_cost::compute::ArchEfficiency::fa2_rate`).
    /// What PyTorch's SDPA picks first where no framework orders its backends: its default
    /// order is flash, memory-efficient, math, cuDNN (`ATen/Context.h` @ torch 2.6.0
    /// L391-395), and only torch 2.5.0 and 2.9 onward move cuDNN ahead of it on their own
    /// (docs/frameworks.md, "Attention kernels").
    FlashAttention2,
    /// The `s×s` scores computed, masked, soft-maxed and stored by separate kernels (Megatron
    /// before 2023).
    Unfused,
}

impl AttentionKernel {
    /// One fused kernel, nothing `s×s` stored.
    pub fn is_fused(self) -> bool {
        self != AttentionKernel::Unfused
    }
}

/// The cost mechanisms of one framework version era.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostProfile {
    /// Short name (`validate`'s per-framework summary, docs/frameworks.md).
    pub name: &'static str,
    /// The DP gradient reduction (all-reduce, or the distributed optimizer's reduce-scatter)
    /// runs bucketed during the backward pass, and ZeRO-1's parameter all-gather during the
    /// forward. `false`: after the backward pass, on the critical path. FSDP / ZeRO-3
    /// prefetching is priced on its own (`zero.rs`: it overlaps in every framework that runs
    /// it), so this flag only reaches stages 0–2.
    pub dp_overlap: bool,
    /// With pp > 1, the once-per-step reduction (stages 0–1) still overlaps the last
    /// micro-batch's backward as `dp_overlap` says. `false`: it starts when the pipeline
    /// schedule's step has ended, on the critical path — PyTorch's pipelining, which reduces
    /// an FSDP stage in `perform_reduce_grad` after the last backward
    /// (`torch/distributed/pipelining/stage.py` @ torch 2.15.0:L1416-1447,
    /// `schedules.py` L1377, L1613).
    pub dp_overlap_with_pp: bool,
    /// The runs overlapped the TP collectives with the GEMMs (Megatron-Core's
    /// `--tp-comm-overlap` through Transformer Engine's userbuffers, torchtitan's async TP).
    /// What a published row of the profile is evaluated with; what a framework *can* run is
    /// its capability table (`Capabilities::tp_overlap`).
    pub tp_comm_overlap: bool,
    /// The plan's TP overlap (`tp_overlap`) hides the TP collectives behind the GEMMs of their
    /// pass, chunk by chunk, as Transformer Engine's userbuffers pipeline them
    /// (`autoplan_evaluate`'s `Hide::Tiled`). `false`: the framework's overlap is not credited
    /// (torchtitan's AsyncTP: its one published pair, Llama 3 70B on 256 H100 with and without
    /// it, gained 5.7% where the tiled pricing gives 32%; docs/validation.md), so a search
    /// never ranks a plan on a hiding the framework has not shown.
    pub tp_overlap_hides: bool,
    /// Without the tiled TP overlap, a column-parallel linear's backward launches its input
    /// gradient's TP collective (the `f` all-reduce, or sequence parallelism's reduce-scatter)
    /// asynchronously and computes its weight gradient meanwhile, waiting only after it:
    /// Megatron's `LinearWithGradAccumulationAndAsyncCommunication` (megatron-core 0.1.0,
    /// 2023-05, `tensor_parallel/layers.py` L286-327, `async_tensor_model_parallel_allreduce`
    /// on by default L442-454; megatron-core 0.19.2 L609-660) and Transformer Engine's
    /// column-parallel backward alike (`module/layernorm_linear.py` @ transformer-engine 2.9.0
    /// L742-753: `reduce_scatter_along_first_dim` or `allreduce` with `async_op=True`, waited
    /// on after the wgrad GEMM, L941-943). The collective hides behind that GEMM (the
    /// class's `gemm_in`); the row-parallel output gradient's all-gather stays exposed.
    /// `false`: the input gradient is reduced synchronously (Megatron-LM's
    /// `copy_to_tensor_model_parallel_region` of 2020-21), or the framework's TP has no such
    /// path (torchtitan's DTensor collectives).
    pub tp_bwd_async: bool,
    /// ZeRO-1/2 gradients are reduced by an all-reduce of each bucket, each rank keeping its
    /// slice, not a reduce-scatter: DeepSpeed's `average_tensor` with its default
    /// `use_multi_rank_bucket_allreduce` (stage_1_and_2.py @ v0.19.5:L1288-1443; frameworks.md
    /// §3.5), twice a reduce-scatter's bytes.
    pub zero_grad_all_reduce: bool,
    /// The DP reduction casts the gradients to the 16-bit training dtype before it runs,
    /// whatever dtype they accumulate in: DeepSpeed's `communication_data_type`, which
    /// defaults to `bfloat16` under `bf16` and `float16` under `fp16` (`deepspeed/runtime/
    /// engine.py` @ v0.6.5 L733-742, the same at v0.9.5, v0.12.6 and v0.16.9 L962-973), the
    /// cast in `allreduce_bucket` (engine.py @ v0.16.9 L2547-2553: the BF16 optimizer's and the
    /// pipeline engine's FP32 gradients, `pipe/engine.py` @ v0.6.5 L257-275) and in ZeRO's own
    /// reductions (`zero/stage_1_and_2.py` L1503-1516, `zero/stage3.py` L1333). `false`: in
    /// the gradient buffer's dtype (Megatron's FP32 main gradients under `--bf16`, FSDP's
    /// `reduce_dtype`). The tied embedding's all-reduce is not cast (DeepSpeed's pipeline
    /// all-reduces `weight._hp_grad` as it is, `pipe/engine.py` @ v0.16.9 L287-291).
    pub reduce_in_training_dtype: bool,
    /// The parameters stay fp32 and are cast to 16 bits where they are used (PyTorch's FSDP1,
    /// FSDP2 and autocast mixed precision: torchtitan builds its model in fp32 and shards it
    /// under `MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)`,
    /// `torchtitan/train.py` @ 0.1.0 L149-150, L257, `models/llama3/infra/parallelize.py`
    /// L339, `config_manager.py` L221-229; Composer's FSDP casts only the gathered copy,
    /// `mosaic_parallelism.py::get_mixed_precision` @ mosaicml 0.28.0 L78-85): the memory
    /// model's `MemoryOptions::fp32_params` layout, 16 bytes a parameter under Adam with
    /// nothing kept in 16 bits. `false`: 16-bit parameters beside an fp32 master copy in the
    /// optimizer (Megatron's distributed optimizer, DeepSpeed's BF16 optimizer and ZeRO).
    pub fp32_params: bool,
    /// The attention core's kernel ([`AttentionKernel`]).
    pub attention: AttentionKernel,
    /// The MoE layer dispatches and combines its tokens with GShard's dense one-hot einsums
    /// (DeepSpeed-MoE's `MOELayer` up to v0.19.3: `einsum("sec,sm->ecm", dispatch_mask, x)` and
    /// `einsum("sec,ecm->sm", combine_weights, expert_out)`, `deepspeed/moe/sharded_moe.py @
    /// v0.9.2:L495,L541`), GEMMs of `2·S·(E·C)·h` FLOPs over the `S × E × C` masks
    /// (`autoplan_evaluate`'s MoE work table, `core/moe.rs`); `false`: a gather by index
    /// (Megatron-Core's permutation, DeepSpeed's `_sparse_encode` from v0.19.4).
    pub moe_dense_dispatch: bool,
    /// Which elementwise ops run as separate kernels ([`Elementwise`]).
    pub elementwise: Elementwise,
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
    /// Compute time the framework's runs spend beyond what the profile's kernels price, as a
    /// fraction of the priced compute (every class's forward, backward and recompute): the one
    /// fitted number a profile may carry (issue 17 item 4: "one set per framework ...
    /// documented with the fit command"). 0 where the profile names nothing it misses
    /// (`not_modelled` empty: the GPU's constants are fitted on its rows); otherwise the
    /// minimum-MAPE point of `autoplan validate --fit-framework NAME` over the profile's
    /// published rows, with the GPU's constants fixed (docs/calibration.md, "Frameworks"). It
    /// stands for what `not_modelled` names until a trace prices it, and is replaced by the
    /// mechanism then.
    pub unpriced_compute: f64,
    /// Seconds of host time per local expert GEMM of a dropless MoE layer beyond the GPU's own
    /// per-GEMM latency: Transformer Engine's `GroupedLinear` (Megatron-Core's `TEGroupedMLP`)
    /// issues one cuBLAS GEMM per local expert from the host, after the dispatcher has copied
    /// the token counts to the host (the dropless dispatchers' device-to-host sync), so the
    /// host cannot run ahead and the GPU waits for each expert's launch. Measured in plain
    /// PyTorch: one Qwen3-235B MoE layer of 16 local experts waits 2.49 ms on the host forward
    /// and backward when launched eagerly against graph-replayed (`results/h100/qwen235_block.
    /// csv`), 26 µs for each of its 96 expert GEMMs. The profile's value is fitted
    /// (`autoplan validate --runs data/published_runs.csv --runs data/published_runs_2.csv
    /// --fit-framework megatron-core`, docs/calibration.md "Frameworks"); 0 where the
    /// framework's experts run as one grouped kernel (torchtitan's grouped MM, frameworks.md
    /// §2.5; MaxText's ragged matmuls, `sparse_matmul: true`) or no MoE run of it was fitted.
    pub expert_gemm_host: f64,
}

impl CostProfile {
    /// Megatron-Core as NVIDIA's recipes run it (NeMo, Megatron-Bridge, the MoE ModelZoo,
    /// MLPerf's NVIDIA submissions): `--overlap-grad-reduce --overlap-param-gather`,
    /// `--tp-comm-overlap`, Transformer Engine's fused attention.
    pub const MEGATRON_CORE: CostProfile = CostProfile {
        name: "megatron-core",
        dp_overlap: true,
        dp_overlap_with_pp: true,
        tp_comm_overlap: true,
        tp_overlap_hides: true,
        tp_bwd_async: true,
        zero_grad_all_reduce: false,
        reduce_in_training_dtype: false,
        fp32_params: false,
        attention: AttentionKernel::Flash,
        moe_dense_dispatch: false,
        activation_offload_overlap: true,
        elementwise: Elementwise::FUSED,
        source: "frameworks.md §1.3 (TP comm overlap), §1.4 (overlap-grad-reduce, \
                 overlap-param-gather with the distributed optimizer)",
        not_modelled: "",
        unpriced_compute: 0.0,
        // `autoplan validate --runs data/published_runs.csv --runs data/published_runs_2.csv
        // --fit-framework megatron-core`: 22.5 µs, MAPE 5.96% on its 44 rows against 7.26% at
        // 0, 5.96% with each row at the value fitted on the others (its `leave_one_out`); the
        // dropless MoE rows move, the ModelZoo's 16-local-expert Qwen3-235B row +23.2% -> -1.2%.
        // (20 µs, 6.11%, before DeepEP's per-rank deduplication was priced, `ep.rs`.)
        expert_gemm_host: 22.5e-6,
    };

    /// Megatron-LM v1 (2020; `meg20_` rows): its `LocalDDP` all-reduces the gradients after
    /// the backward pass; attention unfused (scale-mask-softmax kernel); no TP overlap.
    pub const MEGATRON_LM_2020: CostProfile = CostProfile {
        name: "megatron-lm-2020",
        dp_overlap: false,
        dp_overlap_with_pp: false,
        tp_comm_overlap: false,
        tp_overlap_hides: true,
        tp_bwd_async: false,
        zero_grad_all_reduce: false,
        reduce_in_training_dtype: false,
        fp32_params: false,
        attention: AttentionKernel::Unfused,
        moe_dense_dispatch: false,
        activation_offload_overlap: true,
        elementwise: Elementwise::FUSED,
        source: "Megatron-LM v1 README (2020) and Shoeybi+19 §3: LocalDDP reduces after \
                 backward; published_runs_SOURCES.md §2",
        not_modelled: "",
        unpriced_compute: 0.0,
        expert_gemm_host: 0.0,
    };

    /// Megatron-LM of 2021 (`nar21_`: Narayanan+21's runs): torch DDP buckets overlap the
    /// gradient all-reduce with the backward; unfused attention (FlashAttention came in 2023);
    /// no TP overlap, and the backward's `f` all-reduce priced synchronous (`tp_bwd_async`
    /// off): no source here dates the asynchronous linear before Korthikanti+22's sequence
    /// parallelism ([`Self::MEGATRON_LM_2022`]), and the A100 constants were fitted on these
    /// rows so (docs/calibration.md). A dated Megatron-LM of spring 2021 would settle it.
    pub const MEGATRON_LM_2021: CostProfile = CostProfile {
        name: "megatron-lm-2021",
        dp_overlap: true,
        dp_overlap_with_pp: true,
        tp_comm_overlap: false,
        tp_overlap_hides: true,
        tp_bwd_async: false,
        zero_grad_all_reduce: false,
        reduce_in_training_dtype: false,
        fp32_params: false,
        attention: AttentionKernel::Unfused,
        moe_dense_dispatch: false,
        activation_offload_overlap: true,
        elementwise: Elementwise::FUSED,
        source: "Narayanan+21 §4 (torch DDP); published_runs_SOURCES.md §2",
        not_modelled: "",
        unpriced_compute: 0.0,
        expert_gemm_host: 0.0,
    };

    /// Megatron-LM of 2022 (`kor22_`: Korthikanti+22's runs, sequence parallelism and selective
    /// recompute): as [`Self::MEGATRON_LM_2021`], with the column-parallel backward's input
    /// gradient collective asynchronous beside the weight-gradient GEMM (`tp_bwd_async`).
    /// Sequence parallelism exists only inside the asynchronous linear
    /// (`LinearWithGradAccumulationAndAsyncCommunication`: the backward's all-gather and
    /// reduce-scatter are its `sequence_parallel` branch, megatron-core 0.1.0
    /// `tensor_parallel/layers.py` L253-303), so Korthikanti+22's SP runs had it; its baseline
    /// rows (full recompute, no SP) ran the same code, whose other branch all-reduces the
    /// input gradient asynchronously (`async_tensor_model_parallel_allreduce`, on by default,
    /// L442-454, L509-511).
    pub const MEGATRON_LM_2022: CostProfile = CostProfile {
        name: "megatron-lm-2022",
        tp_bwd_async: true,
        source: "Korthikanti+22 §4 (TP collectives without overlap); megatron-core 0.1.0 \
                 tensor_parallel/layers.py L253-327, L442-454 (the asynchronous linear, the \
                 code SP shipped in); published_runs_SOURCES.md §3",
        ..CostProfile::MEGATRON_LM_2021
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
        dp_overlap_with_pp: false,
        tp_comm_overlap: false,
        tp_overlap_hides: true,
        tp_bwd_async: true,
        zero_grad_all_reduce: false,
        reduce_in_training_dtype: false,
        fp32_params: false,
        attention: AttentionKernel::Unfused,
        moe_dense_dispatch: false,
        activation_offload_overlap: true,
        elementwise: Elementwise::FUSED,
        source: "Megatron-LM argument defaults (frameworks.md §1.3, §1.4); MegaScale \
                 (Jiang+24) §3.2-3.3 names these as its additions to the baseline (the flags \
                 are the defaults at the commit, inferred: the run's arguments would settle \
                 them)",
        not_modelled: "",
        unpriced_compute: 0.0,
        expert_gemm_host: 0.0,
    };

    /// Megatron-DeepSpeed of 2021–22 (MT-NLG, BLOOM, GPT-NeoX): DeepSpeed reduces ZeRO-0/1
    /// gradients at the accumulation boundary, after the backward (`overlap_comm` resolves to
    /// false below stage 3; frameworks.md §3.3, §3.5); no TP overlap (frameworks.md §3, the
    /// capability table); attention unfused (Megatron's fused scale-mask-softmax of 2021). Its
    /// MoE layers are DeepSpeed-MoE's (`deepspeed.moe.layer.MoE`), which dispatched by einsum in
    /// those years (DeepSpeed ≤ v0.19.3).
    pub const MEGATRON_DEEPSPEED_2022: CostProfile = CostProfile {
        name: "megatron-deepspeed",
        dp_overlap: false,
        dp_overlap_with_pp: false,
        tp_comm_overlap: false,
        tp_overlap_hides: true,
        tp_bwd_async: false,
        zero_grad_all_reduce: true,
        reduce_in_training_dtype: true,
        fp32_params: false,
        attention: AttentionKernel::Unfused,
        moe_dense_dispatch: true,
        activation_offload_overlap: false,
        elementwise: Elementwise::FUSED,
        source: "deepspeed/runtime/zero/config.py overlap_comm default and stage_1_and_2.py \
                 (frameworks.md §3.3, §3.5); pre-FlashAttention Megatron kernels; \
                 deepspeed/moe/sharded_moe.py @ v0.9.2:L495,L541 (einsum dispatch/combine)",
        not_modelled: "DeepSpeed's activation checkpointing (which can partition the saved \
                       activations over TP and gather them before each recompute) and the \
                       Megatron-DeepSpeed forks' kernels are not priced: the rows run 16-37% \
                       slower per block and micro-batch than these kernels predict. Not its \
                       pipeline engine: DeepSpeed's TrainSchedule, simulated with blocking \
                       transfers (tools/deepspeed_pipe.py), takes 1F1B's compute time, and its \
                       partitioned activations (1/tp per send) more than offset its serial \
                       send/recv (BLOOM 2.8 s, MT-NLG 0.8 s, against the 5.0 s and 1.8 s \
                       priced). Until an Nsight Systems trace of one pipeline stage of a \
                       Megatron-DeepSpeed step on A100 prices it, it is the profile's \
                       `unpriced_compute`",
        // `autoplan validate --runs data/published_runs.csv --runs data/published_runs_2.csv
        // --fit-framework megatron-deepspeed`: BLOOM, MT-NLG and GPT-NeoX (three models, three
        // sources, 2021-22), MAPE 26.0% at 0 and 4.4% at 0.28 (0.27 before the BF16 runs'
        // gradients were reduced in BF16, `reduce_in_training_dtype`); each row at the value
        // fitted on the other two: -11.0%, -6.9%, +8.4%.
        unpriced_compute: 0.28,
        expert_gemm_host: 0.0,
    };

    /// DeepSpeed 0.19.5 (`--framework deepspeed`): gradient reduction after the backward below
    /// stage 3 (`overlap_comm` default, frameworks.md §3.3); the attention kernel is the
    /// model code's (fused, as every current model code has it). Its MoE layer gathers the
    /// routed rows by index (`_sparse_encode`/`_sparse_decode`, new in v0.19.4, replacing the
    /// einsums: `deepspeed/moe/sharded_moe.py @ v0.19.5:L207-232`).
    pub const DEEPSPEED: CostProfile = CostProfile {
        name: "deepspeed",
        dp_overlap: false,
        dp_overlap_with_pp: false,
        tp_comm_overlap: false,
        tp_overlap_hides: true,
        tp_bwd_async: false,
        zero_grad_all_reduce: true,
        reduce_in_training_dtype: true,
        fp32_params: false,
        attention: AttentionKernel::Flash,
        moe_dense_dispatch: false,
        activation_offload_overlap: false,
        elementwise: Elementwise::FUSED,
        source: "deepspeed/runtime/zero/config.py @ v0.19.5:L382-386 (frameworks.md §3.3); \
                 deepspeed/moe/sharded_moe.py @ v0.19.5:L207-232 (MoE gather by index)",
        not_modelled:
            "DeepSpeed's pipeline engine is priced as Megatron's 1F1B: its TrainSchedule takes \
                       the same compute time on equal stages (tools/deepspeed_pipe.py) but exposes \
                       four transfers per micro-batch to Megatron's two, each of 1/tp of the \
                       activation (pipe_partitioned, frameworks.md §3.4) and a TP all-gather; a \
                       trace of one pipeline stage would settle it",
        unpriced_compute: 0.0,
        expert_gemm_host: 0.0,
    };

    /// DeepSpeed-MoE before v0.19.4 (seed 004's baseline, and its design built on it, §4.2.2):
    /// the engine as [`CostProfile::DEEPSPEED`] (ZeRO-0/1/2 reduction after the backward), the
    /// MoE layer's GShard dispatch and combine by dense one-hot einsums (`MOELayer.forward`,
    /// `deepspeed/moe/sharded_moe.py @ v0.9.2:L495,L541`; unchanged through v0.19.3). The
    /// attention kernel is the model code's, as in [`CostProfile::DEEPSPEED`].
    pub const DEEPSPEED_MOE_2023: CostProfile = CostProfile {
        name: "deepspeed-moe-2023",
        moe_dense_dispatch: true,
        source: "deepspeed/runtime/zero/config.py (frameworks.md §3.3); \
                 deepspeed/moe/sharded_moe.py @ v0.9.2:L495,L541 (einsum dispatch/combine, \
                 through v0.19.3)",
        not_modelled: "DeepSpeed-MoE's gate copies the experts' token counts to the host in \
                       every layer's forward (`exp_counts ... .to('cpu')`, sharded_moe.py @ \
                       v0.9.2:L206), a stream sync not priced; a trace of one MoE layer would \
                       settle it",
        unpriced_compute: 0.0,
        ..CostProfile::DEEPSPEED
    };

    /// torchtitan (FSDP2) with `compile`: FSDP2 prefetches the next unit's all-gather and
    /// overlaps the reduce-scatter with the backward (`fully_shard`, frameworks.md §3.6);
    /// SDPA's fused kernels; TP overlap only as async TP, which is not credited
    /// (`tp_overlap_hides`). Inductor fuses
    /// each elementwise chain (norm, RoPE, the gated activation, the residual add) into one
    /// generated kernel that reads its inputs and writes its outputs once — what is left
    /// between the GEMMs and the attention kernel is the fused kernels' traffic, priced as
    /// Megatron-Core's (Inductor can also fold the residual add into the next norm, a saving
    /// not credited).
    pub const TORCHTITAN: CostProfile = CostProfile {
        name: "torchtitan",
        dp_overlap: true,
        // PyTorch's pipelining reduces after the schedule's last backward.
        dp_overlap_with_pp: false,
        tp_comm_overlap: false,
        // AsyncTP's hiding is not measured (the field's docs).
        tp_overlap_hides: false,
        tp_bwd_async: false,
        zero_grad_all_reduce: false,
        reduce_in_training_dtype: false,
        fp32_params: true,
        attention: AttentionKernel::Flash,
        moe_dense_dispatch: false,
        activation_offload_overlap: false,
        elementwise: Elementwise::FUSED,
        source: "frameworks.md §2.1 (enable_async_tensor_parallel off by default), §2.4 \
                 (compile), §3.6 (FSDP2)",
        not_modelled: "Float8's scaling kernels under FSDP2, PyTorch's \
                       experimental context-parallel SDPA (all-gather rotation by default, \
                       frameworks.md §2.1), what AsyncTP hides (credited nothing) and the 500 W \
                       power cap of the 96 GB H100s are not modelled; a trace of one step at 32K \
                       (cp 1) and 256K (cp 8), one with and without AsyncTP, and the GEMM rate \
                       under the 500 W cap, would settle them",
        unpriced_compute: 0.0,
        expert_gemm_host: 0.0,
    };

    /// torchtitan without `compile` (its default, `[compile] enable = false`, frameworks.md
    /// §2.4): as [`CostProfile::TORCHTITAN`], with the Llama model code's elementwise ops run
    /// eagerly, each its own kernel ([`Elementwise::EAGER`]: composite RMSNorm, fp32 complex
    /// RoPE, `silu(w1 x) * w3 x`).
    pub const TORCHTITAN_EAGER: CostProfile = CostProfile {
        name: "torchtitan-eager",
        elementwise: Elementwise::EAGER,
        source: "frameworks.md §2.4 (compile off by default), §3.6 (FSDP2); torchtitan \
                 models/llama3/model/model.py @ 0.1.0:L90-95, L236-237, L276-277",
        not_modelled: "repeat_kv's copies of K and V for grouped-query attention, the \
                       attention output's transpose copy, and the 500 W power cap of the 96 GB \
                       H100s are not priced; a trace of one eager step would settle them",
        unpriced_compute: 0.0,
        ..CostProfile::TORCHTITAN
    };

    /// llm-foundry / Composer (PyTorch FSDP1, `FULL_SHARD`, `BACKWARD_PRE` prefetch, Flash
    /// Attention): overlapped as FSDP2; no tensor parallelism. Its attention is `flash-attn`'s
    /// kernel (`attn_impl: flash`) or its own triton port (`triton`, 0.3.0's default), which of
    /// the two the runs used not recorded: neither is Hopper's own kernel, and
    /// FlashAttention-2's (`AttentionKernel::FlashAttention2`) is the one measured. The model code runs eagerly:
    /// `low_precision_layernorm` (its default norm, configuration_mpt.py @ 0.22.0:L47) is one
    /// bf16 `layer_norm` kernel (layers/norm.py:L34-68) and an ungated GELU one kernel, as
    /// fused; `LPRMSNorm` calls PyTorch's composite `rms_norm`, `MPTGLU` runs `act(gate) * up`
    /// as two kernels, dropout precedes the residual add as a kernel of its own; RoPE (`dail`,
    /// its default) is flash-attn's fused rotary kernel.
    pub const LLM_FOUNDRY: CostProfile = CostProfile {
        name: "llm-foundry",
        dp_overlap: true,
        dp_overlap_with_pp: true,
        tp_comm_overlap: false,
        tp_overlap_hides: true,
        tp_bwd_async: false,
        zero_grad_all_reduce: false,
        reduce_in_training_dtype: false,
        fp32_params: true,
        attention: AttentionKernel::FlashAttention2,
        moe_dense_dispatch: false,
        activation_offload_overlap: false,
        elementwise: Elementwise {
            rmsnorm: true,
            rope: false,
            gated_act: true,
            dropout: true,
        },
        source: "llm-foundry benchmarking README (FSDP FULL_SHARD, Flash Attention: \
                 FlashAttention-2's kernels, docs/frameworks.md \"Attention kernels\"); \
                 frameworks.md §3.6; llmfoundry/models @ 0.22.0 (layers/norm.py, ffn.py, \
                 blocks.py; mpt/configuration_mpt.py)",
        not_modelled: "MPT's block (LayerNorm, ungated GELU, ALiBi, no dropout) runs no \
                       elementwise kernel beyond the fused ones, so eager PyTorch adds nothing \
                       there. Not priced: flash_attn_fn's unpad/pad copies of Q, K, V and the \
                       output (attention.py @ 0.22.0:L328-344, L438-443; 0.3.0 defaulted to \
                       the triton kernel, which has none: which one the runs used is not \
                       recorded), the fp32 residual stream and casts of amp_bf16 with fp32 \
                       FSDP parameters, and FSDP1's host-side issue of each unit's all-gather \
                       (limit_all_gathers). Until a trace of one MPT-7B step on 512 H100s \
                       splits it, it is the profile's `unpriced_compute`",
        // `autoplan validate --runs data/published_runs.csv --runs data/published_runs_2.csv
        // --fit-framework llm-foundry`: MPT-70B on 512 H100 and on 64 A100, MPT-7B on 512
        // H100, MAPE 13.6% at 0 and 4.4% at 0.09; each row at the value fitted on the other
        // two: -10.8%, +12.6%, -10.4% (weakly determined: one source, MPT-7B 1.23x slower
        // per block than priced where the 70B runs are 1.09x). Before the attention was
        // priced as FlashAttention-2's kernels: 16.8% at 0, 6.0% at 0.12, -13.2%, +16.5%,
        // -15.3%.
        unpriced_compute: 0.09,
        expert_gemm_host: 0.0,
    };

    /// MaxText (JAX, XLA's GPU compiler; maxtext 0.2.5, `pip download --no-deps
    /// --python-version 3.12 --only-binary :all: maxtext==0.2.5`). What its GPU configurations
    /// run, read in the wheel's `maxtext/configs`:
    /// - weights stored in fp32 and cast to the 16-bit compute dtype where used
    ///   (`base.yml` L194 `weight_dtype: "float32"`, L128 `dtype: "bfloat16"`), gradients in
    ///   fp32 (L125 `grad_dtype: "float32"`): PyTorch's parameter layout, the reduction in fp32;
    /// - the fused attention kernel: every GPU model configuration sets `attention:
    ///   "cudnn_flash_te"` (`configs/gpu/models/*.yml`; Transformer Engine's cuDNN kernel);
    /// - elementwise chains fused: XLA's instruction fusion, which no GPU script disables
    ///   (`configs/gpu/a3/llama_2_7b/*.sh` disable only Triton GEMMs, command buffers and the
    ///   rematerialization pass);
    /// - the sharded collectives asynchronous beside the compute: every A3 script runs XLA's
    ///   latency-hiding scheduler with pipelined all-gathers, reduce-scatters and all-reduces
    ///   (`--xla_gpu_enable_latency_hiding_scheduler=true`, `--xla_gpu_pipeline_all_gather=on`,
    ///   `..._reduce_scatter=on`, `..._all_reduce=on`);
    /// - no TP-comm overlap (no collective-matmul flag in any GPU script);
    /// - dropless MoE by ragged matmuls over the sorted tokens (`base.yml` L250 `sparse_matmul:
    ///   true`): a gather by index.
    pub const MAXTEXT: CostProfile = CostProfile {
        name: "maxtext",
        dp_overlap: true,
        dp_overlap_with_pp: true,
        tp_comm_overlap: false,
        tp_overlap_hides: false,
        tp_bwd_async: false,
        zero_grad_all_reduce: false,
        reduce_in_training_dtype: false,
        fp32_params: true,
        attention: AttentionKernel::Flash,
        moe_dense_dispatch: false,
        activation_offload_overlap: false,
        elementwise: Elementwise::FUSED,
        source: "maxtext 0.2.5 configs/base.yml (weight_dtype, grad_dtype, sparse_matmul, \
                 remat_policy, ici_fsdp/dcn_data parallelism), configs/gpu/models/*.yml \
                 (cudnn_flash_te), configs/gpu/a3/llama_2_7b/*.sh (XLA flags)",
        not_modelled: "the network of Google Cloud's A3 VMs, which neither MaxText's tables \
                       nor the reference notes give, and how much of the gradient all-reduce \
                       across VMs XLA leaves after the backward (the A3 scripts combine \
                       all-reduces up to 128 MiB, 1 GiB at 16 VMs); a profile of one step (the \
                       scripts' `profiler=xplane`) on 2 VMs would settle both",
        unpriced_compute: 0.0,
        expert_gemm_host: 0.0,
    };

    /// Every profile, for listings and tests.
    pub const ALL: [CostProfile; 12] = [
        CostProfile::MEGATRON_CORE,
        CostProfile::MEGATRON_LM_2020,
        CostProfile::MEGATRON_LM_2021,
        CostProfile::MEGATRON_LM_2022,
        CostProfile::MEGATRON_LM_2023,
        CostProfile::MEGATRON_DEEPSPEED_2022,
        CostProfile::DEEPSPEED,
        CostProfile::DEEPSPEED_MOE_2023,
        CostProfile::TORCHTITAN,
        CostProfile::TORCHTITAN_EAGER,
        CostProfile::LLM_FOUNDRY,
        CostProfile::MAXTEXT,
    ];
}

impl CostProfile {
    /// This profile with its attention core run by kernel `k` (a release of the framework whose
    /// attention differs, or a run naming its kernel; the profile keeps its name).
    pub const fn with_attention(self, k: AttentionKernel) -> CostProfile {
        CostProfile {
            attention: k,
            ..self
        }
    }

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
