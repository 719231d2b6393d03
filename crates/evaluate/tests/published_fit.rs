//! Published plans as they ran, and fitting the memory they ran in (issue 17: "no published
//! run predicted out of memory"): the rows' recompute modules, DeepSeek-V3's DualPipe and BF16
//! moments, and Megatron's pipeline split that counts the embedding and the loss.

mod common;

use autoplan_evaluate::validate::{case_of, validate, PublishedRun};
use autoplan_evaluate::Evaluator;
use autoplan_graph::Optimizer;
use autoplan_plan::{PipelineSplit, RecomputeModules, Schedule};
use common::{cluster_for, row, rows};

fn case(r: &PublishedRun) -> autoplan_evaluate::validate::Case {
    case_of(r, &|n| autoplan_graph::resolve_model(n).ok(), &cluster_for)
        .unwrap_or_else(|s| panic!("{}: {}", r.id, s.reason))
}

#[test]
fn no_published_plan_of_either_file_is_out_of_memory_or_invalid() {
    for file in ["published_runs.csv", "published_runs_2.csv"] {
        let v = validate(
            &rows(file),
            &|n| autoplan_graph::resolve_model(n).ok(),
            &cluster_for,
        );
        for s in &v.skipped {
            assert!(
                !s.reason.starts_with("published plan rejected"),
                "{file}: {}: {}",
                s.id,
                s.reason
            );
        }
    }
}

#[test]
fn deepseek_v3_runs_dualpipe_with_its_stated_recompute_and_fits_80_gib() {
    let c = case(&row("deepseek_v3_pretrain_2048xH800"));
    // Notes: "DualPipe PP16"; recompute "selective (RMSNorm + MLA up-projection)".
    assert_eq!(c.plan.schedule, Schedule::DualPipe);
    assert!(c.plan.ep_overlap);
    assert_eq!(
        c.plan.recompute_modules,
        RecomputeModules(RecomputeModules::LAYERNORM | RecomputeModules::MLA_UP_PROJ)
    );
    assert_eq!(c.model.training.optimizer, Optimizer::AdamBf16Moments);
    let m = Evaluator::new(&c.model, &c.cluster, c.options)
        .evaluate(&c.plan)
        .expect("fits");
    assert!(m.memory_peak_bytes <= 80.0 * autoplan_memory::GIB);
    // DualPipe's rank holds two stages: more than 1F1B's peak of the same plan.
    let one_f1b = autoplan_plan::Plan {
        schedule: Schedule::OneF1B,
        ..c.plan
    };
    let m1 = Evaluator::new(&c.model, &c.cluster, c.options)
        .evaluate(&one_f1b)
        .expect("fits");
    assert!(m1.memory_peak_bytes < m.memory_peak_bytes);
}

#[test]
fn a_bare_selective_cell_takes_the_modules_its_notes_list() {
    // Cell "selective"; notes "selective recompute (moe_act, layernorm)".
    let c = case(&row("mzoo_gb200_mxfp8_qwen3_235b"));
    assert_eq!(
        c.plan.recompute_modules,
        RecomputeModules(RecomputeModules::LAYERNORM | RecomputeModules::MOE_ACT)
    );
    // A cell with its own list keeps it: "selective (norm, act)".
    let c = case(&row("mzoo_h100_Qwen3_235B_a22B_xnode_ep32"));
    assert_eq!(
        c.plan.recompute_modules,
        RecomputeModules(RecomputeModules::LAYERNORM | RecomputeModules::MOE_ACT)
    );
    // Or as the clause after "recompute": "recompute dense-layer MLP + MLA up-proj, ...".
    let c = case(&row("dsv3_gb200_guide_baseline"));
    assert_eq!(
        c.plan.recompute_modules,
        RecomputeModules(RecomputeModules::MLP | RecomputeModules::MLA_UP_PROJ)
    );
    // Notes that name no module leave Megatron's default.
    let mut r = row("mzoo_gb200_mxfp8_qwen3_235b");
    r.notes = Some("selective recompute of the norms".into());
    assert_eq!(case(&r).plan.recompute_modules, RecomputeModules::DEFAULT);
}

#[test]
fn qwen3_pp32_vpp3_counts_the_embedding_and_loss_in_the_split() {
    // 94 blocks on pp 32 × vpp 3: 94 does not divide into 96 chunks, 94 + 2 does — the only
    // even split Megatron builds (`--account-for-embedding/loss-in-pipeline-split`).
    let c = case(&row("mzoo_h100_Qwen3_235B_a22B_intranode_ep8_a2a_pp32"));
    assert_eq!(c.plan.pipeline_split, PipelineSplit::EmbeddingLoss);
    let m = Evaluator::new(&c.model, &c.cluster, c.options)
        .evaluate(&c.plan)
        .expect("valid and fits");
    assert!(m.memory_peak_bytes <= 80.0 * autoplan_memory::GIB);
    // pp 8 × vpp 4 (96 chunks of 3 slots) likewise; a row whose blocks divide keeps blocks.
    let c = case(&row("mzoo_h100_Qwen3_235B_a22B_xnode_ep32"));
    assert_eq!(c.plan.pipeline_split, PipelineSplit::EmbeddingLoss);
    let c = case(&row("dsv3_gb200_guide_baseline"));
    assert_eq!(c.plan.pipeline_split, PipelineSplit::Blocks);
    // Notes naming a flag decide: here the loss alone.
    let mut r = row("mzoo_h100_Qwen3_235B_a22B_intranode_ep8_a2a_pp32");
    r.notes = Some("--account-for-loss-in-pipeline-split".into());
    assert_eq!(case(&r).plan.pipeline_split, PipelineSplit::Loss);
}

/// Llama 3 405B ran "Interleaved PP with custom schedule (V stages per rank; V not given)": the
/// case prices it interleaved at the depth the model admits and prices fastest, never 1F1B.
/// Every other depth is rejected (it does not fit or does not divide) or no faster.
#[test]
fn an_interleaved_row_without_its_depth_takes_the_fastest_admitted_one() {
    let r = row("llama3_405b_8192gpu_seq8192");
    assert!(r.vpp.is_none());
    let c = case(&r);
    assert_eq!(c.plan.schedule, Schedule::Interleaved);
    let ev = Evaluator::new(&c.model, &c.cluster, c.options);
    let chosen = ev
        .evaluate(&c.plan)
        .expect("the chosen depth runs")
        .step_time_s;
    let mut admitted = 0;
    for v in 2..=c.model.layers {
        let mut p = c.plan;
        p.vpp = v;
        p.pipeline_split = if (c.model.layers + 2).is_multiple_of(p.pp * v) {
            PipelineSplit::EmbeddingLoss
        } else {
            PipelineSplit::Blocks
        };
        if let Ok(m) = ev.evaluate(&p) {
            admitted += 1;
            assert!(
                m.step_time_s >= chosen,
                "vpp {v} is faster than {}",
                c.plan.vpp
            );
        }
    }
    assert!(admitted >= 1);
    // The rows that give their depth keep it.
    let nar = case(&row("nar21_t1_530B"));
    assert_eq!(
        (nar.plan.schedule, nar.plan.vpp),
        (Schedule::Interleaved, 3)
    );
    let one = case(&row("nar21_t1_1T"));
    assert_eq!((one.plan.schedule, one.plan.vpp), (Schedule::OneF1B, 1));
}

/// How a row's CP group exchanges K and V: the notes' words, else torchtitan's default
/// all-gather rotation, else Megatron's p2p ring.
#[test]
fn the_cp_exchange_is_the_one_the_row_or_its_framework_names() {
    use autoplan_plan::CpComm;
    assert_eq!(
        case(&row("tt_8b_cp8_seq256k")).plan.cp_comm,
        CpComm::AllGather
    );
    assert_eq!(
        case(&row("nemo2407_h100_LLAMA3-8B_8gpu")).plan.cp_comm,
        CpComm::Ring
    );
    let mut r = row("nemo2407_h100_LLAMA3-70B_64gpu");
    for (words, want) in [
        ("All-gather based CP (Llama 3).", CpComm::AllGather),
        ("CP with DeepSpeed-Ulysses.", CpComm::AllToAll),
        ("", CpComm::Ring),
    ] {
        r.notes = Some(words.to_string());
        assert_eq!(case(&r).plan.cp_comm, want, "{words}");
    }
    // The Llama 3 paper's runs all-gather K and V whatever their notes say (Dubey+24 §3.3.2):
    // its 131K-token run (Table 4: tp 8, cp 16, pp 16, dp 8 on 16,384 GPUs) read from the
    // published 8K row's source, with notes that name no exchange.
    let mut long = row("llama3_405b_8192gpu_seq8192");
    (long.num_gpus, long.cp, long.dp, long.seq_len) = (16384, Some(16), Some(8), Some(131072));
    long.global_batch = Some(128);
    long.notes = None;
    assert_eq!(case(&long).plan.cp_comm, CpComm::AllGather);
    long.source = "a long-context run".into();
    assert_eq!(case(&long).plan.cp_comm, CpComm::Ring);
}

/// One blank degree of tp, pp, dp (the other two given), or a blank cp with all three given,
/// is what the GPU count leaves: the case is the same as the row that gives it.
#[test]
fn one_blank_degree_is_what_the_gpu_count_leaves() {
    let full = row("nemo2407_h100_LLAMA3-70B_64gpu");
    let want = case(&full).plan;
    assert_eq!((want.tp, want.pp, want.cp, want.dp), (4, 4, 2, 2));
    for blank in ["tp", "pp", "dp", "cp"] {
        let mut r = full.clone();
        match blank {
            "tp" => r.tp = None,
            "pp" => r.pp = None,
            "cp" => r.cp = None,
            _ => r.dp = None,
        }
        assert_eq!(case(&r).plan, want, "{blank} blank");
    }
    // The cp read so is the model's choice, and `--explain` says so.
    let mut r = full.clone();
    r.cp = None;
    let chosen = case(&r).chosen.unwrap_or_default();
    assert!(
        chosen.starts_with("cp 2: the row leaves cp blank"),
        "{chosen}"
    );
    // A degree in the sp cell: tp's is Megatron's SP; another, with cp blank, is the cp
    // group (DeepSpeed-Ulysses writes its sequence-parallel degree so); one that is neither
    // is refused.
    let mut r = full.clone();
    (r.cp, r.sp) = (None, Some("4".into()));
    assert_eq!(case(&r).plan, want, "sp 4 = tp");
    let mut r = full.clone();
    (r.cp, r.sp) = (None, Some("2 (Ulysses)".into()));
    let c = case(&r);
    assert_eq!((c.plan.cp, c.plan.sp), (2, false));
    assert!(c
        .chosen
        .unwrap_or_default()
        .contains("sp cell gives a sequence-parallel degree"));
    let mut r = full.clone();
    (r.cp, r.sp) = (None, Some("3".into()));
    let e =
        case_of(&r, &|n| autoplan_graph::resolve_model(n).ok(), &cluster_for).expect_err("sp 3");
    assert!(
        e.reason.contains("neither tp's (4) nor cp's (2)"),
        "{}",
        e.reason
    );
    // Nothing left over: cp 1.
    let mut r = full.clone();
    (r.cp, r.dp) = (None, Some(4));
    assert_eq!(case(&r).plan.cp, 1);
    // Two blanks are not derived: the blank degrees are 1, a plan of the wrong size.
    let mut r = full.clone();
    r.tp = None;
    r.dp = None;
    let p = case(&r).plan;
    assert_eq!((p.tp, p.dp), (1, 1));
}

/// The `sp` cell's words: yes/true/on and no/false/off in any case; other wording, the era's
/// default (Megatron-Core: on with TP).
#[test]
fn the_sp_cell_is_read_in_any_case() {
    let mut r = row("nemo2407_h100_LLAMA3-70B_64gpu");
    for (cell, want) in [
        ("Yes", true),
        ("TRUE (with TP)", true),
        ("on", true),
        ("No", false),
        ("off", false),
        ("False", false),
        ("only with TP", true),
        ("", true),
    ] {
        r.sp = Some(cell.to_string());
        assert_eq!(case(&r).plan.sp, want, "{cell}");
    }
    // Wording none of the rules reads is refused, not defaulted.
    r.sp = Some("Ulysses".into());
    let e = case_of(&r, &|n| autoplan_graph::resolve_model(n).ok(), &cluster_for)
        .expect_err("unreadable");
    assert_eq!(e.column.as_deref(), Some("sp"));
}

/// Llama 3 405B's sharding cell ("FSDP (shard optimizer+grads; params not resharded after
/// fwd)") lists what it shards: the optimizer state and the gradients, ZeRO-2. The other
/// reading, a per-micro-batch gather of the stage's parameters beside the per-micro-batch
/// fp32 reduce-scatter of its gradients (Dubey+24 §3.3.4: "reduce-scatter gradients in FP32"),
/// puts more bytes on each GPU's 400 Gb/s NIC than the measured step has time for: the DP
/// collectives' time on the link alone exceeds the step the row's 430 TFLOP/s implies.
/// ZeRO-2's fits under it, and fits in memory.
#[test]
fn llama3_shards_optimizer_and_gradients_the_reading_its_network_allows() {
    use autoplan_evaluate::CommKind;
    use autoplan_plan::Zero;
    let r = row("llama3_405b_8192gpu_seq8192");
    let c = case(&r);
    assert_eq!(c.plan.zero, Zero::stage(2));
    let ev = Evaluator::new(&c.model, &c.cluster, c.options);
    let on_link = |zero: Zero| {
        let rep = ev.report(&autoplan_plan::Plan { zero, ..c.plan }).unwrap();
        let dp: f64 = rep
            .comm
            .iter()
            .filter(|x| x.kind == CommKind::Dp)
            .map(|x| x.time)
            .sum();
        (dp, rep)
    };
    let (dp2, rep2) = on_link(Zero::stage(2));
    // The measured step: the row's model TFLOP/s over the predicted, times the predicted step.
    let measured_step = rep2.metrics.step_time_s * c.predicted(&rep2.metrics) / c.measured;
    assert!((11.0..13.5).contains(&measured_step), "{measured_step}");
    let (dp3, _) = on_link(Zero::NORESHARD);
    assert!(
        dp3 > measured_step,
        "{dp3} s of DP traffic in a {measured_step} s step"
    );
    assert!(dp2 < 0.8 * measured_step, "{dp2} vs {measured_step}");
    assert!(rep2.metrics.memory_peak_bytes <= c.cluster.gpu.hbm_bytes);
}
