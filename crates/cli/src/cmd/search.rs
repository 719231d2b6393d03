//! `autoplan search --model M --cluster C`: the main job. Ranks the plans of a search space
//! by step time (branch-and-bound, `autoplan-search`), prints the top K and the best plan's
//! (or plan N's) full report with the per-layer communication table of `autoplan evaluate`.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use anyhow::Context;
use autoplan_evaluate::{EvalOptions, Metrics};
use autoplan_search::fold::{difference, fold, DEFAULT_FOLD_TOLERANCE};
use autoplan_search::space::{recompute_name, schedule_name};
use autoplan_search::{
    resolve_space, search_case_for, CaseOutcome, Observer, Outcome, Ranked, Scorer, SearchOptions,
    Stats, MAX_TOP_K,
};

use super::Format;
use crate::exit::Infeasible;
use crate::fmt::{serde_name, GIB};
use autoplan_search::Space;

mod emit;
mod nofit;
mod offload;
mod output;
mod scale;

use nofit::*;
use output::*;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A bundled model name (`autoplan models`), a model TOML, or a Hugging Face config.json.
    #[arg(long)]
    pub model: String,
    /// A bundled cluster name (`autoplan clusters`) or a cluster TOML.
    #[arg(long)]
    pub cluster: String,
    /// A bundled search space (default, dense, moe, quick) or a space TOML.
    #[arg(long, default_value = "default")]
    pub space: String,
    /// How many plans to rank.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Fix decisions, e.g. "tp=8,pp=16,recompute=full": keys and values as in the plan string
    /// (any item of a printed plan), or as in the space files. Narrows the space: each knob
    /// once, to a value the space lists (or the default a plan shows where the knob does not
    /// apply, e.g. sp=off with tp=1); anything else is an error.
    #[arg(long)]
    pub fix: Option<String>,
    #[command(flatten)]
    pub workload: super::Workload,
    #[command(flatten)]
    pub budget: super::budget::BudgetArgs,
    #[command(flatten)]
    pub scale: scale::ScaleArgs,
    #[command(flatten)]
    pub target: super::target::TargetArgs,
    /// Fold near-ties, in percent of the step time (default 1): a plan with the tp, pp, ep,
    /// moe_tp, micro-batch size, recompute and sharding of a better row, within this much of its
    /// step time, is listed under that row as a variant (differing in the cp/dp split, schedule,
    /// rank order or communication knobs), so the rows are real alternatives. Exact ties rank
    /// the plan nearest the framework's defaults first. 0: no folding.
    #[arg(long, value_name = "PCT", default_value_t = 100.0 * DEFAULT_FOLD_TOLERANCE)]
    pub fold: f64,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Write the output to this file instead of stdout.
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    /// Worker threads (default: one per core). The ranking does not depend on it.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Print the full report of plan N of the ranking (1 = the best, the default of the table).
    /// JSON and CSV carry it only when --explain is given: JSON as the field `explain` (what
    /// `evaluate --format json` prints, per-layer rows under `report.comm`, plus `rank` and
    /// `plan`); CSV as a second table after the ranking and one empty line: plan N's per-layer
    /// communication rows, with their own header.
    #[arg(long)]
    pub explain: Option<usize>,
    /// Print the search statistics (plans in the space, pruned, evaluated, plans/s, wall).
    #[arg(long)]
    pub stats: bool,
    /// Evaluate every plan of the space (no pruning): slower, same answer.
    #[arg(long)]
    pub exhaustive: bool,
    /// Print plan --explain N (default 1) as a framework's launch configuration or an NCCL
    /// tuner config, as `evaluate --emit` does, instead of the ranking (megatron uses the
    /// Megatron-Core version of --framework).
    #[arg(long, value_enum)]
    pub emit: Option<super::evaluate::Emit>,
    /// Also write the self-contained HTML report (ranking, breakdowns, plan --explain N or 1
    /// in full) to this file (docs/report.md).
    #[arg(long, value_name = "FILE")]
    pub html: Option<std::path::PathBuf>,
}

/// The indicatif bar as an observer of the search (hidden when stderr is not a terminal).
struct Bar(indicatif::ProgressBar);

impl Observer for Bar {
    fn progress(&self, done: u64, total: u64) {
        // The length is set once (each call of `set_length` redraws).
        if self.0.length() != Some(total) {
            self.0.set_length(total);
        }
        self.0.set_position(done);
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    check_args(&args)?;
    if scale::wanted(&args) {
        return scale::run(args);
    }
    let (model, cluster) = args.budget.apply(super::load_inputs(
        &args.model,
        &args.cluster,
        &args.workload,
    )?)?;
    let mut space = resolve_space(&args.space)
        .with_context(|| format!("cannot load search space `{}`", args.space))?;
    if let Some(f) = &args.fix {
        space.fix(f)?;
    }
    let target = args.target.target()?;
    // The framework's cost profile: what it overlaps and fuses.
    let options = EvalOptions {
        memory: args.workload.memory_options(&cluster)?,
        ..EvalOptions::default()
    }
    .with_profile(&target.framework.profile(), model.training.precision);
    let caveats = super::caveats(
        &args.model,
        &args.workload,
        &cluster,
        &model,
        target.framework,
    );
    super::print_caveats(&caveats);
    check_recompute_entries(&space, &model)?;
    let rows_wanted = args.top.max(args.explain.unwrap_or(1));
    let opts = SearchOptions {
        // Folding hides variants: rank more plans than rows (FOLD_DEPTH per row).
        top_k: if args.fold > 0.0 {
            (rows_wanted * FOLD_DEPTH).min(MAX_TOP_K)
        } else {
            rows_wanted
        },
        exhaustive: args.exhaustive,
    };
    let bar = progress_bar();
    let observer = Bar(bar);
    let mut pool = rayon::ThreadPoolBuilder::new();
    if let Some(n) = args.threads {
        pool = pool.num_threads(n);
    }
    let pool = pool.build().context("cannot start the worker threads")?;
    let mut case = pool
        .install(|| search_case_for(&model, &cluster, options, target, &space, &opts, &observer))
        .map_err(anyhow::Error::msg)?;
    // Nothing fits in HBM alone: offload the optimizer state, then the parameters, then the
    // activations to host memory, until a plan fits (`offload.rs`).
    while let Some((widening, wider)) = offload::widened(&case, &space, &model, &cluster, target) {
        eprintln!("{}", offload::note(&case, &cluster, widening, &wider));
        case = pool
            .install(|| {
                search_case_for(&model, &cluster, options, target, &wider, &opts, &observer)
            })
            .map_err(anyhow::Error::msg)?;
        space = wider;
    }
    let CaseOutcome { scorer, outcome } = case;
    observer.0.finish_and_clear();
    let (outcome, variants) = folded(outcome, args.fold / 100.0, rows_wanted, model.moe.is_some());
    let hbm = scorer.exact.cluster().gpu.hbm_bytes;
    for (i, r) in outcome.plans.iter().enumerate() {
        super::ensure_finite_metrics(&format!("plan {} ({})", i + 1, r.plan), &r.metrics, hbm)?;
    }

    if let (Some(path), false) = (&args.html, outcome.plans.is_empty()) {
        let mut doc = super::report::search_document(
            &scorer.exact,
            &args.space,
            &outcome,
            args.explain.unwrap_or(1),
        )?;
        doc.caveats = caveats;
        super::report::write_html(path, &doc)?;
    }
    let explained = explained(&args, &scorer, &outcome)?;
    let mut sink: Box<dyn Write> = match &args.out {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("cannot create {}", p.display()))?,
        )),
        None => Box::new(std::io::stdout().lock()),
    };
    let out = &mut sink;
    match (args.emit, outcome.plans.is_empty()) {
        (Some(e), false) => emit::export(out, &args, e, &scorer, &outcome)?,
        _ => write(out, &args, &scorer, &space, &outcome, &variants, explained)?,
    }
    out.flush()?;
    if outcome.plans.is_empty() {
        let mut why = why_nothing(&scorer, &space, &outcome);
        // Even with offload nothing fits: how many GPUs of this kind would do.
        let offloads = space.offload_optimizer.iter().any(|&p| p > 0)
            || space.offload_params.contains(&true)
            || space.offload_activations.iter().any(|&n| n > 0);
        if outcome.no_fit.is_some() && offloads {
            let fewest =
                pool.install(|| offload::fewest_gpus(&model, &cluster, options, target, &space));
            if let Some(f) = fewest {
                why = format!("{why}; {f}");
            }
        }
        return Err(Infeasible::new(why).into());
    }
    if args.stats && args.format != Format::Table {
        eprintln!("{}", stats_line(&outcome.stats));
    }
    Ok(ExitCode::SUCCESS)
}

/// Plans ranked per row wanted when folding (the variants a row may hide).
const FOLD_DEPTH: usize = 4;

/// The variants folded under each row (`autoplan_search::fold`).
type Variants = Vec<Vec<Ranked<Metrics>>>;

/// The outcome with one plan per row (the rows' heads, at most `rows`) and each row's variants.
fn folded(
    mut outcome: Outcome<Metrics>,
    tolerance: f64,
    rows: usize,
    moe: bool,
) -> (Outcome<Metrics>, Variants) {
    let all = std::mem::take(&mut outcome.plans);
    let mut variants = Vec::new();
    for row in fold(&all, tolerance, moe).into_iter().take(rows) {
        outcome.plans.push(all[row.head]);
        variants.push(row.variants.iter().map(|&i| all[i]).collect());
    }
    (outcome, variants)
}

/// The flag bounds `clap` cannot express.
fn check_args(args: &Args) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.fold.is_finite() && (0.0..=100.0).contains(&args.fold),
        "--fold {}: expected a percentage in [0, 100]",
        args.fold
    );
    // Both rank plans: at most the search's bound (see `MAX_TOP_K` for why).
    anyhow::ensure!(
        (1..=MAX_TOP_K).contains(&args.top),
        "--top {}: expected [1, {MAX_TOP_K}]",
        args.top
    );
    anyhow::ensure!(
        args.explain != Some(0),
        "--explain must be at least 1 (1 = the best plan)"
    );
    if let Some(n) = args.explain {
        anyhow::ensure!(
            n <= MAX_TOP_K,
            "--explain {n}: expected [1, {MAX_TOP_K}] (1 = the best plan)"
        );
    }
    if let Some(n) = args.threads {
        super::check_threads(n, false)?;
    }
    Ok(())
}

/// An error when no recompute entry of `space` applies to `model`.
fn check_recompute_entries(space: &Space, model: &autoplan_graph::ModelSpec) -> anyhow::Result<()> {
    // The search drops the recompute entries the model cannot take (`Objective::admits`); none
    // left is the user's mistake (e.g. `--fix recompute=selective:mla_up_proj` without MLA):
    // say which.
    let check = |(recompute, recompute_modules)| {
        autoplan_plan::Plan {
            recompute,
            recompute_modules,
            ..Default::default()
        }
        .check_recompute(model)
    };
    if let Some(&first) = space.recompute.first() {
        if !space.recompute.iter().any(|&r| check(r).is_ok()) {
            if let Err(e) = check(first) {
                anyhow::bail!("no recompute entry of the space applies: {e}");
            }
        }
    }
    Ok(())
}

/// The search's progress bar on a terminal; hidden otherwise.
fn progress_bar() -> indicatif::ProgressBar {
    if std::io::stderr().is_terminal() {
        indicatif::ProgressBar::new(0).with_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} searching [{bar:40}] {pos}/{len} subtrees {elapsed}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        )
    } else {
        indicatif::ProgressBar::hidden()
    }
}

/// A plan ranked by the search, with its full report.
type Explained = (usize, autoplan_plan::Plan, autoplan_evaluate::Report);

/// The plan `--explain N` asks for in JSON and CSV, with its report.
fn explained(
    args: &Args,
    scorer: &Scorer,
    outcome: &Outcome<Metrics>,
) -> anyhow::Result<Option<Explained>> {
    // JSON and CSV with --explain: plan N's full report, as `evaluate` makes it.
    Ok(match (args.format, args.explain) {
        (Format::Json | Format::Csv, Some(n)) => match outcome.plans.get(n - 1) {
            Some(r) => {
                let report = scorer
                    .exact
                    .report(&r.plan)
                    .map_err(|e| anyhow::anyhow!("plan {n} no longer evaluates: {e}"))?;
                super::ensure_finite_report(&format!("plan {n}"), &report)?;
                Some((n, r.plan, report))
            }
            None if outcome.plans.is_empty() => None,
            None => anyhow::bail!(
                "--explain {n}: only {} plans were ranked",
                outcome.plans.len()
            ),
        },
        _ => None,
    })
}

/// The ranking (and the explained plan) in `args.format`.
fn write(
    out: &mut impl Write,
    args: &Args,
    scorer: &Scorer,
    space: &Space,
    outcome: &Outcome<Metrics>,
    variants: &Variants,
    explained: Option<Explained>,
) -> anyhow::Result<()> {
    let explain = args.explain.unwrap_or(1);
    match args.format {
        Format::Json => {
            let mut v = json(args, scorer, outcome, variants);
            // The stderr caveats, for a program reading the JSON.
            let framework = args.target.target()?.framework;
            v["caveats"] = super::caveats(
                &args.model,
                &args.workload,
                scorer.exact.cluster(),
                scorer.exact.model(),
                framework,
            )
            .into();
            if let Some((n, plan, report)) = &explained {
                let mut e = super::evaluate::json(report);
                e["rank"] = (*n).into();
                e["plan"] = plan.to_string().into();
                e["calibrated"] = super::calibration_note(scorer.exact.cluster())
                    .is_none()
                    .into();
                // As `evaluate --format json`: its caveats too.
                e["caveats"] = v["caveats"].clone();
                // As `evaluate --format json`: the headroom against --min-headroom.
                let free = report.hbm_bytes - report.metrics.memory_peak_bytes;
                e["min_headroom_gib"] = (scorer.min_headroom_bytes / GIB).into();
                e["below_min_headroom"] = (free < scorer.min_headroom_bytes).into();
                v["explain"] = e;
            }
            serde_json::to_writer_pretty(&mut *out, &v)?;
            writeln!(out)?;
        }
        Format::Csv => {
            csv(out, scorer, outcome, variants)?;
            if let Some((n, _, report)) = &explained {
                writeln!(out)?;
                comm_csv(out, *n, report)?;
            }
        }
        Format::Table => {
            header(out, args, scorer, &space.description, outcome)?;
            if !outcome.plans.is_empty() {
                ranking(out, args, scorer, outcome, variants)?;
            }
            if args.stats {
                writeln!(out)?;
                stats(out, &outcome.stats)?;
            }
            if let Some(r) = outcome.plans.get(explain - 1) {
                writeln!(out)?;
                writeln!(out, "── plan {explain} in full ──")?;
                let report = scorer
                    .exact
                    .report(&r.plan)
                    .map_err(|e| anyhow::anyhow!("plan {explain} no longer evaluates: {e}"))?;
                super::ensure_finite_report(&format!("plan {explain}"), &report)?;
                super::evaluate::table(out, &r.plan.to_string(), &scorer.exact, &r.plan, &report)?;
            } else if args.explain.is_some() && !outcome.plans.is_empty() {
                anyhow::bail!(
                    "--explain {explain}: only {} plans were ranked",
                    outcome.plans.len()
                );
            }
        }
    }
    Ok(())
}
