//! Published measured runs (`data/published_runs.csv`) turned into (model, cluster,
//! plan, options) cases, evaluated, and compared with what was measured.
//!
//! Boundary: no file IO here; [`crate::runs`] reads a file's bytes into [`PublishedRun`]s. Every assumption
//! that fills a blank cell is a rule on the row's *source* (the framework's documented
//! default), never a per-row constant; rows that cannot be expressed are skipped with the reason.

use autoplan_cluster::{Cluster, Precision};
use autoplan_graph::ModelSpec;
use autoplan_plan::{
    CpComm, Dispatcher, PipelineSplit, Plan, Recompute, RecomputeModules, Schedule, Zero,
};
use serde::{Deserialize, Serialize};

pub use crate::runs::{BestPlan, SkipKind};
use crate::{EvalOptions, Evaluator, Infeasible, Metrics};

mod domain;
mod fit;
mod profile;
mod remat;
mod summary;
mod wording;

pub use domain::OUT_OF_DOMAIN;
pub use fit::{
    fit, fit_framework, fit_leaving_sources_out, fitted_on, framework_fitted_on, FitPoint,
    FrameworkConstant, FrameworkFitPoint, GridScore, HeldOutSource, MIN_FIT_ROWS,
};
pub use profile::{row_profile, source_family, source_year};
pub use summary::group_mape;
use wording::*;

mod case;
mod hardware;
mod harness;
mod model;

use case::*;
use hardware::case_cluster;
pub use hardware::{bundled_cluster, cluster_name_for, cluster_name_of, nic_share};
use model::case_model;
pub use model::unmodelled_layers;

/// One row of `published_runs.csv` (the columns autoplan uses; blank cells are `None`).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PublishedRun {
    pub id: String,
    pub source: String,
    pub model: String,
    /// Published total parameters, billions.
    pub params_b: Option<f64>,
    pub layers: Option<u32>,
    pub hidden: Option<u32>,
    pub ffn_hidden: Option<u32>,
    pub heads: Option<u32>,
    pub kv_heads: Option<u32>,
    pub vocab: Option<u32>,
    pub seq_len: Option<u32>,
    pub moe_experts: Option<u32>,
    pub moe_topk: Option<u32>,
    pub moe_shared_experts: Option<u32>,
    pub moe_ffn_hidden: Option<u32>,
    pub gpu: String,
    pub num_gpus: u32,
    pub gpus_per_node: Option<u32>,
    /// The fabric inside a node, as the row words it (`NVLink+NVSwitch (DGX A100)`).
    pub intra_node_link: Option<String>,
    /// The network between nodes, as the row words it (`Omni-Path (4 OPA links/node)`).
    pub inter_node_link: Option<String>,
    pub tp: Option<u32>,
    pub pp: Option<u32>,
    pub dp: Option<u32>,
    pub cp: Option<u32>,
    pub ep: Option<u32>,
    pub etp: Option<u32>,
    pub vpp: Option<u32>,
    pub sp: Option<String>,
    pub micro_batch: Option<u32>,
    pub global_batch: Option<u32>,
    pub recompute: Option<String>,
    pub zero_stage: Option<String>,
    pub precision: Option<String>,
    pub measured_tflops_per_gpu: Option<f64>,
    pub measured_mfu: Option<f64>,
    pub measured_tokens_per_s_per_gpu: Option<f64>,
    pub measured_step_time_s: Option<f64>,
    pub tflops_convention: Option<String>,
    pub notes: Option<String>,
    /// The physical line of the row in its file (header = 1; 0: not read from a file).
    #[serde(skip)]
    pub line: u64,
}

/// Which measured figure a row is compared on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Figure {
    /// TFLOP/s per GPU counting model FLOPs only.
    ModelTflops,
    /// TFLOP/s per GPU counting recomputed FLOPs too.
    HardwareTflops,
    Mfu,
    /// A utilisation counting recomputed FLOPs too (hardware FLOPs utilisation): a row's
    /// `measured_mfu` under a hardware convention (GLM-130B's "43.3% HFU", Zeng+22 §3).
    Hfu,
    TokensPerSPerGpu,
    StepTimeS,
}

impl Figure {
    pub fn name(self) -> &'static str {
        match self {
            Figure::ModelTflops => "model TFLOP/s/GPU",
            Figure::HardwareTflops => "hw TFLOP/s/GPU",
            Figure::Mfu => "MFU",
            Figure::Hfu => "HFU",
            Figure::TokensPerSPerGpu => "tokens/s/GPU",
            Figure::StepTimeS => "step time s",
        }
    }

    /// The figure in `m`.
    pub fn of(&self, m: &Metrics) -> f64 {
        match self {
            Figure::ModelTflops => m.tflops_per_gpu,
            Figure::HardwareTflops => m.hw_tflops_per_gpu,
            Figure::Mfu => m.mfu,
            Figure::Hfu => m.hfu,
            Figure::TokensPerSPerGpu => m.tokens_per_s_per_gpu,
            Figure::StepTimeS => m.step_time_s,
        }
    }
}

/// A row turned into something the evaluator can score.
#[derive(Debug, Clone)]
pub struct Case {
    pub id: String,
    pub model: ModelSpec,
    pub cluster: Cluster,
    pub plan: Plan,
    pub options: EvalOptions,
    pub figure: Figure,
    pub measured: f64,
    /// The row names its recompute, or its era has a default (`era_recompute`: Megatron-LM
    /// 2020–22 and Megatron-DeepSpeed full, torchtitan its `selective`). Else a blank is evaluated
    /// without, or with the least that fits where the plan does not fit without
    /// (`unstated_recompute`, [`recompute_known`]).
    pub recompute_stated: bool,
    /// The framework profile the row ran under ([`row_profile`]'s name).
    pub framework: &'static str,
    /// The row's source family ([`source_family`]).
    pub source: String,
    /// A plan value the row does not give that the model chose for it, and why (an interleaved
    /// schedule's depth: [`case_of`]); `validate --explain` prints it.
    pub chosen: Option<String>,
    /// The peak (FLOP/s) the row's MFU is a share of (`mfu_peak`): the GPU's dense 16-bit
    /// peak unless the row's convention names its low-precision one.
    pub mfu_peak: f64,
}

impl Case {
    /// The model's value of the row's figure in the row's convention: an MFU is the model
    /// FLOP rate over [`Case::mfu_peak`], which for an FP8 or FP4 run is not the evaluator's
    /// MFU (a share of the training precision's own peak).
    pub fn predicted(&self, m: &Metrics) -> f64 {
        match self.figure {
            Figure::Mfu => m.tflops_per_gpu * 1e12 / self.mfu_peak,
            Figure::Hfu => m.hw_tflops_per_gpu * 1e12 / self.mfu_peak,
            f => f.of(m),
        }
    }
}

/// The peak a row's MFU divides by. The field quotes MFU against the dense BF16 (FP16) peak
/// whatever the run's GEMM precision: every public row giving both TFLOP/s and MFU implies it
/// (311–319 TFLOP/s on A100, 978–1000 on H100: Narayanan+21, Megatron-Core's scaling table,
/// MegaScale, Llama 3's "BF16 MFU", llm-foundry), and Llama 3 names it. A row whose
/// `tflops_convention` names its own low-precision peak ("mfu vs fp8 peak") is read so.
/// (An MFU is read only where the row gives neither tokens/s nor TFLOP/s: `case_figure`.)
fn mfu_peak(r: &PublishedRun, gpu: &autoplan_cluster::Gpu, precision: Precision) -> f64 {
    let conv = r
        .tflops_convention
        .as_deref()
        .unwrap_or("")
        .to_ascii_lowercase();
    // The convention must name a peak ("MFU vs FP8 peak"), not merely the run's precision.
    let own = conv.contains("peak")
        && ["fp8", "fp4", "low-precision", "low precision"]
            .iter()
            .any(|w| conv.contains(w));
    let p = if own { precision } else { Precision::Bf16 };
    autoplan_cost::compute::peak_flops(gpu, p)
}

/// The outcome of one row.
#[derive(Debug, Clone, Serialize)]
pub struct RowResult {
    pub id: String,
    pub figure: Figure,
    pub measured: f64,
    pub predicted: f64,
    /// (predicted − measured) / measured.
    pub error: f64,
    pub plan: String,
    pub memory_peak_gib: f64,
    pub step_time_s: f64,
    /// The GPU architecture of the row's cluster (whose efficiency constants price it).
    pub gpu_arch: autoplan_cluster::GpuArch,
    /// The framework profile the row ran under.
    pub framework: &'static str,
    /// The row's source family.
    pub source: String,
}

/// MAPE of the rows of one framework profile or source family.
#[derive(Debug, Clone, Serialize)]
pub struct GroupSummary {
    pub name: String,
    pub rows: usize,
    pub mape: f64,
}

/// MAPE of the rows of one GPU architecture (the unit `validate --fit` calibrates).
#[derive(Debug, Clone, Serialize)]
pub struct ArchSummary {
    pub arch: autoplan_cluster::GpuArch,
    pub rows: usize,
    pub mape: f64,
}

/// A scored row outside the calibrated domain, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Outlier {
    #[serde(flatten)]
    pub row: RowResult,
    pub reason: &'static str,
}

/// A row that was not scored, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    pub id: String,
    pub reason: String,
    /// Data missing or unreadable, or a limit of the tool (see [`SkipKind`]).
    pub kind: SkipKind,
    /// The row's line in its file.
    pub line: Option<u64>,
    /// The column whose cell is missing or unreadable, where one is.
    pub column: Option<String>,
}

/// Everything `autoplan validate` prints.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Validation {
    /// Rows inside the calibrated domain (the MAPE is over these).
    pub rows: Vec<RowResult>,
    /// Scored rows outside it, with the reason (see [`OUT_OF_DOMAIN`]).
    pub outliers: Vec<Outlier>,
    pub skipped: Vec<Skipped>,
    /// Rows giving no parallel degrees, scored with the plan the search finds (not in the MAPE).
    pub best_plan: Vec<BestPlan>,
    /// Mean absolute percentage error over `rows`, as a fraction.
    pub mape: f64,
    /// The row with the largest |error|.
    pub worst: Option<String>,
    pub worst_error: f64,
    /// MAPE per GPU architecture, in the order the architectures first appear.
    pub by_gpu: Vec<ArchSummary>,
    /// MAPE per framework profile, in the order they first appear.
    pub by_framework: Vec<GroupSummary>,
    /// MAPE per source family, in the order they first appear.
    pub by_source: Vec<GroupSummary>,
}

/// Source families whose software defaults fill blank cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Era {
    /// Megatron-LM 2020–2022 (`meg20_`, `nar21_`, `kor22_`): unfused attention, fp16 grads.
    Megatron2021,
    /// Megatron-Core / NeMo / Megatron-Bridge / ModelZoo (2024–2025): FlashAttention, SP with TP,
    /// distributed optimizer, TP-comm overlap.
    MegatronCore,
    /// DeepSpeed stacks (Megatron-DeepSpeed 2021–22: MT-NLG, BLOOM, GPT-NeoX; later DeepSpeed
    /// rows, `deepspeed_profile`): full recompute where blank, as Megatron-LM of the time and
    /// Megatron-DeepSpeed's example scripts (`--checkpoint-activations`); ZeRO-1 where blank
    /// (DeepSpeed's ZeRO-1 / BF16 optimizer); sequence parallelism only where stated.
    MegatronDeepSpeed,
    /// torchtitan (FSDP2, compiled or eager): its own defaults for the micro-batch,
    /// `selective`, resharding and interleaving (`case.rs`).
    Torchtitan,
    /// Every other stack whose rows give their sharding (llm-foundry).
    Fsdp,
    /// MaxText (JAX/XLA): its `base.yml` defaults (`CostProfile::MAXTEXT`'s source) fill blank
    /// cells: full remat, FSDP over a node's GPUs and data parallelism across nodes, the
    /// per-device batch as one micro-batch, no sequence parallelism, bf16.
    MaxText,
}

/// The blank-cell defaults of a row's profile ([`row_profile`]).
fn era(p: &autoplan_plan::framework::CostProfile) -> Era {
    use autoplan_plan::framework::CostProfile as P;
    // By name: a row's profile may be a variant of one (`torchtitan_sdpa`'s kernel, a fitted
    // constant under `--fit-framework`).
    let is = |of: &[P]| of.iter().any(|q| q.name == p.name);
    if is(&[
        P::MEGATRON_LM_2020,
        P::MEGATRON_LM_2021,
        P::MEGATRON_LM_2022,
    ]) {
        Era::Megatron2021
    } else if is(&[
        P::MEGATRON_DEEPSPEED_2022,
        P::DEEPSPEED,
        P::DEEPSPEED_MOE_2023,
    ]) {
        Era::MegatronDeepSpeed
    } else if is(&[P::TORCHTITAN, P::TORCHTITAN_EAGER]) {
        Era::Torchtitan
    } else if is(&[P::LLM_FOUNDRY]) {
        Era::Fsdp
    } else if is(&[P::MAXTEXT]) {
        Era::MaxText
    } else {
        Era::MegatronCore
    }
}

/// A row autoplan cannot express (a [`SkipKind::ToolLimit`]; the rows lacking data are
/// found before, by [`crate::runs::missing_fact`]).
fn skip(id: &str, reason: impl Into<String>) -> Skipped {
    Skipped {
        id: id.to_string(),
        reason: reason.into(),
        kind: SkipKind::ToolLimit,
        line: None,
        column: None,
    }
}

/// A row whose cell `column` is there but says what no reading rule reads (a
/// [`SkipKind::Unreadable`] skip naming the column).
fn unreadable(id: &str, column: &str, reason: impl Into<String>) -> Skipped {
    Skipped {
        kind: SkipKind::Unreadable,
        column: Some(column.into()),
        ..skip(id, reason)
    }
}

/// Build the case of one row, or say why it cannot be expressed. `resolve_model` and
/// `cluster_for` are the bundled-model and bundled-cluster lookups (injected: the CLI passes
/// the bundled libraries; tests may pass others); `cluster_for` gets the name of the row's
/// bundled cluster ([`cluster_name_of`]), its GPU count and GPUs per node.
pub fn case_of(
    r: &PublishedRun,
    resolve_model: &dyn Fn(&str) -> Option<ModelSpec>,
    cluster_for: &dyn Fn(&str, u32, u32) -> Option<Cluster>,
) -> Result<Case, Skipped> {
    let profile = row_profile(r);
    let era = era(&profile);
    let model = case_model(r, era, resolve_model)?;
    let cluster = case_cluster(r, cluster_for)?;
    // A precision the row's GPU cannot train in (MXFP8 or NVFP4 off Blackwell, an FP8 recipe on
    // a GPU without FP8 tensor cores) is a row that contradicts itself, not one to price at
    // another format's rate.
    if let Err(why) = cluster
        .gpu
        .check_training_precision(model.training.precision)
    {
        return Err(unreadable(&r.id, "precision", why));
    }
    let plan = case_plan(r, era, &profile, &model)?;
    let options = case_options(r, &profile, &model);
    let (plan, options) = with_harness(r, &model, &cluster, plan, options);
    // What the model chose where the row is silent, in the order `--explain` names it.
    let mut chosen: Vec<String> = case::unstated_cp_note(r).into_iter().collect();
    let mut take = |found: Option<(Plan, String)>, plan: Plan| {
        found.map_or(plan, |(p, why)| {
            chosen.push(why);
            p
        })
    };
    let plan = take(
        unstated_micro_batch(r, era, &profile, &model, &cluster, options, plan),
        plan,
    );
    let plan = take(
        nemo_recipe_interleaving(r, &model, plan)
            .or_else(|| unstated_interleaving(r, era, &model, &cluster, options, plan)),
        plan,
    );
    let plan = take(nvidia_deepseek_v3_layout(r, &model, plan), plan);
    let (figure, measured) = case_figure(r)?;
    let rc = r.recompute.as_deref().unwrap_or("");
    let recompute_stated =
        matches!(recompute_cell(rc), Ok(Some(_))) || era_recompute(era).is_some();
    let unstated = (!recompute_stated)
        .then(|| {
            let modules = profile.name == autoplan_plan::framework::CostProfile::MEGATRON_CORE.name
                && harness::takes_recompute_modules(r);
            unstated_recompute(&model, &cluster, options, plan, modules)
        })
        .flatten();
    let plan = take(unstated, plan);
    let chosen = (!chosen.is_empty()).then(|| chosen.join("; "));
    let mfu_peak = mfu_peak(r, &cluster.gpu, model.training.precision);
    Ok(Case {
        id: r.id.clone(),
        model,
        cluster,
        plan,
        options,
        figure,
        measured,
        recompute_stated,
        framework: profile.name,
        source: source_family(&r.id),
        chosen,
        mfu_peak,
    })
}

/// Evaluate one case.
pub fn score(case: &Case) -> Result<RowResult, Infeasible> {
    let ev = Evaluator::new(&case.model, &case.cluster, case.options);
    let m = ev.evaluate(&case.plan)?;
    let predicted = case.predicted(&m);
    Ok(RowResult {
        id: case.id.clone(),
        figure: case.figure,
        measured: case.measured,
        predicted,
        error: (predicted - case.measured) / case.measured,
        plan: plan_summary(&case.plan),
        memory_peak_gib: m.memory_peak_bytes / crate::GIB,
        step_time_s: m.step_time_s,
        gpu_arch: case.cluster.gpu.arch,
        framework: case.framework,
        source: case.source.clone(),
    })
}

fn plan_summary(p: &Plan) -> String {
    let mut s = format!("tp={},pp={},dp={}", p.tp, p.pp, p.dp);
    if p.cp > 1 {
        s += &format!(",cp={}", p.cp);
        if p.cp_comm != CpComm::Ring {
            s += &format!(",cp_comm={}", autoplan_plan::knob::cp_comm_name(p.cp_comm));
        }
    }
    if p.ep > 1 {
        s += &format!(",ep={}", p.ep);
    }
    if p.moe_tp > 1 {
        s += &format!(",moe_tp={}", p.moe_tp);
    }
    if p.vpp > 1 {
        s += &format!(",vpp={}", p.vpp);
    }
    s += &format!(
        ",mbs={},sp={},recompute={},zero={}",
        p.mbs,
        p.sp,
        autoplan_plan::parse::recompute_label(p.recompute, p.recompute_modules),
        p.zero
    );
    if let Some(n) = p.recompute_layers {
        s += &format!(",recompute_layers={n}");
    }
    if p.offload_optimizer > 0 {
        s += &format!(
            ",offload_optimizer={}",
            f64::from(p.offload_optimizer) / 100.0
        );
    }
    if p.offload_params {
        s += ",offload_params=on";
    }
    s
}

/// Whether the recompute of case `c` is the row's own or its era's default: not chosen by the
/// model for a row that gives none (`unstated_recompute` in `validate/case.rs`), nor a row
/// whose plan fits neither without recompute nor with it ([`recompute_not_given`]). Only such
/// rows calibrate constants (`fit`).
pub fn recompute_known(c: &Case) -> bool {
    c.recompute_stated || (c.plan.recompute == Recompute::None && recompute_not_given(c).is_none())
}

/// The skip reason of a row that gives no recompute and whose plan does not fit without one,
/// nor with every block recomputed (`unstated_recompute` in `validate/case.rs` finds the least
/// recompute that fits for every other such row). `None` for any other row (memory does not
/// depend on the efficiency constants, so `fit` drops the same rows).
pub fn recompute_not_given(c: &Case) -> Option<String> {
    if c.recompute_stated || c.plan.recompute != Recompute::None {
        return None;
    }
    let ev = Evaluator::new(&c.model, &c.cluster, c.options);
    let oom = match ev.evaluate(&c.plan) {
        Err(e @ Infeasible::OutOfMemory { .. }) => e,
        _ => return None,
    };
    let full = Plan {
        recompute: Recompute::Full,
        ..c.plan
    };
    let with_full = match ev.evaluate(&full) {
        Err(e) => format!("; with every block recomputed: {e}"),
        Ok(_) => String::new(),
    };
    Some(format!(
        "recompute not given, and without recompute the published plan is {oom}{with_full}"
    ))
}

/// Validate every row: score what can be expressed, skip the rest with the reason. A row that
/// gives no parallel degrees is skipped (data missing); [`validate_searching`] scores it
/// against the best plan found instead.
pub fn validate(
    runs: &[PublishedRun],
    resolve_model: &dyn Fn(&str) -> Option<ModelSpec>,
    cluster_for: &dyn Fn(&str, u32, u32) -> Option<Cluster>,
) -> Validation {
    validate_searching(runs, resolve_model, cluster_for, None)
}

/// A search for the best plan of a case (its model, cluster and options; its plan is not the
/// row's), or why none was found.
pub type BestPlanSearch<'a> = &'a dyn Fn(&Case) -> Result<Plan, String>;

/// [`validate`], with `best_plan` finding the plan of the rows that give no parallel degrees
/// (the search crate's, passed in by the caller: it depends on this crate).
pub fn validate_searching(
    runs: &[PublishedRun],
    resolve_model: &dyn Fn(&str) -> Option<ModelSpec>,
    cluster_for: &dyn Fn(&str, u32, u32) -> Option<Cluster>,
    best_plan: Option<BestPlanSearch>,
) -> Validation {
    let mut rows = Vec::new();
    let mut outliers = Vec::new();
    let mut skipped = Vec::new();
    let mut best = Vec::new();
    let on_line = |mut s: Skipped, r: &PublishedRun| {
        s.line = Some(r.line);
        s
    };
    for r in runs {
        if let Some(s) = crate::runs::missing_fact(r) {
            skipped.push(s);
            continue;
        }
        let case = case_of(r, resolve_model, cluster_for);
        if !crate::runs::degrees_given(r) {
            match case.and_then(|c| best_plan_row(&c, best_plan)) {
                Ok(row) => best.push(BestPlan { row, line: r.line }),
                Err(s) => skipped.push(on_line(s, r)),
            }
            continue;
        }
        match case {
            Err(s) => skipped.push(on_line(s, r)),
            Ok(c) => match score(&c) {
                Ok(row) => match OUT_OF_DOMAIN.iter().find(|(id, _)| *id == row.id) {
                    Some((_, why)) => outliers.push(Outlier { row, reason: why }),
                    None => rows.push(row),
                },
                Err(e) => match recompute_not_given(&c) {
                    Some(why) => skipped.push(Skipped {
                        kind: SkipKind::DataMissing,
                        column: Some("recompute".into()),
                        ..on_line(skip(&r.id, why), r)
                    }),
                    None => skipped.push(on_line(
                        skip(&r.id, format!("published plan rejected: {e}")),
                        r,
                    )),
                },
            },
        }
    }
    Validation {
        rows,
        outliers,
        skipped,
        best_plan: best,
        ..Validation::default()
    }
    .summarised()
}

/// Row `c` scored with the plan `search` finds for it; without a search, skipped: the row
/// gives no degrees.
fn best_plan_row(c: &Case, search: Option<BestPlanSearch>) -> Result<RowResult, Skipped> {
    let Some(search) = search else {
        return Err(Skipped {
            kind: SkipKind::DataMissing,
            column: Some("tp|pp|dp".into()),
            ..skip(&c.id, "tp, pp, dp blank: parallel degrees not given")
        });
    };
    let plan = search(c).map_err(|why| skip(&c.id, format!("no best plan found: {why}")))?;
    score(&Case { plan, ..c.clone() })
        .map_err(|e| skip(&c.id, format!("the best plan found does not run: {e}")))
}
