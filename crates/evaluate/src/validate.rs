//! Published measured runs (`data/published_runs.csv`) turned into (model, cluster,
//! plan, options) cases, evaluated, and compared with what was measured.
//!
//! Boundary: no file IO here; [`crate::runs`] reads a file's bytes into [`PublishedRun`]s. Every assumption
//! that fills a blank cell is a rule on the row's *source* (the framework's documented
//! default), never a per-row constant; rows that cannot be expressed are skipped with the reason.

use autoplan_cluster::{Cluster, Precision};
use autoplan_graph::{Family, ModelSpec, Moe, Optimizer, Positions, Routing};
use autoplan_plan::{
    CpComm, Dispatcher, PipelineSplit, Plan, Recompute, RecomputeModules, Schedule, Zero,
};
use serde::{Deserialize, Serialize};

pub use crate::runs::{BestPlan, SkipKind};
use crate::{EvalOptions, Evaluator, Infeasible, Metrics};

mod domain;
mod fit;
mod profile;
mod summary;
mod wording;

pub use domain::OUT_OF_DOMAIN;
pub use fit::{
    fit, fit_framework, fitted_on, framework_fitted_on, FitPoint, FrameworkFitPoint, GridScore,
};
pub use profile::{row_profile, source_family, source_year};
pub use summary::group_mape;
use wording::*;

mod case;
mod hardware;
mod harness;

use case::*;
use hardware::case_cluster;
pub use hardware::{bundled_cluster, cluster_name_for, cluster_name_of};

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
}

/// The blank-cell defaults of a row's profile ([`row_profile`]).
fn era(p: &autoplan_plan::framework::CostProfile) -> Era {
    use autoplan_plan::framework::CostProfile as P;
    if *p == P::MEGATRON_LM_2020 || *p == P::MEGATRON_LM_2021 || *p == P::MEGATRON_LM_2022 {
        Era::Megatron2021
    } else if *p == P::MEGATRON_DEEPSPEED_2022 || *p == P::DEEPSPEED || *p == P::DEEPSPEED_MOE_2023
    {
        Era::MegatronDeepSpeed
    } else if *p == P::TORCHTITAN || *p == P::TORCHTITAN_EAGER {
        Era::Torchtitan
    } else if *p == P::LLM_FOUNDRY {
        Era::Fsdp
    } else {
        Era::MegatronCore
    }
}

/// Bundled model of a row's `model` cell, by name or alias (`GPT-3 175B (MLPerf reference)`,
/// `LLAMA3.1_405B`, `DeepSeekV3`...: `autoplan_graph::bundled_model_for`).
fn bundled_name(model: &str) -> Option<&'static str> {
    autoplan_graph::bundled_model_for(model)
}

/// A model from the row's own columns, built within the family its name points to
/// (`Family::of_model_name`; Llama-style when the name names none): BLOOM with ALiBi and its
/// embedding norm, GPT-NeoX with parallel blocks, MPT without biases... An MoE family without
/// MoE columns, or MoE columns under a dense family name, take the Llama-style MoE layout.
/// `Err((why, column))`: `column` names the blank cell when the row lacks a fact the model
/// needs (a data-missing skip), `None` when autoplan cannot build what the row gives.
fn model_from_columns(r: &PublishedRun) -> Result<ModelSpec, (String, Option<&'static str>)> {
    let missing = [
        ("layers", r.layers.is_none()),
        ("hidden", r.hidden.is_none()),
        ("heads", r.heads.is_none()),
        ("seq_len", r.seq_len.is_none()),
    ];
    let missing: Vec<&str> = missing.iter().filter(|m| m.1).map(|m| m.0).collect();
    if let Some(&first) = missing.first() {
        return Err((
            format!(
                "model `{}` is not bundled and the row does not give its architecture ({} not given)",
                r.model,
                missing.join(", ")
            ),
            Some(first),
        ));
    }
    let (layers, hidden, heads, seq) = (
        r.layers.unwrap_or(0),
        r.hidden.unwrap_or(0),
        r.heads.unwrap_or(0),
        r.seq_len.unwrap_or(0),
    );
    let named = Family::of_model_name(&r.model);
    let family = match (named, r.moe_experts.is_some()) {
        (Some(f), true) if f.is_moe() => f,
        (Some(f), false) if !f.is_moe() => f,
        _ if r.moe_experts.is_some() => Family::Mixtral,
        _ => Family::Llama,
    };
    // An MoE expert's width when not given: the dense width, as the shape's default (4h).
    let ffn4 = hidden.saturating_mul(4);
    let moe = r.moe_experts.map(|e| Moe {
        experts: e,
        top_k: r.moe_topk.unwrap_or(1),
        shared_experts: r.moe_shared_experts.unwrap_or(0),
        expert_ffn_hidden: r.moe_ffn_hidden.unwrap_or(ffn4),
        shared_ffn_hidden: r.moe_ffn_hidden.unwrap_or(ffn4),
        first_dense_layers: 0,
        routing: Routing::TopK,
        capacity_factor: None,
        load_imbalance: 1.0,
        groups: 1,
        group_top_k: 1,
    });
    let shape = autoplan_graph::Shape {
        layers,
        hidden,
        heads,
        kv_heads: r.kv_heads,
        ffn_hidden: r.ffn_hidden,
        vocab: r.vocab,
        seq_len: seq,
        moe,
    };
    // A dense model whose name names no family is built Llama-style (a gated MLP); where
    // that misses the row's published size and GPT's ungated GELU MLP meets it, the row's
    // model is GPT-style (Falcon-, Cerebras-GPT-, InternLM-1-like shapes: `ffn_hidden` =
    // 4·hidden in two matrices, not three). The size decides, as it does for tying below.
    let size = r.params_b.filter(|p| p.is_finite() && *p > 0.0);
    let build = |f: Family| ModelSpec::from_shape(&r.model, f, &shape);
    let family = match size {
        Some(p) if named.is_none() && family == Family::Llama => {
            let meets = |f: Family| build(f).is_ok_and(|m| sized(m, p).is_some());
            if !meets(Family::Llama) && meets(Family::Gpt) {
                Family::Gpt
            } else {
                family
            }
        }
        _ => family,
    };
    let model = build(family).map_err(|e| {
        // A family without a fixed vocabulary needs the row's `vocab`: a fact not given.
        let column = matches!(e, autoplan_graph::ShapeError::NoVocab(_)).then_some("vocab");
        (
            format!("{} shape from the row's columns: {e}", family.name()),
            column,
        )
    })?;
    // Whether the output layer shares the embedding is not a column, and sources of one family
    // differ (Megatron-LM ties by default, `--untie-embeddings-and-output-weights` unties).
    // The row's published size decides it when exactly one of the two matches it: e.g.
    // Megatron-Core's H100 scaling table (mcore08_*: 12·l·h² + 2·V·h at V = 131072).
    Ok(match size {
        Some(p) => sized(model.clone(), p).unwrap_or(model),
        None => model,
    })
}

/// `m` as built, or with its output layer tied the other way, whichever has the published
/// size `p` (billions) within [`params_tolerance`] — the built tying first; `None` when
/// neither has.
fn sized(m: ModelSpec, p: f64) -> Option<ModelSpec> {
    let fits = |m: &ModelSpec| (m.total_params() / 1e9 / p - 1.0).abs() <= params_tolerance(p);
    if fits(&m) {
        return Some(m);
    }
    let other = ModelSpec {
        tied_embeddings: !m.tied_embeddings,
        ..m
    };
    fits(&other).then_some(other)
}

/// The largest relative difference between the built model's parameters and the row's
/// `params_b` accepted (issue 16's bound), at least: a different architecture is far outside
/// it (BLOOM-176B built Llama-style: 237B, +35%; MT-NLG 530B: 707B, +33%). A size published
/// with few digits is wider ([`params_tolerance`]).
const PARAMS_TOLERANCE: f64 = 0.03;

/// What a built model may differ from a published size `p` (billions) by: a published size is
/// rounded to its last digit, so "1.7" is anything from 1.65 to 1.75 (Narayanan+21's "1.7B"
/// GPT has 1.652B; Megatron-Core's "GPT 1.7B", counted 12·l·h² + 2·V·h, 1.745B), and the row's
/// columns leave out biases, norms and position tables (1% more); never below
/// [`PARAMS_TOLERANCE`]. The digits are those of the cell's shortest decimal form.
fn params_tolerance(p: f64) -> f64 {
    let text = format!("{p}");
    let decimals = text.split_once('.').map_or(0, |(_, d)| d.len());
    let half_unit = 0.5 * 10f64.powi(-(decimals.min(12) as i32));
    PARAMS_TOLERANCE.max(half_unit / p + 0.01)
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
    // A precision the row's GPU cannot train in (MXFP8 or NVFP4 off Blackwell) is a row that
    // contradicts itself, not one to price at another format's rate.
    if let Err(why) = cluster
        .gpu
        .check_training_precision(model.training.precision)
    {
        return Err(unreadable(&r.id, "precision", why));
    }
    let plan = case_plan(r, era, &profile, &model)?;
    let options = case_options(r, &profile, &model);
    let (plan, options) = with_harness(r, &model, &cluster, plan, options);
    let (plan, chosen) = nemo_recipe_interleaving(r, &model, plan)
        .or_else(|| unstated_interleaving(r, era, &model, &cluster, options, plan))
        .map_or((plan, None), |(p, why)| (p, Some(why)));
    let (figure, measured) = case_figure(r)?;
    let rc = r.recompute.as_deref().unwrap_or("");
    let recompute_stated =
        matches!(recompute_cell(rc), Ok(Some(_))) || era_recompute(era).is_some();
    let unstated = (!recompute_stated)
        .then(|| unstated_recompute(&model, &cluster, options, plan))
        .flatten();
    let (plan, chosen) = match (unstated, chosen) {
        // Both choices are the model's: `--explain` names each.
        (Some((p, why)), Some(c)) => (p, Some(format!("{c}; {why}"))),
        (Some((p, why)), None) => (p, Some(why)),
        (None, chosen) => (plan, chosen),
    };
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

/// The layer kind autoplan cannot price that row `r`'s model has, by its name or notes:
/// state-space (Mamba) or linear-attention (Gated DeltaNet, lightning attention, RWKV) layers,
/// which hybrid models interleave with attention (Nemotron-H, Jamba, Zamba, Falcon-H1,
/// Qwen3-Next, MiniMax-01). The row's columns describe only its transformer part.
pub fn unmodelled_layers(r: &PublishedRun) -> Option<&'static str> {
    let squash = |t: &str| -> String {
        t.chars()
            .filter(char::is_ascii_alphanumeric)
            .collect::<String>()
            .to_ascii_lowercase()
    };
    let name = squash(&r.model);
    let notes = r.notes.as_deref().unwrap_or("").to_ascii_lowercase();
    const HYBRIDS: [&str; 7] = [
        "nemotronh",
        "jamba",
        "zamba",
        "falconh1",
        "qwen3next",
        "minimaxtext01",
        "minimaxm1",
    ];
    const STATE_SPACE: [&str; 3] = ["mamba", "rwkv", "hyena"];
    const LINEAR_ATTENTION: [&str; 5] = [
        "linear attention",
        "linear-attention",
        "deltanet",
        "lightning attention",
        "lightning-attention",
    ];
    if STATE_SPACE
        .iter()
        .any(|w| name.contains(w) || notes.contains(w))
    {
        Some("a state-space (Mamba-style) model")
    } else if LINEAR_ATTENTION.iter().any(|w| notes.contains(w)) || name.contains("deltanet") {
        Some("a linear-attention hybrid")
    } else if HYBRIDS.iter().any(|w| name.contains(w)) {
        Some("a hybrid of attention and recurrent or linear-attention layers")
    } else {
        None
    }
}

/// The model of row `r`: a bundled one whose shape agrees with the row, else the row's
/// columns; with the row's sequence length, global batch, vocabulary and precision.
fn case_model(
    r: &PublishedRun,
    era: Era,
    resolve_model: &dyn Fn(&str) -> Option<ModelSpec>,
) -> Result<ModelSpec, Skipped> {
    let id = r.id.as_str();
    // The model: a bundled one whose shape agrees with the row, else the row's columns.
    let bundled = bundled_name(&r.model).and_then(resolve_model).filter(|m| {
        r.layers.is_none_or(|l| l == m.layers)
            && r.hidden.is_none_or(|h| h == m.hidden)
            && r.heads.is_none_or(|a| a == m.heads)
    });
    let mut model = match bundled {
        Some(m) => m,
        None => model_from_columns(r).map_err(|(why, column)| match column {
            Some(c) => Skipped {
                kind: SkipKind::DataMissing,
                column: Some(c.to_string()),
                ..skip(id, why)
            },
            None => skip(id, why),
        })?,
    };
    // After the data checks (a row lacking a fact is data missing first, docs/validation.md).
    if let Some(kind) = unmodelled_layers(r) {
        return Err(skip(
            id,
            format!(
                "{kind}: autoplan's layers are attention (full, sliding-window, MLA), dense \
                 MLPs and MoE; a hybrid's recurrent or linear-attention layers are not priced, \
                 and pricing them as attention would misstate the run"
            ),
        ));
    }
    // The Megatron-Bridge DeepSeek-V3 rows say whether the run had its MTP module ("w/o MTP",
    // "w/ MTP"); the bundled model has DeepSeek-V3's one.
    if r.notes
        .as_deref()
        .is_some_and(|n| n.to_ascii_lowercase().contains("w/o mtp"))
    {
        model.mtp_modules = 0;
    }
    match r.seq_len {
        Some(s) => model.training.seq_len = s,
        None => return Err(skip(id, "sequence length not given")),
    }
    if model.positions == Positions::Learned {
        model.max_positions = model.max_positions.max(model.training.seq_len);
    }
    match r.global_batch {
        Some(b) => model.training.global_batch = b,
        None => return Err(skip(id, "global batch not given")),
    }
    if let Some(v) = r.vocab {
        model.vocab = v;
    }
    // Never score a row on a different model: the built parameters must match the row's.
    if let Some(p) = r.params_b.filter(|p| p.is_finite() && *p > 0.0) {
        let built = model.total_params() / 1e9;
        if (built / p - 1.0).abs() > params_tolerance(p) {
            let untied = if model.tied_embeddings {
                let head = model.vocab as f64 * model.hidden as f64 / 1e9;
                format!(" ({:.2}B with an untied output layer)", built + head)
            } else {
                String::new()
            };
            return Err(skip(
                id,
                format!(
                    "built {} shape of `{}` has {built:.2}B params{untied}, row says {p}B \
                     (more than {:.0}% apart)",
                    model.family.name(),
                    r.model,
                    params_tolerance(p) * 100.0
                ),
            ));
        }
    }
    let cell = r.precision.as_deref().unwrap_or("");
    model.training.precision = match row_precision(cell, r.notes.as_deref().unwrap_or("")) {
        Ok(Some(p)) => p,
        // Blank precision: the source's TFLOP/s ÷ MFU implies the 16-bit dense peak.
        Ok(None) if era == Era::Megatron2021 => Precision::Fp16,
        Ok(None) => Precision::Bf16,
        Err(()) => return Err(skip(id, format!("precision `{cell}` not modelled"))),
    };
    // Adam moments kept in BF16, where the row says so ("BF16 optimizer moments", "bf16
    // optimizer states"): DeepSeek-V3 report §3.3.3, Megatron-Core's precision-aware optimizer
    // (`--exp-avg-dtype/--exp-avg-sq-dtype bf16`, frameworks.md §1.9).
    let text = format!("{cell} {}", r.notes.as_deref().unwrap_or("")).to_ascii_lowercase();
    if model.training.optimizer == Optimizer::Adam
        && ["bf16 optimizer", "bf16 moments", "bf16 adam"]
            .iter()
            .any(|w| text.contains(w))
    {
        model.training.optimizer = Optimizer::AdamBf16Moments;
    }
    Ok(model)
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
