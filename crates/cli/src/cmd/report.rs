//! `autoplan report --model M --cluster C [--plan P | search options] -o plan.html`, and the
//! documents behind `search --html` and `validate --html`: one self-contained HTML file drawn
//! by `autoplan-report` (docs/report.md).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use autoplan_evaluate::validate::{PublishedRun, Validation};
use autoplan_evaluate::{EvalOptions, Evaluator, Metrics};
use autoplan_plan::Plan;
use autoplan_report::{Cell, Document, PlanView, Table, ValidationPoint, ValidationView};
use autoplan_search::space::{recompute_name, schedule_name};
use autoplan_search::{resolve_space, search_case_for, Outcome, SearchOptions, MAX_TOP_K};

use crate::exit::Infeasible;
use crate::fmt::GIB;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A bundled model name (`autoplan models`), a model TOML, or a Hugging Face config.json.
    #[arg(long)]
    pub model: String,
    /// A bundled cluster name (`autoplan clusters`) or a cluster TOML.
    #[arg(long)]
    pub cluster: String,
    /// Report this plan (as `evaluate --plan`) instead of searching.
    #[arg(long, conflicts_with_all = ["space", "fix", "top", "threads"])]
    pub plan: Option<String>,
    /// The search space (as `search --space`).
    #[arg(long)]
    pub space: Option<String>,
    /// Fix decisions of the search (as `search --fix`).
    #[arg(long)]
    pub fix: Option<String>,
    /// How many ranked plans the report lists (as `search --top`; default 10).
    #[arg(long)]
    pub top: Option<usize>,
    /// Worker threads of the search (the report does not depend on it).
    #[arg(long)]
    pub threads: Option<usize>,
    #[command(flatten)]
    pub workload: super::Workload,
    #[command(flatten)]
    pub target: super::target::TargetArgs,
    /// The HTML file to write.
    #[arg(short = 'o', long = "out")]
    pub out: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (model, cluster) = super::load_inputs(&args.model, &args.cluster, &args.workload)?;
    let options = EvalOptions {
        memory: args.workload.memory_options(&cluster)?,
        ..EvalOptions::default()
    };
    let target = args.target.target()?;
    let caveats = super::caveats(
        &args.model,
        &args.workload,
        &cluster,
        &model,
        target.framework,
    );
    super::print_caveats(&caveats);
    let mut doc = match &args.plan {
        Some(p) => {
            let plan = Plan::parse_for_gpus(p, cluster.gpus() as u64)
                .with_context(|| format!("--plan {p:?}"))?;
            // As `evaluate`: a valid plan the framework cannot run is refused with its rule.
            if let (Ok(()), Err(refusal)) = (
                plan.check(&model, cluster.gpus()),
                target
                    .framework
                    .check_on(&plan, &model, cluster.multi_node_nvlink()),
            ) {
                return Err(Infeasible::new(format!(
                    "--plan {p:?}: {} (report it anyway with --framework any)",
                    refusal.message()
                ))
                .into());
            }
            let ev = Evaluator::new(&model, &cluster, options);
            let view = plan_view(&ev, plan, "The plan".into())
                .map_err(|e| Infeasible::new(format!("--plan {p:?}: {e}")))?;
            let mut doc = Document {
                title: format!("{} on {}", model.name, cluster.name),
                ..Document::default()
            };
            doc.summary = summary(&ev, &plan, &view.report.metrics);
            doc.breakdowns = vec![("plan".into(), view.report.breakdown)];
            doc.plan = Some(view);
            doc
        }
        None => {
            let top = args.top.unwrap_or(10);
            anyhow::ensure!(
                (1..=MAX_TOP_K).contains(&top),
                "--top {top}: expected [1, {MAX_TOP_K}]"
            );
            let space_name = args.space.as_deref().unwrap_or("default");
            let mut space = resolve_space(space_name)
                .with_context(|| format!("cannot load search space `{space_name}`"))?;
            if let Some(f) = &args.fix {
                space.fix(f)?;
            }
            let mut pool = rayon::ThreadPoolBuilder::new();
            if let Some(n) = args.threads {
                super::check_threads(n, false)?;
                pool = pool.num_threads(n);
            }
            let pool = pool.build().context("cannot start the worker threads")?;
            let opts = SearchOptions {
                top_k: top,
                exhaustive: false,
            };
            let case = pool
                .install(|| search_case_for(&model, &cluster, options, target, &space, &opts, &()))
                .map_err(Infeasible::new)?;
            if case.outcome.plans.is_empty() {
                return Err(Infeasible::new(format!(
                    "no plan of space `{space_name}` runs (see `autoplan search` for why)"
                ))
                .into());
            }
            search_document(&case.scorer.exact, space_name, &case.outcome, 1)?
        }
    };
    doc.caveats = caveats;
    write_html(&args.out, &doc)?;
    Ok(ExitCode::SUCCESS)
}

/// Write `doc` to `path`, replacing it whole.
pub(crate) fn write_html(path: &Path, doc: &Document) -> anyhow::Result<()> {
    let html = autoplan_report::render(doc);
    let target =
        crate::outfile::target(path).with_context(|| format!("cannot write {}", path.display()))?;
    crate::outfile::replace(&target, &html)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// One plan's report, timeline inputs and per-stage memory.
fn plan_view(
    ev: &Evaluator,
    plan: Plan,
    heading: String,
) -> Result<PlanView, autoplan_evaluate::Infeasible> {
    let report = ev.report(&plan)?;
    Ok(PlanView {
        heading,
        plan,
        stage_memory: ev.stage_memory(&plan),
        report,
    })
}

/// The summary lines of a plan.
fn summary(ev: &Evaluator, plan: &Plan, m: &Metrics) -> Vec<(String, String)> {
    let model = ev.model();
    let c = ev.cluster();
    vec![
        ("model".into(), model.name.clone()),
        (
            "cluster".into(),
            format!(
                "{} ({} GPUs: {} nodes × {} {})",
                c.name,
                c.gpus(),
                c.nodes,
                c.node.gpus_per_node,
                c.gpu.name
            ),
        ),
        (
            "workload".into(),
            format!(
                "seq {}, global batch {}",
                model.training.seq_len, model.training.global_batch
            ),
        ),
        ("plan".into(), plan.to_string()),
        ("step time".into(), format!("{:.3} s", m.step_time_s)),
        (
            "throughput".into(),
            format!("{:.1} tokens/s/GPU", m.tokens_per_s_per_gpu),
        ),
        (
            "MFU".into(),
            format!("{:.1}% (HFU {:.1}%)", 100.0 * m.mfu, 100.0 * m.hfu),
        ),
        (
            "memory peak".into(),
            format!(
                "{:.2} GiB of {:.2} GiB",
                m.memory_peak_bytes / GIB,
                c.gpu.hbm_bytes / GIB
            ),
        ),
        (
            "most exposed communication".into(),
            m.dominant_comm.name().into(),
        ),
    ]
}

/// The report of a search: its summary, the ranking, every ranked plan's breakdown, and plan
/// `explain` (1 = the best) in full. Nothing run-dependent (wall time, threads) is shown, so
/// the file is the same on every run.
pub(crate) fn search_document(
    ev: &Evaluator,
    space: &str,
    o: &Outcome<Metrics>,
    explain: usize,
) -> anyhow::Result<Document> {
    let hbm = ev.cluster().gpu.hbm_bytes;
    let chosen = o
        .plans
        .get(explain.max(1) - 1)
        .with_context(|| format!("plan {explain}: only {} plans were ranked", o.plans.len()))?;
    let view = plan_view(ev, chosen.plan, format!("Plan {explain} in full"))
        .map_err(|e| anyhow::anyhow!("plan {explain} no longer evaluates: {e}"))?;
    let mut summary = summary(ev, &chosen.plan, &view.report.metrics);
    summary.insert(
        3,
        (
            "search space".into(),
            format!(
                // Not the evaluated count: pruning depends on the thread count.
                "`{space}`: {} plans",
                o.stats.space_plans
            ),
        ),
    );
    let moe = ev.model().moe.is_some();
    let mut columns: Vec<String> = ["rank", "tp", "cp", "pp", "dp"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if moe {
        columns.extend(["ep", "moe_tp"].iter().map(|s| s.to_string()));
    }
    columns.extend(
        [
            "mbs",
            "schedule",
            "recompute",
            "zero",
            "step time s",
            "tok/s/GPU",
            "MFU %",
            "mem GiB",
            "headroom GiB",
            "exposed",
            "plan",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    let n = |v: u32| Cell::num(v.to_string(), f64::from(v));
    let rows = o
        .plans
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let p = &r.plan;
            let m = &r.metrics;
            let mut row = vec![
                Cell::num((i + 1).to_string(), (i + 1) as f64),
                n(p.tp),
                n(p.cp),
                n(p.pp),
                n(p.dp),
            ];
            if moe {
                row.extend([n(p.ep), n(p.moe_tp)]);
            }
            let sched = if p.schedule == autoplan_plan::Schedule::Interleaved {
                format!("{}×{}", schedule_name(p.schedule), p.vpp)
            } else {
                schedule_name(p.schedule).to_string()
            };
            row.extend([
                n(p.mbs),
                Cell::text(sched),
                Cell::text(recompute_name(p)),
                Cell::num(p.zero.name(), f64::from(p.zero.stage)),
                Cell::num(format!("{:.3}", m.step_time_s), m.step_time_s),
                Cell::num(
                    format!("{:.1}", m.tokens_per_s_per_gpu),
                    m.tokens_per_s_per_gpu,
                ),
                Cell::num(format!("{:.1}", 100.0 * m.mfu), m.mfu),
                Cell::num(
                    format!("{:.2}", m.memory_peak_bytes / GIB),
                    m.memory_peak_bytes,
                ),
                Cell::num(
                    format!("{:.2}", (hbm - m.memory_peak_bytes) / GIB),
                    hbm - m.memory_peak_bytes,
                ),
                Cell::text(m.dominant_comm.name()),
                Cell::text(p.to_string()),
            ]);
            row
        })
        .collect();
    let mut breakdowns = Vec::with_capacity(o.plans.len());
    for (i, r) in o.plans.iter().enumerate() {
        let rep = ev
            .report(&r.plan)
            .map_err(|e| anyhow::anyhow!("plan {} no longer evaluates: {e}", i + 1))?;
        breakdowns.push((format!("plan {}", i + 1), rep.breakdown));
    }
    Ok(Document {
        title: format!("{} on {}: ranked plans", ev.model().name, ev.cluster().name),
        summary,
        ranking: Some(Table { columns, rows }),
        breakdowns,
        plan: Some(view),
        validation: None,
        caveats: Vec::new(),
    })
}

/// The report of a validation: the summary and every scored row, predicted against measured.
/// The family is the model column's first word (`gpt3-175b` → `gpt3`).
pub(crate) fn validate_document(v: &Validation, runs: &[PublishedRun], file: &Path) -> Document {
    let family = |id: &str| {
        runs.iter()
            .find(|r| r.id == id)
            .map(|r| {
                r.model
                    .split(['-', '_', ' '])
                    .next()
                    .unwrap_or("")
                    .to_ascii_lowercase()
            })
            .unwrap_or_default()
    };
    let gpu = |id: &str| {
        runs.iter()
            .find(|r| r.id == id)
            .map(|r| r.gpu.clone())
            .unwrap_or_default()
    };
    let point = |r: &autoplan_evaluate::validate::RowResult, outlier: bool| ValidationPoint {
        id: r.id.clone(),
        family: family(&r.id),
        gpu: gpu(&r.id),
        figure: r.figure.name().into(),
        measured: r.measured,
        predicted: r.predicted,
        outlier,
    };
    let points = v
        .rows
        .iter()
        .map(|r| point(r, false))
        .chain(v.outliers.iter().map(|o| point(&o.row, true)))
        .collect();
    let mut summary = vec![
        ("runs file".into(), file.display().to_string()),
        (
            "rows scored".into(),
            format!(
                "{} (+{} outside the calibrated domain)",
                v.rows.len(),
                v.outliers.len()
            ),
        ),
        ("rows skipped".into(), v.skipped.len().to_string()),
        ("MAPE".into(), format!("{:.1}%", 100.0 * v.mape)),
    ];
    if let Some(w) = &v.worst {
        summary.push((
            "worst row".into(),
            format!("{w} ({:+.1}%)", 100.0 * v.worst_error),
        ));
    }
    for a in &v.by_gpu {
        summary.push((
            format!("MAPE {:?}", a.arch),
            format!("{:.1}% over {} rows", 100.0 * a.mape, a.rows),
        ));
    }
    Document {
        title: "autoplan validate: predicted against measured".into(),
        summary,
        validation: Some(ValidationView {
            points,
            mape: v.mape,
        }),
        ..Document::default()
    }
}
