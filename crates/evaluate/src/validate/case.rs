//! A row's plan, evaluation options and measured figure (the framework defaults of its source
//! fill blank cells).

use super::*;
use autoplan_plan::framework::CostProfile;

/// The recompute a blank `recompute` cell means in `era`, where the era has one (`None`: it
/// has none, and the row's recompute is not known: `unstated_recompute`).
/// - Megatron-LM 2020–22 and Megatron-DeepSpeed: full. The 2020 README's TFLOP/s reproduce
///   exactly with the recompute-inclusive formula (published_runs_SOURCES.md §2): those runs
///   used --checkpoint-activations. So do Megatron-DeepSpeed's of 2021–22 (MT-NLG's TFLOP/s
///   reproduce only with the recompute-inclusive formula, published_runs_2_SOURCES.md
///   `mtnlg_530b_*`; BLOOM and GPT-NeoX name it).
/// - torchtitan: its `[activation_checkpoint] mode` default, "selective" (frameworks.md §2.3,
///   `job_config.py @ v0.2.2:L650-717`), read as the cell "selective" is.
/// - MaxText: `remat_policy: 'full'` (`configs/base.yml` @ maxtext 0.2.5 L450).
pub(super) fn era_recompute(era: Era) -> Option<Recompute> {
    match era {
        Era::Megatron2021 | Era::MegatronDeepSpeed | Era::MaxText => Some(Recompute::Full),
        Era::Torchtitan => Some(Recompute::Selective),
        Era::MegatronCore | Era::Fsdp => None,
    }
}

/// A blank `cp` where the row gives tp, pp and dp and they leave GPUs over: the context
/// parallelism the GPU count leaves (tp·pp·dp·cp = GPUs; expert parallelism takes no GPUs of its
/// own, it folds into these), as a blank tp, pp or dp is; `None` where nothing is left over or
/// the rest does not divide. `--explain` names the choice ([`unstated_cp_note`]).
pub(super) fn unstated_cp(r: &PublishedRun) -> Option<u32> {
    if r.cp.is_some() {
        return None;
    }
    // The sp cell's own degree, where the degrees given leave room for it.
    let fits = |n: u32| match (r.tp, r.pp, r.dp) {
        (Some(t), Some(p), Some(d)) => {
            u64::from(t) * u64::from(p) * u64::from(d) * u64::from(n) == u64::from(r.num_gpus)
        }
        _ => true,
    };
    if let Some(n) = sequence_degree(r).filter(|&n| Some(n) != r.tp && fits(n)) {
        return Some(n);
    }
    let used = u64::from(r.tp?) * u64::from(r.pp?) * u64::from(r.dp?);
    let n = u64::from(r.num_gpus);
    (used > 0 && n > used && n.is_multiple_of(used))
        .then(|| u32::try_from(n / used).ok())
        .flatten()
}

/// A degree in the `sp` cell, its first word (`8`, `8 (Ulysses)`; 1 is "on", a flag).
/// Megatron's sequence parallelism has none of its own (it splits the TP group's activations),
/// so a degree equal to tp is that; any other is a sequence-split group of its own —
/// DeepSpeed-Ulysses' sequence parallelism (Jacobs+23), Megatron's context parallelism — which
/// [`unstated_cp`] reads as cp where the cp cell is blank.
fn sequence_degree(r: &PublishedRun) -> Option<u32> {
    r.sp.as_deref()?
        .split(|c: char| !c.is_ascii_alphanumeric())
        .find(|w| !w.is_empty())?
        .parse::<u32>()
        .ok()
        .filter(|&n| n > 1)
}

/// What `--explain` says of an [`unstated_cp`] reading.
pub(super) fn unstated_cp_note(r: &PublishedRun) -> Option<String> {
    unstated_cp(r).map(|cp| {
        if sequence_degree(r) == Some(cp) {
            format!("cp {cp}: the row's sp cell gives a sequence-parallel degree of {cp}, not tp's")
        } else {
            format!(
                "cp {cp}: the row leaves cp blank and its tp·pp·dp uses {} of its {} GPUs",
                r.num_gpus / cp,
                r.num_gpus
            )
        }
    })
}

/// The plan row `r` ran (era defaults where the row is blank), or why it cannot be priced.
pub(super) fn case_plan(
    r: &PublishedRun,
    era: Era,
    profile: &autoplan_plan::framework::CostProfile,
    model: &ModelSpec,
) -> Result<Plan, Skipped> {
    let torchtitan = era == Era::Torchtitan;
    let cp = r.cp.or_else(|| unstated_cp(r)).unwrap_or(1);
    // One blank degree of tp, pp, dp with the other two given is what the GPU count leaves
    // (tp·pp·dp·cp = GPUs; "TP 1, PP 16" on 2048 GPUs is DP 128). A blank read as 1 would give
    // a plan of the wrong size, which the evaluator rejects; any other blank is 1.
    let left = |a: Option<u32>, b: Option<u32>| {
        let used = u64::from(a?) * u64::from(b?) * u64::from(cp);
        let n = u64::from(r.num_gpus);
        (used > 0 && n.is_multiple_of(used))
            .then(|| u32::try_from(n / used).ok())
            .flatten()
    };
    let tp = r.tp.or_else(|| left(r.pp, r.dp)).unwrap_or(1);
    let pp = r.pp.or_else(|| left(r.tp, r.dp)).unwrap_or(1);
    let dp = r.dp.or_else(|| left(r.tp, r.pp)).unwrap_or(1);
    let vpp = r.vpp.unwrap_or(1).max(1);
    // The `sp` cell's first word: yes/true/on/…, or naming sequence parallelism; no/false/off/…;
    // "(only) with TP": on with TP; blank, `-` or `n/a`, the era's default; other wording is
    // refused, not defaulted.
    let sp_cell = r.sp.as_deref().unwrap_or("").trim().to_ascii_lowercase();
    let first = match sp_cell.as_str() {
        "n/a" | "-" | "?" => "",
        c => c
            .split(|c: char| !c.is_ascii_alphanumeric())
            .find(|w| !w.is_empty())
            .unwrap_or(""),
    };
    // A degree (`sequence_degree`): tp's is Megatron's SP; the cp group's is that group (its
    // exchange is `cp_comm`'s), not Megatron's SP.
    let degree = sequence_degree(r);
    let sp = match first {
        _ if degree == Some(tp) => true,
        _ if degree == Some(cp) => false,
        _ if degree.is_some() => {
            return Err(unreadable(
                &r.id,
                "sp",
                format!("sp `{first}`: a degree neither tp's ({tp}) nor cp's ({cp})"),
            ))
        }
        "yes" | "y" | "true" | "on" | "enabled" | "1" | "sp" | "sequence" => true,
        "no" | "n" | "false" | "off" | "disabled" | "0" | "without" => false,
        // "only with TP", "with TP": Megatron's SP splits the TP group's activations, so on
        // wherever there is a TP group.
        "only" | "with" => tp > 1,
        // Megatron-Core era defaults: sequence parallelism on whenever tp > 1 (NeMo's and
        // Megatron-Bridge's recipes set it). Megatron's own `sequence_parallel` defaults off
        // (`ModelParallelConfig`, mpc.py:L94, frameworks.md §1.3; `--sequence-parallel` is a
        // flag to pass), in Megatron-LM 2021–22 and the Megatron-DeepSpeed forks alike.
        // MaxText splits activations over its own `tensor_sequence` axis, default 1
        // (`ici_tensor_sequence_parallelism`, `configs/base.yml` @ maxtext 0.2.5 L790).
        "" | "na" | "unknown" => {
            !matches!(
                era,
                Era::Megatron2021 | Era::MegatronDeepSpeed | Era::MaxText
            ) && tp > 1
        }
        _ => {
            let cell = r.sp.as_deref().unwrap_or("").trim();
            return Err(unreadable(
                &r.id,
                "sp",
                format!("sp `{cell}`: not yes, no, or blank"),
            ));
        }
    };
    // A replica's share of the global batch.
    let local = (model.training.global_batch / dp.max(1)).max(1);
    let mbs = match (r.micro_batch, era) {
        (Some(m), _) => m,
        // Megatron v1 (2020) ran one micro-batch per replica: the local batch. The later
        // Megatron-LM of the era splits it (`unstated_micro_batch` chooses; 1 until then).
        (None, Era::Megatron2021) if *profile == CostProfile::MEGATRON_LM_2020 => {
            model.training.global_batch / dp.max(1)
        }
        // torchtitan runs its per-device `local_batch_size` as one forward without pipelining,
        // and its default `global_batch_size` (−1) is local × DP, i.e. no gradient
        // accumulation (`job_config.py @ v0.2.2`, frameworks.md §2.2): the micro-batch is
        // the local batch. With pipelining the micro-batch is `pipeline_parallel_microbatch_size`,
        // default 1 (§2.1).
        (None, Era::Torchtitan) if pp == 1 => local,
        // MaxText's `per_device_batch_size` runs whole, without gradient accumulation
        // (`configs/base.yml` @ maxtext 0.2.5 L1098 `gradient_accumulation_steps: 1`); its
        // pipeline splits the batch into `num_pipeline_microbatches`, by default the number
        // of stages (L417-419).
        (None, Era::MaxText) if local.is_multiple_of(pp) => local / pp,
        // Megatron-Core scaling runs: micro-batch 1.
        (None, _) => 1,
    };
    let rc = r.recompute.as_deref().unwrap_or("").to_ascii_lowercase();
    let modules = remat::remat_modules(&rc, model)
        .unwrap_or_else(|| recompute_modules(&rc, r.notes.as_deref().unwrap_or("")));
    let (recompute, recompute_layers) = match recompute_cell(&rc) {
        Err(why) => return Err(unreadable(&r.id, "recompute", why)),
        Ok(Some(cell)) => cell,
        Ok(None) => (era_recompute(era).unwrap_or(Recompute::None), None),
    };
    // torchtitan's selective checkpointing wraps whole blocks in full checkpointing.
    let (recompute, recompute_layers) = if torchtitan && recompute == Recompute::Selective {
        let chunk = model.layers / (pp * vpp).max(1);
        (Recompute::Full, Some(torchtitan_every_nth(r, &rc, chunk)?))
    } else {
        (recompute, recompute_layers)
    };
    // The row's sharding wording (`Zero::from_wording`; a hybrid shard without a size shards
    // within a node, as FSDP's HYBRID_SHARD does: over the node's data-parallel ranks, its GPUs
    // over the TP degree, TP being the innermost dimension; a shard group holding every
    // data-parallel rank is plain sharding); blank: NeMo / Megatron-Core recipes use the
    // distributed optimizer.
    let cell = r.zero_stage.as_deref().unwrap_or("").trim();
    let in_node = (r.gpus_per_node.unwrap_or(8) / tp.max(1)).max(1);
    let whole = |z: Zero| {
        if z.group > 0 && z.group >= dp * cp {
            Zero { group: 0, ..z }
        } else {
            z
        }
    };
    let zero = match Zero::from_wording(cell, in_node).map(whole) {
        Some(z) => z,
        None if cell.is_empty() => match era {
            Era::MegatronCore | Era::MegatronDeepSpeed => Zero::stage(1),
            // MaxText's default mesh: FSDP over the ICI axis, data parallelism over DCN
            // (`ici_fsdp_parallelism: -1`, `dcn_data_parallelism: -1`, `configs/base.yml` @
            // maxtext 0.2.5 L769, L783; its A3 scripts: `ici_fsdp_parallelism=8` within a VM,
            // `dcn_data_parallelism` across VMs): HSDP within a node, nothing sharded where
            // the node's GPUs are all one TP group.
            Era::MaxText if in_node >= 2 => whole(Zero::stage(3).hsdp(in_node)),
            _ => Zero::NONE,
        },
        None => {
            return Err(unreadable(
                &r.id,
                "zero_stage",
                format!(
                    "zero_stage `{cell}`: not a ZeRO stage, an FSDP or HSDP mode, a distributed \
                     optimizer, or none"
                ),
            ))
        }
    };
    // What the sharding cell says went to host memory: ZeRO-Offload's optimizer state and
    // gradients (the CPU running the step: `offload_optimizer` 100%), with ZeRO-3's parameter
    // shard too where it names the parameters or ZeRO-Infinity (`offload_params`); an NVMe
    // tier is not priced. Read, never dropped: a ZeRO-3 offload run priced as ZeRO-3 alone
    // would be far too fast.
    let (offload_optimizer, offload_params) = {
        let c = cell.to_ascii_lowercase();
        if c.contains("nvme") {
            return Err(skip(
                &r.id,
                format!("zero_stage `{cell}`: an NVMe offload tier is not priced"),
            ));
        }
        let offload = c.contains("offload") || c.contains("infinity");
        // The parameters named as what is offloaded, not as what is sharded ("shard params").
        let w = c.replace(['_', '-'], " ");
        let params = w.contains("infinity")
            || [
                "offload param",
                "param offload",
                "params offload",
                "parameter offload",
                "parameters offload",
            ]
            .iter()
            .any(|p| w.contains(p));
        (if offload { 100 } else { 0 }, offload && params)
    };
    // A torchtitan row with PP ran FSDP under PyTorch's pipelining, which gathers a stage's
    // parameters once and reduces its gradients once per step
    // (`ShardModes::pp_once_per_step`, torchtitan's capability table): zero=1, in the row's
    // HSDP groups.
    let once = torchtitan
        && autoplan_plan::Framework::TorchTitan
            .capabilities()
            .sharding
            .pp_once_per_step;
    let zero = if once && pp > 1 && zero.shards_params() {
        Zero::stage(1).hsdp(zero.group)
    } else {
        zero
    };
    let ep = r.ep.unwrap_or(1);
    let moe_tp = r.etp.unwrap_or(1);
    // A row whose notes name DualPipe ran DeepSeek-V3's bidirectional schedule (report §3.2.1:
    // each rank holds stages i and pp−1−i and overlaps a forward and a backward chunk's
    // computation with their all-to-all and pipeline communication, hence `ep_overlap`).
    let notes = r.notes.as_deref().unwrap_or("").to_ascii_lowercase();
    let dualpipe = vpp == 1 && notes.contains("dualpipe");
    // The ModelZoo rows that ran Megatron-Core's `--overlap-moe-expert-parallel-comm` say so
    // ("1F1B EP-A2A overlap", "A2A overlap"); their twins without it do not.
    let a2a_overlap = notes.contains("a2a overlap");
    // How the CP group exchanges K and V: as the notes name it (DeepSpeed-Ulysses' all-to-all;
    // "all-gather based"), else as the source's stack does it: the Llama 3 paper's runs
    // all-gather K and V, then attend with the local queries ("different from existing CP
    // implementations that overlap communication and computation in a ring-like structure",
    // Dubey+24 §3.3.2; a rule on the source, so its runs at other scales and sequence lengths
    // read alike), torchtitan's default rotate method is all-gather
    // (`context_parallel_rotate_method`, frameworks.md §2); else Megatron's default, the p2p
    // ring (`--cp-comm-type p2p`, frameworks.md §1.5).
    let llama3_paper = {
        let source = r.source.to_ascii_lowercase();
        source.contains("dubey+24") || source.contains("llama 3 herd")
    };
    let cp_comm = if notes.contains("ulysses") {
        CpComm::AllToAll
    } else if notes.contains("all-gather based")
        || notes.contains("allgather based")
        || llama3_paper
        || (torchtitan && !notes.contains("alltoall"))
    {
        CpComm::AllGather
    } else {
        CpComm::Ring
    };
    Ok(Plan {
        tp,
        sp,
        cp,
        dp,
        pp,
        zero,
        schedule: if vpp > 1 {
            Schedule::Interleaved
        } else if dualpipe {
            Schedule::DualPipe
        } else {
            Schedule::OneF1B
        },
        vpp,
        cp_comm,
        ep,
        moe_tp,
        mbs,
        recompute,
        recompute_modules: modules,
        recompute_layers,
        // The profile's runs overlapped TP communication or not (`CostProfile`; what the
        // overlap hides is the profile's too, `tp_overlap_hides`).
        tp_overlap: profile.tp_comm_overlap,
        ep_overlap: dualpipe || a2a_overlap,
        // The ModelZoo rows name their dispatcher in the notes ("Dispatcher DeepEP", "DeepEP
        // dispatcher", "HybridEP": Megatron-Core's `flex` dispatcher with either backend, one
        // permutation by expert and no chunk sort; HybridEP is the backend for multi-node
        // NVLink, priced as DeepEP's NVLink path inside the domain, frameworks.md §1.6).
        // DualPipe rows ran DeepSeek's own cross-node dispatch (report §3.2.2: IB to the
        // same-index GPU of each target node, then NVLink, node-limited routing), which DeepEP
        // open-sourced.
        dispatcher: if notes.contains("deepep") || notes.contains("hybridep") || dualpipe {
            Dispatcher::DeepEp
        } else {
            Dispatcher::AllToAll
        },
        pipeline_split: pipeline_split(r, model.layers, pp, vpp),
        offload_optimizer,
        offload_params,
        ..Plan::default()
    })
}

/// The blocks of each model chunk (of `chunk` blocks) that torchtitan's `selective` mode
/// recomputes. torchtitan's selective checkpointing is not Megatron's (frameworks.md §2.3):
/// `selective_ac_option` "N" wraps every N-th block in full activation checkpointing, and its
/// default is "2" (`torchtitan/config/job_config.py @ v0.2.2`, `ActivationCheckpoint`: "'int'
/// (e.g., 2) for every nth layer, or 'op' for op level ac"), i.e. `chunk / N` blocks of each
/// chunk recomputed in full (at least one). A cell naming an N ("selective 3") takes it; "op"
/// (per-op SAC: every matmul's output saved but every second one's, and the attention's) is
/// not priced.
fn torchtitan_every_nth(r: &PublishedRun, rc: &str, chunk: u32) -> Result<u32, Skipped> {
    let words: Vec<&str> = rc
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    if words.contains(&"op") {
        return Err(Skipped {
            column: Some("recompute".into()),
            ..skip(
                &r.id,
                "torchtitan's per-op selective checkpointing (selective_ac_option \"op\": every \
                 second matmul and the elementwise ops recomputed) is not priced",
            )
        });
    }
    let n = words
        .iter()
        .find_map(|w| w.parse::<u32>().ok())
        .filter(|n| *n >= 1)
        .unwrap_or(2);
    Ok((chunk / n).max(1))
}

/// The software settings of row `r`'s era.
pub(super) fn case_options(
    r: &PublishedRun,
    profile: &autoplan_plan::framework::CostProfile,
    model: &ModelSpec,
) -> EvalOptions {
    // The overlap and the attention kernel are the profile's (`CostProfile`). Gradients are
    // reduced in FP32 under BF16 (Megatron's `bf16` default; FP16 runs reduce in FP16, which
    // `with_profile` applies) unless the row names Composer's `PURE` mixed
    // precision, whose FSDP `reduce_dtype` is the training dtype
    // (`composer/distributed/mosaic_parallelism.py::get_mixed_precision` @ mosaicml 0.28.0,
    // L82-85; `DEFAULT` reduces in FP32, L78-81).
    let pure = r
        .precision
        .as_deref()
        .is_some_and(|p| p.to_ascii_lowercase().contains("pure"));
    // DeepSeek's reports describe DeepSeek's own framework, whose DeepEP dispatch travels in
    // FP8 under its fine-grained FP8 recipe (DeepSeek-V3 report §3.3.3); every other stack's
    // sends BF16 (`EvalOptions::fp8_dispatch`). A rule on the source, as the Llama 3 paper's
    // all-gather CP is.
    let source = r.source.to_ascii_lowercase();
    let deepseek_report = [
        "deepseek-v3 technical report",
        "deepseek-v2 paper",
        "deepseek-v3 report",
    ]
    .iter()
    .any(|w| source.contains(w));
    EvalOptions {
        grad_bytes: if pure { 2.0 } else { 4.0 },
        flops: row_attention_flops(r),
        fp8_dispatch: deepseek_report,
        ..EvalOptions::default()
    }
    .with_profile(profile, model.training.precision)
}

/// Plan and options of row `r` with what its benchmark scripts set beyond the row's cells
/// (`harness.rs`): NeMo's performance scripts reduce gradients in BF16 and run DeepSeek-V3
/// on Hopper GPUs (the scripts' `h100`) with DeepEP and no TP-communication overlap.
pub(super) fn with_harness(
    r: &PublishedRun,
    model: &ModelSpec,
    cluster: &Cluster,
    mut plan: Plan,
    mut options: EvalOptions,
) -> (Plan, EvalOptions) {
    let Some(nemo) = super::harness::NemoPerfScripts::of(r) else {
        return (plan, options);
    };
    let precision = model.training.precision;
    if nemo.reduces_grads_in_bf16(precision) && precision != Precision::Fp32 {
        // The gradient buffer is BF16 too (Megatron-Core's DDP keeps `main_grad` in the
        // reduction's dtype): the evaluator's memory follows `grad_bytes`.
        options.grad_bytes = 2.0;
    }
    // FP8 parameter gathers, and MXFP8's without overlap (the memory keeps its 16-bit
    // parameters: `--fp8-param-gather`'s FP8 copy is not modelled, an upper bound).
    if let Some(b) = nemo.param_gather_bytes(precision) {
        options.param_gather_bytes = b;
    }
    if nemo.param_gather_exposed(precision) {
        options.param_gather_overlap = false;
    }
    // The scripts fill what the row leaves unsaid: a dispatcher or TP overlap its notes name
    // stands.
    let notes = r.notes.as_deref().unwrap_or("").to_ascii_lowercase();
    let names = |words: &[&str]| words.iter().any(|w| notes.contains(w));
    // The scripts' `--gpu` takes `h100`, `b200` or `gb200` (`argument_parser.py` @ nemo-toolkit
    // 2.5.0 L43-50), so a run of them on any Hopper GPU (H100, H800, H200: compute capability
    // 9.0) took the `h100` branch.
    let hopper = cluster.gpu.arch.compute_capability() == Some((9, 0));
    if hopper && model.name == "deepseek-v3" && nemo.deepseek_v3_h100_deepep() {
        if !names(&["dispatcher", "deepep", "hybridep"]) {
            plan.dispatcher = Dispatcher::DeepEp;
        }
        if !names(&[
            "tp comm overlap",
            "tp-comm-overlap",
            "tp_comm_overlap",
            "tp overlap",
        ]) {
            plan.tp_overlap = false;
        }
    }
    (plan, options)
}

/// The measured figure of row `r` and its value.
pub(super) fn case_figure(r: &PublishedRun) -> Result<(Figure, f64), Skipped> {
    let id = r.id.as_str();
    // Throughput is compared where the row gives it: tokens/s carries no FLOP convention,
    // whereas "model TFLOP/s" differs between sources in how attention is counted (NeMo 24.07
    // counts the full s×s scores: its Llama3-8B rows give 57.9 GFLOP per token; Megatron-Bridge
    // 25.11 and the ModelZoo count the causal half: 51.5 for the same model and sequence).
    // A hardware convention counts the recomputed FLOPs, in the TFLOP/s and in the
    // utilisation alike ("hardware", "HFU").
    let conv = r
        .tflops_convention
        .as_deref()
        .unwrap_or("model")
        .to_ascii_lowercase();
    // Its first word: `hardware`, `hw` or `HFU` (`hardware (with recompute)`, `hw TFLOP/s`).
    let first = conv
        .split(|c: char| !c.is_ascii_alphanumeric())
        .find(|w| !w.is_empty())
        .unwrap_or("");
    let hardware = matches!(first, "hardware" | "hw" | "hfu");
    let (figure, measured) = if let Some(t) = r.measured_tokens_per_s_per_gpu {
        (Figure::TokensPerSPerGpu, t)
    } else if let Some(t) = r.measured_tflops_per_gpu {
        (
            if hardware {
                Figure::HardwareTflops
            } else {
                Figure::ModelTflops
            },
            t,
        )
    } else if let Some(m) = r.measured_mfu {
        (if hardware { Figure::Hfu } else { Figure::Mfu }, m)
    } else if let Some(s) = r.measured_step_time_s {
        (Figure::StepTimeS, s)
    } else {
        return Err(skip(id, "no measured figure"));
    };
    Ok((figure, measured))
}

/// `plan` interleaved at `vpp` chunks per rank, split as the row's notes say (`pipeline_split`).
fn interleaved_at(r: &PublishedRun, model: &ModelSpec, plan: Plan, vpp: u32) -> Plan {
    Plan {
        schedule: Schedule::Interleaved,
        vpp,
        pipeline_split: pipeline_split(r, model.layers, plan.pp, vpp),
        ..plan
    }
}

/// The plan of a row run in NeMo whose model and TP × PP × CP are one of NeMo's recipes and whose
/// `vpp` cell and notes are silent on the schedule: the recipe's interleaved depth
/// ([`super::harness::NemoRecipe`]; the MLPerf v3.1 GPT-3 rows, NeMo 23.09, TP 4 × PP 8).
/// Returns the plan and what `validate --explain` says of it; `None` for every other row.
pub(super) fn nemo_recipe_interleaving(
    r: &PublishedRun,
    model: &ModelSpec,
    plan: Plan,
) -> Option<(Plan, String)> {
    let recipe = super::harness::NemoRecipe::of(r, model, [plan.tp, plan.pp, plan.cp])?;
    let plan = interleaved_at(r, model, plan, recipe.vpp);
    let why = format!(
        "vpp {}: the row gives no schedule; NeMo's `{}` recipe, whose TP {} × PP {} × CP {} it \
         runs, interleaves {} chunks per rank",
        recipe.vpp, recipe.name, plan.tp, plan.pp, plan.cp, recipe.vpp
    );
    Some((plan, why))
}

/// The plan of a DeepSeek-V3 row of NVIDIA's performance tables with the first and last
/// pipeline stages its configuration gives them ([`super::harness::deepseek_v3_stage_blocks`]),
/// and what `validate --explain` says of it; `None` for every other row.
pub(super) fn nvidia_deepseek_v3_layout(
    r: &PublishedRun,
    model: &ModelSpec,
    plan: Plan,
) -> Option<(Plan, String)> {
    if plan.first_stage_layers.is_some() || plan.last_stage_layers.is_some() {
        return None;
    }
    let (first, last) = super::harness::deepseek_v3_stage_blocks(r, model, plan.pp, plan.vpp)?;
    let plan = Plan {
        first_stage_layers: Some(first),
        last_stage_layers: Some(last),
        ..plan
    };
    let why = format!(
        "first_stage_layers={first}, last_stage_layers={last}: the row gives no pipeline split; \
         NVIDIA's DeepSeek-V3 configuration for PP {} puts {first} blocks on the first stage, {} \
         on each middle one and {last} on the last",
        plan.pp,
        (model.layers - first - last) / (plan.pp - 2).max(1)
    );
    Some((plan, why))
}

/// The plan of a row whose notes name an interleaved schedule while its `vpp` cell is blank
/// (Llama 3: "Interleaved PP with custom schedule (V stages per rank; V not given)", Dubey+24
/// §3.3.2). The run had some depth V ≥ 2 that fit in memory, chosen by its engineers, so the
/// case takes, of the depths 2 ..= (blocks + 2) / pp that the model admits (each stage holds
/// at least V chunks and the plan fits), the one it prices fastest, the smallest on a tie;
/// where none is admitted, V = 2, whose rejection the row's skip then names. Never 1F1B, which
/// the row rules out. A torchtitan row takes torchtitan's default depth, 2. Returns the plan
/// and what `validate --explain` says of the choice; `None` for every other row.
pub(super) fn unstated_interleaving(
    r: &PublishedRun,
    era: Era,
    model: &ModelSpec,
    cluster: &Cluster,
    options: EvalOptions,
    plan: Plan,
) -> Option<(Plan, String)> {
    let notes = r.notes.as_deref().unwrap_or("").to_ascii_lowercase();
    let interleaved = notes.contains("interleaved") && !notes.contains("non-interleaved");
    if r.vpp.is_some() || !interleaved || plan.pp <= 1 {
        return None;
    }
    let with = |v: u32| interleaved_at(r, model, plan, v);
    // torchtitan builds 2 stages per rank for a multi-stage schedule when the row's config
    // does not size them (`pipeline_parallel.py @ v0.2.2:L112-115`, frameworks.md §2.1): its
    // default, not a tuned depth.
    if era == Era::Torchtitan {
        return Some((
            with(2),
            "vpp 2: the row names an interleaved schedule but not its depth; torchtitan's \
             default for a multi-stage schedule, 2 stages per rank"
                .to_string(),
        ));
    }
    let ev = Evaluator::new(model, cluster, options);
    let mut best: Option<(f64, Plan)> = None;
    // A stage's chunks may count the embedding and the loss as a block each (`pipeline_split`).
    let deepest = ((model.layers + 2) / plan.pp).max(2);
    for v in 2..=deepest {
        let p = with(v);
        if let Ok(m) = ev.evaluate(&p) {
            if best.as_ref().is_none_or(|(t, _)| m.step_time_s < *t) {
                best = Some((m.step_time_s, p));
            }
        }
    }
    let plan = best.map_or_else(|| with(2), |(_, p)| p);
    let why = format!(
        "vpp {}: the row names an interleaved schedule but not its depth; the fastest of the \
         depths 2-{deepest} that the model admits (2 where it admits none)",
        plan.vpp
    );
    Some((plan, why))
}

/// The micro-batch of a Megatron-LM 2021–22 row that gives none (the era's profiles but
/// Megatron v1's, whose replicas ran their local batch whole). From 2021 Megatron-LM splits
/// each replica's local batch into micro-batches (`--micro-batch-size` beside
/// `--global-batch-size`), which its pipeline needs to fill (Narayanan+21 §2.2), and its
/// engineers sized them per model: Narayanan+21's Table 1 runs 16 at pp 1 down to 1 at pp 16
/// and deeper (`nar21_*` rows). A run fit in memory with its tuned micro-batch, so the case
/// takes, of the micro-batches dividing the local batch that the model admits (the plan
/// fits), the one it prices fastest, the smallest on a tie; where none is admitted, 1, whose
/// rejection the row's skip then names. The local batch as one micro-batch, v1's reading,
/// would leave a pipelined plan one micro-batch, all bubble. Returns the plan and what
/// `validate --explain` says of the choice; `None` for every other row.
pub(super) fn unstated_micro_batch(
    r: &PublishedRun,
    era: Era,
    profile: &CostProfile,
    model: &ModelSpec,
    cluster: &Cluster,
    options: EvalOptions,
    plan: Plan,
) -> Option<(Plan, String)> {
    if r.micro_batch.is_some()
        || era != Era::Megatron2021
        || *profile == CostProfile::MEGATRON_LM_2020
    {
        return None;
    }
    let local = model.training.global_batch / plan.dp.max(1);
    let ev = Evaluator::new(model, cluster, options);
    let mut best: Option<(f64, Plan)> = None;
    for m in divisors(local) {
        let p = Plan { mbs: m, ..plan };
        if let Ok(x) = ev.evaluate(&p) {
            if best.as_ref().is_none_or(|(t, _)| x.step_time_s < *t) {
                best = Some((x.step_time_s, p));
            }
        }
    }
    let plan = best.map_or(Plan { mbs: 1, ..plan }, |(_, p)| p);
    let why = format!(
        "mbs {}: the row gives no micro-batch; the fastest of the micro-batches dividing its \
         local batch of {local} that the model admits (1 where it admits none)",
        plan.mbs
    );
    Some((plan, why))
}

/// The divisors of `n` in increasing order (none for 0), found up to its square root.
fn divisors(n: u32) -> Vec<u32> {
    let (mut low, mut high) = (Vec::new(), Vec::new());
    let mut d = 1u32;
    while u64::from(d) * u64::from(d) <= u64::from(n) {
        if n.is_multiple_of(d) {
            low.push(d);
            if d != n / d {
                high.push(n / d);
            }
        }
        d += 1;
    }
    low.extend(high.into_iter().rev());
    low
}

/// The plan of a row that gives no recompute and whose plan does not fit without one (the NeMo
/// and Megatron-Bridge tables have no recompute column): the run recomputed something, and a
/// tuned configuration recomputes no more than it must. First the attention core alone, where
/// that fits: Megatron's default selective recompute (`--recompute-activations`, modules
/// `core_attn`, frameworks.md §1.7; Korthikanti+22 §4), which frees the `s×s` scores an
/// unfused attention kernel stores for a few percent of the block's FLOPs (under a fused
/// kernel it frees nothing, so it never fits where no recompute does). Else the case
/// recomputes in full the fewest blocks of each model chunk that fit (Megatron's
/// `--recompute-granularity full --recompute-method block --recompute-num-layers N`,
/// frameworks.md §1.7; torchtitan's every-N-th block and llm-foundry's per-block checkpointing
/// are the same trade), all of them where only that fits. A MoE model under Megatron-Core
/// whose run could name its recompute modules (`modules`, `harness::takes_recompute_modules`)
/// takes the faster of that and the fastest selective set of modules that fits: NVIDIA's tuned
/// MoE configurations recompute modules, not blocks (Megatron-Bridge 0.6.2's
/// `perf_recipes`: DeepSeek-V3 and Kimi-K2 `mla_up_proj` and `mlp`, Qwen3 MoE and GPT-OSS
/// `layernorm` and `moe_act`, Nemotron-H `moe_act`; NeMo 2.5.0's DeepSeek-V3 recipe
/// `mla_up_proj` and `layernorm`), where their dense Llama configurations recompute blocks.
/// Returns the plan and what `validate --explain` says of the choice; `None` when the plan fits
/// as given, or when not even full recompute fits (the row's skip says so).
pub(super) fn unstated_recompute(
    model: &ModelSpec,
    cluster: &Cluster,
    options: EvalOptions,
    plan: Plan,
    modules: bool,
) -> Option<(Plan, String)> {
    if plan.recompute != Recompute::None {
        return None;
    }
    let ev = Evaluator::new(model, cluster, options);
    let (need, hbm) = match ev.evaluate(&plan) {
        Err(Infeasible::OutOfMemory {
            peak_bytes,
            hbm_bytes,
        }) => (peak_bytes, hbm_bytes),
        _ => return None,
    };
    let why = |what: &str| {
        format!(
            "recompute: the row gives none and its plan needs {:.2} GiB of {:.2} GiB without; \
             the least that fits, {what} (a tuned configuration recomputes no more than it must)",
            need / crate::GIB,
            hbm / crate::GIB,
        )
    };
    let selective = Plan {
        recompute: Recompute::Selective,
        recompute_modules: RecomputeModules::DEFAULT,
        recompute_layers: None,
        ..plan
    };
    if ev.evaluate(&selective).is_ok() {
        let what = "the attention core recomputed (Megatron's selective recompute, its scores \
                    not stored)";
        return Some((selective, why(what)));
    }
    let chunk = plan
        .stage_blocks(model)?
        .max_blocks()
        .div_ceil(plan.vpp.max(1));
    let fits = |layers: Option<u32>| {
        let p = Plan {
            recompute: Recompute::Full,
            recompute_layers: layers,
            ..plan
        };
        ev.evaluate(&p).ok().map(|m| (p, m.step_time_s))
    };
    // (plan, step time, what the choice was).
    let blocks = match (1..chunk).find_map(|k| fits(Some(k)).map(|f| (f, k))) {
        Some(((p, t), k)) => Some((
            p,
            t,
            format!("the first {k} of each chunk's {chunk} blocks recomputed in full"),
        )),
        None => fits(None).map(|(p, t)| {
            (
                p,
                t,
                format!("all {chunk} blocks of each chunk recomputed in full"),
            )
        }),
    };
    let by_module = (modules && model.moe.is_some())
        .then(|| fastest_module_set(&ev, model, plan))
        .flatten()
        .filter(|(_, t)| blocks.as_ref().is_none_or(|(_, b, _)| t < b))
        .map(|(p, _)| {
            let what = format!(
                "selective recompute of {} (the fastest of Megatron-Core's module sets and \
                 block counts that fits, as NVIDIA's MoE configurations recompute modules)",
                p.recompute_modules.names().collect::<Vec<_>>().join(", ")
            );
            (p, what)
        });
    let (plan, what) = by_module.or(blocks.map(|(p, _, what)| (p, what)))?;
    Some((plan, why(&what)))
}

/// The fastest selective recompute by Megatron-Core module set (`--recompute-modules`) that
/// fits, and its step time: every set of the modules the model has that Megatron-Core 0.14
/// (the oldest release the framework table covers, `MEGATRON_MINORS`) accepts for the plan.
fn fastest_module_set(ev: &Evaluator, model: &ModelSpec, plan: Plan) -> Option<(Plan, f64)> {
    let framework = autoplan_plan::Framework::MegatronCore {
        minor: *autoplan_plan::framework::MEGATRON_MINORS.start(),
    };
    (1..=RecomputeModules::ALL.0)
        .map(|bits| Plan {
            recompute: Recompute::Selective,
            recompute_modules: RecomputeModules(bits),
            recompute_layers: None,
            ..plan
        })
        .filter(|p| framework.check(p, model).is_ok())
        .filter_map(|p| ev.evaluate(&p).ok().map(|m| (p, m.step_time_s)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
}
