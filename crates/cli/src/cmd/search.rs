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
    /// Also write the self-contained HTML report (ranking, breakdowns, plan --explain N or 1
    /// in full) to this file (docs/report.md).
    #[arg(long, value_name = "FILE")]
    pub html: Option<std::path::PathBuf>,
}

/// The indicatif bar as an observer of the search (hidden when stderr is not a terminal).
struct Bar(indicatif::ProgressBar);

impl Observer for Bar {
    fn progress(&self, done: u64, total: u64) {
        self.0.set_length(total);
        self.0.set_position(done);
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    check_args(&args)?;
    let (model, cluster) = super::load_inputs(&args.model, &args.cluster, &args.workload)?;
    let mut space = resolve_space(&args.space)
        .with_context(|| format!("cannot load search space `{}`", args.space))?;
    if let Some(f) = &args.fix {
        space.fix(f)?;
    }
    let options = EvalOptions {
        memory: args.workload.memory_options(&cluster)?,
        ..EvalOptions::default()
    };
    if let Some(n) = super::calibration_note(&cluster) {
        eprintln!("{n}");
    }
    check_recompute_entries(&space, &model)?;
    let target = args.target.target()?;
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
    let CaseOutcome { scorer, outcome } = pool
        .install(|| search_case_for(&model, &cluster, options, target, &space, &opts, &observer))
        .map_err(anyhow::Error::msg)?;
    observer.0.finish_and_clear();
    let (outcome, variants) = folded(outcome, args.fold / 100.0, rows_wanted, model.moe.is_some());
    let hbm = scorer.exact.cluster().gpu.hbm_bytes;
    for (i, r) in outcome.plans.iter().enumerate() {
        super::ensure_finite_metrics(&format!("plan {} ({})", i + 1, r.plan), &r.metrics, hbm)?;
    }

    if let (Some(path), false) = (&args.html, outcome.plans.is_empty()) {
        let doc = super::report::search_document(
            &scorer.exact,
            &args.space,
            &outcome,
            args.explain.unwrap_or(1),
        )?;
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
    write(out, &args, &scorer, &space, &outcome, &variants, explained)?;
    out.flush()?;
    if outcome.plans.is_empty() {
        return Err(Infeasible::new(why_nothing(&scorer, &space, &outcome)).into());
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
            if let Some((n, plan, report)) = &explained {
                let mut e = super::evaluate::json(report);
                e["rank"] = (*n).into();
                e["plan"] = plan.to_string().into();
                e["calibrated"] = super::calibration_note(scorer.exact.cluster())
                    .is_none()
                    .into();
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

fn why_nothing(scorer: &Scorer, space: &Space, o: &Outcome<Metrics>) -> String {
    if o.no_fit.is_none() {
        if let Some(why) = batch_never_divides(scorer, space) {
            return why;
        }
    }
    match o.no_fit {
        Some(nf) => format!(
            "no plan of the space fits in memory: the smallest needs at least {:.2} GiB per GPU, \
             {:.2} GiB over the {:.2} GiB of HBM{} (try more GPUs, --space with ZeRO-3 / full \
             recompute / smaller micro-batches, or a shorter --seq-len)",
            nf.min_memory_bytes / GIB,
            (nf.min_memory_bytes - nf.hbm_bytes) / GIB,
            scorer.exact.cluster().gpu.hbm_bytes / GIB,
            if scorer.min_headroom_bytes > 0.0 {
                format!(
                    " less {:.2} GiB of --min-headroom",
                    scorer.min_headroom_bytes / GIB
                )
            } else {
                String::new()
            }
        ),
        None => format!(
            "no valid plan in the space for {} on {} GPUs that {} runs ({} plans, {} invalid): \
             check --fix and the space's degrees against the heads, layers, experts and global \
             batch, or --framework any",
            scorer.exact.model().name,
            scorer.exact.cluster().gpus(),
            scorer.framework,
            o.stats.space_plans,
            o.stats.invalid
        ),
    }
}

/// Why no plan is valid when the reason is the global batch: it must be a multiple of
/// `dp × mbs`, and no data-parallel degree the space's tp, cp and pp leave on the cluster's GPUs
/// (or its fixed dp) times any of its micro-batch sizes divides it. `None` when one does (the
/// reason is elsewhere). The message names the nearest global batches that would divide.
fn batch_never_divides(scorer: &Scorer, space: &Space) -> Option<String> {
    let gpus = u64::from(scorer.exact.cluster().gpus());
    let batch = u64::from(scorer.exact.model().training.global_batch);
    let mut dps: Vec<u64> = Vec::new();
    for &tp in &space.tp {
        for &cp in &space.cp {
            for &pp in &space.pp {
                let shard = u64::from(tp) * u64::from(cp) * u64::from(pp);
                if shard == 0 || gpus % shard != 0 {
                    continue;
                }
                let dp = gpus / shard;
                if space.dp.is_none_or(|d| u64::from(d) == dp) && !dps.contains(&dp) {
                    dps.push(dp);
                }
            }
        }
    }
    if dps.is_empty() || space.mbs.is_empty() {
        return None;
    }
    dps.sort_unstable();
    let units: Vec<u64> = dps
        .iter()
        .flat_map(|&dp| space.mbs.iter().map(move |&m| dp * u64::from(m)))
        .collect();
    if units.iter().any(|&u| batch % u == 0) {
        return None;
    }
    // The nearest batches at or below and above that some dp × mbs divides.
    let below = units
        .iter()
        .map(|&u| batch / u * u)
        .filter(|&b| b > 0)
        .max();
    let above = units.iter().map(|&u| (batch / u + 1) * u).min();
    let shown: Vec<String> = dps.iter().take(8).map(u64::to_string).collect();
    let more = if dps.len() > 8 { ", ..." } else { "" };
    let mbs: Vec<String> = space.mbs.iter().map(u32::to_string).collect();
    let suggest = match (below, above) {
        (Some(b), Some(a)) => format!("{b} or {a}"),
        (None, Some(a)) => a.to_string(),
        (Some(b), None) => b.to_string(),
        (None, None) => "none".to_string(),
    };
    Some(format!(
        "no valid plan: the global batch {batch} is not a multiple of dp × mbs for any \
         data-parallel degree the space leaves on {gpus} GPUs (dp ∈ {{{}{more}}}, mbs ∈ {{{}}}); \
         global batches that would divide: {suggest} (--global-batch), or choose --gpus so that \
         a dp divides {batch}",
        shown.join(", "),
        mbs.join(", ")
    ))
}

fn header(
    out: &mut impl Write,
    args: &Args,
    scorer: &Scorer,
    description: &str,
    o: &Outcome<Metrics>,
) -> anyhow::Result<()> {
    let m = scorer.exact.model();
    let c = scorer.exact.cluster();
    writeln!(
        out,
        "{} on {} ({} GPUs: {} nodes × {} {}{}), seq {}, global batch {}",
        m.name,
        c.name,
        c.gpus(),
        c.nodes,
        c.node.gpus_per_node,
        c.gpu.name,
        super::show_cluster::domain_note(c),
        m.training.seq_len,
        m.training.global_batch
    )?;
    writeln!(
        out,
        "framework {} (--framework {}), at least {:.2} GiB of HBM kept free per GPU \
         (--min-headroom)",
        scorer.framework,
        scorer.framework.spec(),
        scorer.min_headroom_bytes / GIB
    )?;
    writeln!(
        out,
        "space `{}`{}: {} plans, {} evaluated ({:.1}% pruned) in {:.2} s",
        args.space,
        if description.is_empty() {
            String::new()
        } else {
            format!(" ({description})")
        },
        o.stats.space_plans,
        o.stats.evaluated,
        100.0 * o.stats.prune_ratio(),
        o.stats.wall_s
    )?;
    writeln!(out)?;
    Ok(())
}

/// Short knobs column: what is not a degree, schedule, recompute or ZeRO.
fn knobs(p: &autoplan_plan::Plan) -> String {
    let s = p.to_string();
    s.split(',')
        .filter(|kv| {
            let k = kv.split('=').next().unwrap_or("");
            !matches!(
                k,
                "tp" | "cp"
                    | "dp"
                    | "pp"
                    | "ep"
                    | "moe_tp"
                    | "mbs"
                    | "recompute"
                    | "zero"
                    | "schedule"
                    | "vpp"
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn ranking(
    out: &mut impl Write,
    args: &Args,
    scorer: &Scorer,
    o: &Outcome<Metrics>,
    variants: &Variants,
) -> anyhow::Result<()> {
    let hbm = scorer.exact.cluster().gpu.hbm_bytes;
    let moe = scorer.exact.model().moe.is_some();
    write!(
        out,
        "{:>4} {:>3} {:>3} {:>3} {:>5}",
        "rank", "tp", "cp", "pp", "dp"
    )?;
    if moe {
        write!(out, " {:>4} {:>6}", "ep", "moe_tp")?;
    }
    // Module sets make the recompute column as wide as its longest entry.
    let rw = o
        .plans
        .iter()
        .map(|r| recompute_name(&r.plan).chars().count())
        .max()
        .unwrap_or(0)
        .max(9);
    writeln!(
        out,
        " {:>3} {:<14} {:<rw$} {:>4} {:>10} {:>9} {:>6} {:>9} {:>9} {:<8} knobs",
        "mbs",
        "schedule",
        "recompute",
        "zero",
        "step time",
        "tok/s/GPU",
        "MFU",
        "mem GiB",
        "headroom",
        "exposed"
    )?;
    for (i, r) in o.plans.iter().enumerate() {
        let p = &r.plan;
        let m = &r.metrics;
        write!(
            out,
            "{:>4} {:>3} {:>3} {:>3} {:>5}",
            i + 1,
            p.tp,
            p.cp,
            p.pp,
            p.dp
        )?;
        if moe {
            write!(out, " {:>4} {:>6}", p.ep, p.moe_tp)?;
        }
        let sched = if p.schedule == autoplan_plan::Schedule::Interleaved {
            format!("{}×{}", schedule_name(p.schedule), p.vpp)
        } else {
            schedule_name(p.schedule).to_string()
        };
        writeln!(
            out,
            " {:>3} {:<14} {:<rw$} {:>4} {:>8.3} s {:>9.1} {:>5.1}% {:>9.2} {:>9.2} {:<8} {}",
            p.mbs,
            sched,
            recompute_name(p),
            p.zero.name(),
            m.step_time_s,
            m.tokens_per_s_per_gpu,
            100.0 * m.mfu,
            m.memory_peak_bytes / GIB,
            (hbm - m.memory_peak_bytes) / GIB,
            m.dominant_comm.name(),
            knobs(p)
        )?;
        if let Some(vs) = variants.get(i).filter(|v| !v.is_empty()) {
            let listed: Vec<String> = vs
                .iter()
                .map(|v| {
                    format!(
                        "{} ({:+.2}%)",
                        difference(p, &v.plan),
                        100.0 * (v.step_time_s / r.step_time_s - 1.0)
                    )
                })
                .collect();
            writeln!(
                out,
                "     ↳ {} variant{} within {}%: {}",
                vs.len(),
                if vs.len() == 1 { "" } else { "s" },
                args.fold,
                listed.join("; ")
            )?;
        }
    }
    Ok(())
}

fn stats_line(s: &Stats) -> String {
    format!(
        "search: {} plans in the space, {} nodes bounded, {} subtrees pruned ({} by time, {} by \
         memory; {} plans, {:.2}%), {} evaluated ({} fit, {} out of memory, {} invalid), {:.0} \
         plans/s, {:.3} s wall on {} threads",
        s.space_plans,
        s.nodes,
        s.pruned_by_time + s.pruned_by_memory,
        s.pruned_by_time,
        s.pruned_by_memory,
        s.pruned_plans,
        100.0 * s.prune_ratio(),
        s.evaluated,
        s.feasible,
        s.out_of_memory,
        s.invalid,
        s.plans_per_s(),
        s.wall_s,
        s.threads
    )
}

fn stats(out: &mut impl Write, s: &Stats) -> anyhow::Result<()> {
    writeln!(out, "search statistics:")?;
    writeln!(out, "  plans in the space   {}", s.space_plans)?;
    writeln!(out, "  parallel subtrees    {}", s.tasks)?;
    writeln!(out, "  nodes bounded        {}", s.nodes)?;
    writeln!(
        out,
        "  subtrees pruned      {} ({} by the step-time bound, {} by the memory floor)",
        s.pruned_by_time + s.pruned_by_memory,
        s.pruned_by_time,
        s.pruned_by_memory
    )?;
    writeln!(
        out,
        "  plans pruned         {} ({:.2}% of the space)",
        s.pruned_plans,
        100.0 * s.prune_ratio()
    )?;
    writeln!(
        out,
        "  plans evaluated      {} ({} fit, {} out of memory, {} invalid)",
        s.evaluated, s.feasible, s.out_of_memory, s.invalid
    )?;
    writeln!(out, "  plans/s              {:.0}", s.plans_per_s())?;
    writeln!(
        out,
        "  wall time            {:.3} s on {} threads",
        s.wall_s, s.threads
    )?;
    Ok(())
}

fn row_json(rank: usize, r: &autoplan_search::Ranked<Metrics>, hbm: f64) -> serde_json::Value {
    let m = &r.metrics;
    serde_json::json!({
        "rank": rank,
        "plan": r.plan.to_string(),
        "degrees": {
            "tp": r.plan.tp, "cp": r.plan.cp, "dp": r.plan.dp, "pp": r.plan.pp,
            "ep": r.plan.ep, "moe_tp": r.plan.moe_tp,
        },
        "step_time_s": m.step_time_s,
        "tokens_per_s": m.tokens_per_s,
        "tokens_per_s_per_gpu": m.tokens_per_s_per_gpu,
        "mfu": m.mfu,
        "hfu": m.hfu,
        "memory_peak_gib": m.memory_peak_bytes / GIB,
        "headroom_gib": (hbm - m.memory_peak_bytes) / GIB,
        "dominant_comm": m.dominant_comm.name(),
    })
}

fn json(
    args: &Args,
    scorer: &Scorer,
    o: &Outcome<Metrics>,
    variants: &Variants,
) -> serde_json::Value {
    let hbm = scorer.exact.cluster().gpu.hbm_bytes;
    let s = &o.stats;
    let rows: Vec<serde_json::Value> = o
        .plans
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut v = row_json(i + 1, r, hbm);
            v["variants"] = variants
                .get(i)
                .map(|vs| {
                    vs.iter()
                        .map(|x| {
                            serde_json::json!({
                                "plan": x.plan.to_string(),
                                "differs": difference(&r.plan, &x.plan),
                                "step_time_s": x.step_time_s,
                                "headroom_gib": (hbm - x.metrics.memory_peak_bytes) / GIB,
                            })
                        })
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
                .into();
            v
        })
        .collect();
    serde_json::json!({
        "model": scorer.exact.model().name,
        "cluster": scorer.exact.cluster().name,
        "gpus": scorer.exact.cluster().gpus(),
        "space": args.space,
        "framework": scorer.framework.spec(),
        "min_headroom_gib": scorer.min_headroom_bytes / GIB,
        "fold_percent": args.fold,
        "plans": rows,
        "stats": {
            "space_plans": s.space_plans,
            "tasks": s.tasks,
            "nodes": s.nodes,
            "pruned_by_time": s.pruned_by_time,
            "pruned_by_memory": s.pruned_by_memory,
            "pruned_plans": s.pruned_plans,
            "prune_ratio": s.prune_ratio(),
            "evaluated": s.evaluated,
            "feasible": s.feasible,
            "out_of_memory": s.out_of_memory,
            "invalid": s.invalid,
            "plans_per_s": s.plans_per_s(),
            "wall_s": s.wall_s,
            "threads": s.threads,
        },
        "no_fit": o.no_fit.map(|nf| serde_json::json!({
            "min_memory_gib": nf.min_memory_bytes / GIB,
            "hbm_gib": nf.hbm_bytes / GIB,
            "excess_gib": (nf.min_memory_bytes - nf.hbm_bytes) / GIB,
        })),
    })
}

fn csv(
    out: &mut impl Write,
    scorer: &Scorer,
    o: &Outcome<Metrics>,
    variants: &Variants,
) -> anyhow::Result<()> {
    let hbm = scorer.exact.cluster().gpu.hbm_bytes;
    let mut w = ::csv::Writer::from_writer(out);
    w.write_record([
        "rank",
        "plan",
        "tp",
        "cp",
        "dp",
        "pp",
        "ep",
        "moe_tp",
        "step_time_s",
        "tokens_per_s",
        "tokens_per_s_per_gpu",
        "mfu",
        "memory_peak_gib",
        "headroom_gib",
        "dominant_comm",
        "variants",
    ])?;
    for (i, r) in o.plans.iter().enumerate() {
        let m = &r.metrics;
        let p = &r.plan;
        w.write_record([
            (i + 1).to_string(),
            p.to_string(),
            p.tp.to_string(),
            p.cp.to_string(),
            p.dp.to_string(),
            p.pp.to_string(),
            p.ep.to_string(),
            p.moe_tp.to_string(),
            format!("{}", m.step_time_s),
            format!("{}", m.tokens_per_s),
            format!("{}", m.tokens_per_s_per_gpu),
            format!("{}", m.mfu),
            format!("{}", m.memory_peak_bytes / GIB),
            format!("{}", (hbm - m.memory_peak_bytes) / GIB),
            m.dominant_comm.name().to_string(),
            variants.get(i).map_or(String::new(), |vs| {
                vs.iter()
                    .map(|v| v.plan.to_string())
                    .collect::<Vec<_>>()
                    .join(" | ")
            }),
        ])?;
    }
    w.flush()?;
    Ok(())
}

/// The per-layer communication rows of plan `rank`'s report as CSV (the second table of
/// `--format csv --explain N`): the columns of `evaluate`'s table, numbers unrounded, seconds
/// and bytes per call / per step; `layer` is empty for pipeline and step-level collectives.
fn comm_csv(
    out: &mut impl Write,
    rank: usize,
    report: &autoplan_evaluate::Report,
) -> anyhow::Result<()> {
    let mut w = ::csv::Writer::from_writer(out);
    w.write_record([
        "rank",
        "layer",
        "what",
        "kind",
        "pass",
        "collective",
        "algorithm",
        "group_size",
        "ranks_per_node",
        "nodes",
        "bytes",
        "calls_per_step",
        "time_per_call_s",
        "time_s",
        "exposed_s",
    ])?;
    for row in &report.comm {
        w.write_record([
            rank.to_string(),
            row.layer.map_or(String::new(), |l| l.name().to_string()),
            row.what.to_string(),
            row.kind.name().to_string(),
            serde_name(&row.pass),
            serde_name(&row.collective),
            serde_name(&row.algorithm),
            row.group.size.to_string(),
            row.group.ranks_per_node.to_string(),
            row.group.nodes.to_string(),
            format!("{}", row.bytes),
            format!("{}", row.calls_per_step),
            format!("{}", row.time_per_call),
            format!("{}", row.time),
            format!("{}", row.exposed),
        ])?;
    }
    w.flush()?;
    Ok(())
}
