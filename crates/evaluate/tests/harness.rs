//! What NeMo's performance scripts set beyond a row's cells (`validate/harness.rs`): the
//! BF16 gradient reduction of the 25.04–25.09 containers' runs, and DeepSeek-V3 on H100 with
//! DeepEP and no TP-communication overlap — each only where the row leaves it unsaid; and the
//! reduction dtype a row names (Composer's `PURE` mixed precision).

mod common;

use autoplan_evaluate::validate::{Case, PublishedRun};
use autoplan_plan::Dispatcher;
use common::row;

fn case(r: &PublishedRun) -> Case {
    common::case(r).expect(&r.id)
}

#[test]
fn deepseek_v3_on_h100_in_a_nemo_container_runs_deepep_and_reduces_in_bf16() {
    let r = row("bridge2509_h100_DeepSeekV3_1024gpu_not");
    let c = case(&r);
    assert_eq!(c.plan.dispatcher, Dispatcher::DeepEp);
    assert!(!c.plan.tp_overlap);
    assert_eq!(c.options.grad_bytes, 2.0);
    // A dispatcher or TP overlap the notes name stands.
    let mut named = r.clone();
    named.notes = Some("Dispatcher alltoall; TP comm overlap on".into());
    let c = case(&named);
    assert_eq!(c.plan.dispatcher, Dispatcher::AllToAll);
    assert!(c.plan.tp_overlap);
    // 25.04's scripts set no dispatcher and reduce BF16 runs in FP32 (FP8 ones in BF16).
    let mut older = r.clone();
    older.source = r.source.replace("25.09", "25.04");
    let c = case(&older);
    assert_eq!(c.plan.dispatcher, Dispatcher::AllToAll);
    assert_eq!(c.options.grad_bytes, 2.0, "read as block-scaled FP8");
    older.precision = Some("bf16".into());
    assert_eq!(case(&older).options.grad_bytes, 4.0);
    // The scripts' `--gpu` has one Hopper choice, `h100`: the same run on H200s or H800s took
    // that branch too (and is not priced slower than on H100s for missing it).
    let mut h200 = r.clone();
    h200.gpu = "H200".into();
    let c = case(&h200);
    assert_eq!(c.cluster.gpu.arch, autoplan_cluster::GpuArch::H200);
    assert_eq!(c.plan.dispatcher, Dispatcher::DeepEp);
    assert!(!c.plan.tp_overlap);
    let speed = |c: &Case| {
        let ev = autoplan_evaluate::Evaluator::new(&c.model, &c.cluster, c.options);
        c.predicted(&ev.evaluate(&c.plan).expect("fits"))
    };
    assert!(speed(&c) >= speed(&case(&r)));
}

#[test]
fn other_gpus_and_older_tables_keep_their_defaults() {
    // Megatron-Bridge's 25.11 table was not made by NeMo 2.6.0's scripts (its "dropless"
    // DeepSeek-V3 on GB200, where those scripts drop tokens): Megatron's defaults.
    let c = case(&row("bridge2511_gb200_DeepSeekV3_256gpu_bf16"));
    assert_eq!(c.plan.dispatcher, Dispatcher::AllToAll);
    assert_eq!(c.options.grad_bytes, 4.0);
    // In a 25.09 table the same row's gradients would be BF16, its dispatcher the all-to-all
    // (DeepEP is the scripts' choice on H100 only).
    let mut r = row("bridge2511_gb200_DeepSeekV3_256gpu_bf16");
    r.source = r.source.replace("25.11", "25.09");
    let c = case(&r);
    assert_eq!(c.plan.dispatcher, Dispatcher::AllToAll);
    assert_eq!(c.options.grad_bytes, 2.0);
    // NeMo 24.07 ran the launcher's configurations (not read): Megatron's FP32 reduction.
    let c = case(&row("nemo2407_h100_LLAMA3-70B_64gpu"));
    assert_eq!(c.options.grad_bytes, 4.0);
    // A ModelZoo row is not a NeMo table's.
    let c = case(&row("mzoo_h100_Qwen3_235B_a22B_xnode_ep32"));
    assert_eq!(c.options.grad_bytes, 4.0);
}

#[test]
fn nemo_fp8_runs_gather_their_parameters_in_fp8_and_mxfp8_without_overlap() {
    use autoplan_evaluate::{CommKind, Evaluator};
    // NeMo's FP8 plugins gather the parameters in FP8 (`fp8_param_gather`), block scaling
    // excepted; from 25.07 MXFP8 too, and its scripts turn the gather's overlap off.
    let base = row("bridge2509_h100_DeepSeekV3_1024gpu_not");
    let with = |precision: &str, container: &str| {
        let mut r = base.clone();
        r.precision = Some(precision.into());
        r.source = base.source.replace("25.09", container);
        case(&r).options
    };
    for (precision, container, bytes, overlap) in [
        ("not stated (fp8 implied)", "25.09", 2.0, true),
        ("fp8 (current scaling)", "25.09", 1.0, true),
        ("fp8 (delayed scaling)", "25.04", 1.0, true),
        ("bf16", "25.09", 2.0, true),
    ] {
        let o = with(precision, container);
        assert_eq!(o.param_gather_bytes, bytes, "{precision} {container}");
        assert_eq!(o.param_gather_overlap, overlap, "{precision} {container}");
    }
    // MXFP8 runs on Blackwell: a B200 row of the same tables.
    let b200 = row("bridge2511_b200_DeepSeekV3_256gpu_mxfp8");
    let mx = |container: &str| {
        let mut r = b200.clone();
        r.source = b200.source.replace("25.11", container);
        case(&r)
    };
    let (c25_07, c25_04) = (mx("25.07"), mx("25.04"));
    assert_eq!(c25_07.options.param_gather_bytes, 1.0 + 1.0 / 32.0);
    assert!(!c25_07.options.param_gather_overlap);
    assert_eq!(c25_04.options.param_gather_bytes, 2.0);
    assert!(c25_04.options.param_gather_overlap);
    // Megatron-Bridge's own 25.11 port is not read: the defaults.
    let own = case(&b200).options;
    assert_eq!(
        (own.param_gather_bytes, own.param_gather_overlap),
        (2.0, true)
    );
    // Priced: the 25.07 MXFP8 run's DP parameter all-gather moves 1/32 over half the bytes
    // and is all exposed.
    let gather = |c: &Case| {
        let r = Evaluator::new(&c.model, &c.cluster, c.options)
            .report(&c.plan)
            .expect("runs");
        r.comm
            .into_iter()
            .find(|x| x.kind == CommKind::Dp && x.what == "DP parameter all-gather")
            .expect("a DP parameter all-gather")
    };
    let (g7, g4) = (gather(&c25_07), gather(&c25_04));
    assert!((g7.bytes / g4.bytes - (1.0 + 1.0 / 32.0) / 2.0).abs() <= 1e-12);
    assert_eq!(g7.exposed, g7.time);
    assert!(g4.exposed < g4.time);
}

#[test]
fn composers_pure_mixed_precision_reduces_in_the_training_dtype() {
    // llm-foundry's A100 MPT-70B row names Composer's PURE mode: FSDP reduces in BF16; its
    // H100 rows (amp_bf16, no mode) keep FP32.
    assert_eq!(case(&row("mpt_70b_64xa100")).options.grad_bytes, 2.0);
    assert_eq!(case(&row("mpt_70b_512xh100")).options.grad_bytes, 4.0);
}

/// NeMo's recipes (`NemoRecipe`): a NeMo run silent on its schedule at a recipe's model, TP and
/// PP interleaves as the recipe does (MLPerf v3.1's GPT-3 runs, NeMo 23.09, TP 4 × PP 8: the
/// `gpt3_175b` recipe's 6 chunks per rank); a stated depth or schedule, another layout, another
/// framework or another model keep what they were.
#[test]
fn a_nemo_run_silent_on_its_schedule_interleaves_as_its_recipe() {
    use autoplan_plan::Schedule;
    for id in [
        "mlperf31_nvidia_gpt3_512xH100",
        "mlperf31_nvidia_gpt3_4096xH100",
    ] {
        let c = case(&row(id));
        assert_eq!(
            (c.plan.schedule, c.plan.vpp),
            (Schedule::Interleaved, 6),
            "{id}"
        );
        assert!(c.chosen.as_deref().unwrap().contains("gpt3_175b"), "{id}");
    }
    let r = row("mlperf31_nvidia_gpt3_4096xH100");
    let one_f_one_b = |c: &Case| c.plan.vpp == 1 && c.plan.schedule != Schedule::Interleaved;
    // The notes name the schedule.
    let mut named = r.clone();
    named.notes = Some("non-interleaved 1F1B".into());
    assert!(one_f_one_b(&case(&named)));
    // A depth the row gives stands.
    let mut stated = r.clone();
    stated.vpp = Some(12);
    assert_eq!(case(&stated).plan.vpp, 12);
    // Not the recipe's layout: TP 8 × PP 4 on the same GPUs, or context parallelism beside
    // its TP 4 × PP 8 (the recipe has none).
    let mut other = r.clone();
    (other.tp, other.pp) = (Some(8), Some(4));
    assert!(one_f_one_b(&case(&other)));
    let mut cp = r.clone();
    (cp.cp, cp.dp) = (Some(2), Some(64));
    assert!(one_f_one_b(&case(&cp)));
    // Not a NeMo run (a Nemotron model's name is not NeMo).
    let mut megatron = r.clone();
    megatron.source = "NVIDIA/Megatron-LM README".into();
    assert!(one_f_one_b(&case(&megatron)));
    megatron.source = "Nemotron-4 technical report, Megatron-LM".into();
    assert!(one_f_one_b(&case(&megatron)));
    megatron.source = "Nemotron-4 technical report, NeMo".into();
    assert!(!one_f_one_b(&case(&megatron)));
    // Mixtral 8x7B and Mistral 7B share layers, widths and heads; only the MoE is the recipe's
    // (`mixtral_8x7b`, TP 1 × PP 4, 8 chunks: Megatron-Core's own mapping for it, VP 8).
    let mut mixtral = row("mcore08_mixtral8x7b_64xH100");
    mixtral.source = "NeMo 24.07 container".into();
    mixtral.vpp = None;
    assert_eq!(case(&mixtral).plan.vpp, 8);
    let mut dense = mixtral.clone();
    (dense.moe_experts, dense.moe_topk, dense.moe_ffn_hidden) = (None, None, None);
    (dense.model, dense.params_b) = ("Mistral 7B".into(), Some(7.2));
    assert_eq!(case(&dense).plan.vpp, 1);
}

/// A row names Megatron-Core's `flex` dispatcher by its backend in either word order
/// ("Dispatcher DeepEP", "DeepEP dispatcher", "HybridEP"); "A2A" and "AlltoAll (NCCL)
/// dispatcher" are the `alltoall` dispatcher.
#[test]
fn the_notes_name_the_dispatcher_in_either_order() {
    for (id, want) in [
        ("mzoo_h100_Qwen3_235B_a22B_xnode_ep32", Dispatcher::DeepEp),
        ("mzoo_h100_qwen3_235b_longctx_seq16384", Dispatcher::DeepEp),
        ("mzoo_gb200_mxfp8_qwen3_235b", Dispatcher::DeepEp),
        (
            "mzoo_h100_Qwen3_235B_a22B_intranode_ep8_a2a_pp32",
            Dispatcher::AllToAll,
        ),
        ("dsv3_gb200_guide_baseline", Dispatcher::AllToAll),
    ] {
        assert_eq!(case(&row(id)).plan.dispatcher, want, "{id}");
    }
}

/// A hybrid model's recurrent or linear-attention layers are not in autoplan's catalogue, so a
/// row of one is refused as a tool limit (named), not priced as if every layer were attention:
/// ModelZoo's Qwen3-Next row, given its vocabulary, would otherwise score +48% on a plain
/// Qwen-MoE shape. Nemotron-H and Mamba by name, linear attention by the notes; a dense or MoE
/// transformer (the notes' "HybridEP" dispatcher included) is still read.
#[test]
fn a_hybrid_models_row_is_refused_not_priced_as_attention() {
    use autoplan_evaluate::validate::{unmodelled_layers, SkipKind};
    let mut next = row("mzoo_h100_Qwen3-Next-80B-A3B_next80b_ep32");
    next.vocab = Some(151_936);
    let skipped = common::case(&next).expect_err("a linear-attention hybrid");
    assert_eq!(skipped.kind, SkipKind::ToolLimit);
    assert!(
        skipped.reason.contains("linear-attention"),
        "{}",
        skipped.reason
    );
    let named = |model: &str, notes: &str| {
        let mut r = row("bridge2511_h100_LLAMA3_8B_8gpu_fp8");
        r.model = model.into();
        r.notes = Some(notes.into());
        unmodelled_layers(&r)
    };
    assert!(named("NemotronH_56B", "").is_some());
    assert!(named("Nemotron-H 8B", "").is_some());
    assert!(named("Mamba2-Hybrid 8B", "").is_some());
    assert!(named("Jamba-1.5-Large", "").is_some());
    assert!(named("Qwen3 Next 80B", "").is_some());
    assert!(named("Custom 7B", "Gated DeltaNet layers, 3:1 with attention").is_some());
    assert_eq!(named("LLAMA3_8B", ""), None);
    assert_eq!(named("Nemotron-4-340B", ""), None);
    assert_eq!(named("Qwen3_235B_a22B", "Dispatcher HybridEP"), None);
    for r in [
        "mzoo_gb200_mxfp8_qwen3_235b",
        "nemo2407_h100_Nemotron-340B_128gpu",
        "deepseek_v3_pretrain_2048xH800",
    ] {
        assert_eq!(unmodelled_layers(&row(r)), None, "{r}");
    }
}

/// The FLOP convention a row's `tflops_convention` cell declares: the hardware count by its
/// first word (`hardware`, `hw`, `HFU`), and the attention term — full, causal, or left out
/// (`6N`, `6ND`: Kaplan+20's count) — scored as declared.
#[test]
fn the_convention_cell_is_read_as_written() {
    use autoplan_evaluate::validate::Figure;
    use autoplan_evaluate::AttentionFlops;
    let with = |cell: &str| {
        let mut r = row("mcore08_h100_weak_16B");
        r.tflops_convention = Some(cell.into());
        case(&r)
    };
    for (cell, figure, flops) in [
        ("model", Figure::ModelTflops, AttentionFlops::Full),
        ("hardware", Figure::HardwareTflops, AttentionFlops::Full),
        ("hw", Figure::HardwareTflops, AttentionFlops::Full),
        (
            "HFU (with recompute)",
            Figure::HardwareTflops,
            AttentionFlops::Full,
        ),
        (
            "model (causal)",
            Figure::ModelTflops,
            AttentionFlops::Causal,
        ),
        ("model (6N)", Figure::ModelTflops, AttentionFlops::Excluded),
        ("6ND", Figure::ModelTflops, AttentionFlops::Excluded),
        ("hwm", Figure::ModelTflops, AttentionFlops::Full),
    ] {
        let c = with(cell);
        assert_eq!((c.figure, c.options.flops), (figure, flops), "{cell}");
    }
}

/// A sharding cell that names an offload is read, never dropped: ZeRO-Offload's optimizer
/// state on the host (the CPU runs the step), ZeRO-3's parameter shard too where it names the
/// parameters or ZeRO-Infinity's CPU tier; an NVMe tier is refused by name.
#[test]
fn an_offload_in_the_sharding_cell_is_priced() {
    let with = |cell: &str| {
        let mut r = row("nemo2407_h100_LLAMA2-70B_64gpu");
        r.zero_stage = Some(cell.into());
        common::case(&r)
    };
    for (cell, stage, optimizer, params) in [
        ("ZeRO-3", 3, 0, false),
        ("ZeRO-3 offload", 3, 100, false),
        ("ZeRO-Offload (stage 2)", 2, 100, false),
        ("ZeRO-1 + CPU offload", 1, 100, false),
        ("ZeRO-3 offload_param", 3, 100, true),
        ("ZeRO-3 parameter offload", 3, 100, true),
        // The parameters named as sharded, the optimizer as offloaded.
        (
            "FSDP (shard params+grads+optimizer), CPU offload of optimizer",
            3,
            100,
            false,
        ),
    ] {
        let p = with(cell).expect(cell).plan;
        assert_eq!(
            (p.zero.stage, p.offload_optimizer, p.offload_params),
            (stage, optimizer, params),
            "{cell}"
        );
    }
    let nvme = with("ZeRO-3 NVMe offload").expect_err("NVMe");
    assert!(nvme.reason.contains("NVMe"), "{}", nvme.reason);
}

#[test]
fn deepseek_v3_in_nvidias_tables_takes_its_configurations_pipeline_layout() {
    // Megatron-Bridge's B200 row, PP 16 without interleaving: the embedding and 4 blocks on
    // the first stage, 4 on each middle one, 1 with the MTP module and the loss on the last
    // (nemo-toolkit 2.4.0–2.6.0 `map_pp_vp_to_layout`, megatron-bridge 0.3.1's recipe).
    let b200 = row("bridge2511_b200_DeepSeekV3_256gpu_mxfp8");
    let c = case(&b200);
    assert_eq!(
        (c.plan.first_stage_layers, c.plan.last_stage_layers),
        (Some(4), Some(1))
    );
    assert!(c
        .chosen
        .as_deref()
        .unwrap_or("")
        .contains("first_stage_layers=4"));
    // 25.04's scripts (nemo-toolkit 2.3.0): 64/pp − 1 first, 64/pp − 2 last.
    let mut older = b200.clone();
    older.source = b200.source.replace("25.11", "25.04");
    let c = case(&older);
    assert_eq!(
        (c.plan.first_stage_layers, c.plan.last_stage_layers),
        (Some(3), Some(2))
    );
    // Not where the row says its split, interleaves (a layout of chunks, not of stages), runs
    // a PP size the scripts refuse, or is not NVIDIA's table.
    let none = |r: &PublishedRun| {
        let c = case(r);
        (c.plan.first_stage_layers, c.plan.last_stage_layers) == (None, None)
    };
    let mut said = b200.clone();
    said.notes = Some("custom pipeline layout".into());
    assert!(none(&said));
    let mut interleaved = b200.clone();
    interleaved.vpp = Some(2);
    interleaved.pp = Some(8);
    interleaved.dp = Some(32);
    assert!(none(&interleaved));
    let mut pp2 = b200.clone();
    pp2.pp = Some(2);
    pp2.dp = Some(128);
    let c = common::case(&pp2);
    assert!(c.map_or(true, |c| c.plan.first_stage_layers.is_none()));
    let mut other = b200.clone();
    other.source = "a DeepSeek-V3 run of another stack".into();
    assert!(none(&other));
    // The zoo and guide rows of the same model are not NVIDIA's performance tables.
    assert!(none(&row("deepseek_v3_pretrain_2048xH800")));
}

#[test]
fn only_deepseeks_own_runs_dispatch_in_fp8() {
    // DeepSeek's reports describe its own framework, whose DeepEP dispatch travels in FP8
    // (DeepSeek-V3 report §3.3.3); NVIDIA's DeepSeek-V3 runs are Megatron-Core's, whose DeepEP
    // path sends BF16 (`fused_a2a.py` @ megatron-core 0.14.0), block-scaled FP8 or not.
    assert!(
        case(&row("deepseek_v3_pretrain_2048xH800"))
            .options
            .fp8_dispatch
    );
    for id in [
        "bridge2509_h100_DeepSeekV3_1024gpu_not",
        "bridge2511_b200_DeepSeekV3_256gpu_mxfp8",
        "mzoo_h100_Qwen3_235B_a22B_xnode_ep32",
    ] {
        assert!(!case(&row(id)).options.fp8_dispatch, "{id}");
    }
}
