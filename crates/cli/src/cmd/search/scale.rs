//! `search` over scale: `--gpus` and `--global-batch` (or `--tokens-per-step`) with several
//! values run the single-size search at every point of the grid (`autoplan_search::pareto`),
//! price each point's best plan as time to train and GPU-hours, and print the points ranked
//! by `--objective` with the Pareto front of time against GPU-hours marked.

use super::*;
use crate::cmd::axis::{parse_token_range, TokenRange};
use crate::cmd::budget;
use crate::fmt::si_count;
use autoplan_search::pareto::{grid, search_scale, Goal, PointOutcome, ScaleOutcome};
use autoplan_search::train::Budget;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct ScaleArgs {
    /// Instead of --global-batch: every power-of-two global batch whose tokens per step
    /// (seq_len × batch) falls in LO..HI, e.g. 2M..16M (one search per batch).
    #[arg(long, value_name = "LO..HI", value_parser = parse_token_range,
          conflicts_with = "global_batch")]
    pub tokens_per_step: Option<TokenRange>,
    /// What ranks the points of a search over several GPU counts or batches: throughput
    /// (tokens/s), time (time to train) or cost (GPU-hours, hence dollars at any one price).
    /// At one size and batch all three rank plans alike (by step time).
    #[arg(long, value_enum, default_value_t = Objective::Throughput)]
    pub objective: Objective,
}

/// `--objective`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Objective {
    #[default]
    Throughput,
    Time,
    Cost,
}

impl From<Objective> for Goal {
    fn from(o: Objective) -> Goal {
        match o {
            Objective::Throughput => Goal::Throughput,
            Objective::Time => Goal::Time,
            Objective::Cost => Goal::Cost,
        }
    }
}

/// Whether the arguments ask for more than one GPU count or batch.
pub(super) fn wanted(args: &Args) -> bool {
    let many = |s: &Option<crate::cmd::axis::Sizes>| s.as_ref().is_some_and(|s| s.values.len() > 1);
    many(&args.workload.gpus)
        || many(&args.workload.global_batch)
        || args.scale.tokens_per_step.is_some()
}

/// A scale search's inputs, checked.
struct Grid {
    model: autoplan_graph::ModelSpec,
    cluster: autoplan_cluster::Cluster,
    budget: Budget,
    gpus: Vec<u32>,
    batches: Vec<u32>,
}

/// The model (workload overrides and budget applied, batch not yet), the cluster (not yet
/// resized) and the axes; every GPU count and batch checked against them, errors naming the
/// flag.
fn grid_inputs(args: &Args) -> anyhow::Result<Grid> {
    anyhow::ensure!(
        args.explain.is_none() && args.html.is_none(),
        "--explain/--html: a search over several GPU counts or batches prints each point's best \
         plan; for one point's full report run `autoplan search --gpus N --global-batch B \
         --explain 1`"
    );
    let mut w = args.workload.clone();
    w.gpus = None;
    w.global_batch = None;
    let (model, cluster) =
        args.budget
            .apply(super::super::load_inputs(&args.model, &args.cluster, &w)?)?;
    let Some(budget) = budget::budget(&model, &cluster) else {
        anyhow::bail!(
            "--gpus/--global-batch/--tokens-per-step over several values: the Pareto front of \
             time to train against GPU-hours needs a token count: give --tokens (e.g. 15T) or \
             `tokens` in the model file's [training]"
        );
    };
    let gpus = match &args.workload.gpus {
        Some(s) => s.values.clone(),
        None => vec![cluster.gpus()],
    };
    let batches = match (&args.scale.tokens_per_step, &args.workload.global_batch) {
        (Some(r), _) => r.batches(
            model.training.seq_len,
            &format!("{}..{}", si_count(r.lo), si_count(r.hi)),
        )?,
        (None, Some(s)) => s.values.clone(),
        (None, None) => vec![model.training.global_batch],
    };
    for &g in &gpus {
        cluster
            .with_gpus(g)
            .map_err(|e| anyhow::anyhow!("--gpus: {g} GPUs: {e}"))?;
    }
    for &b in &batches {
        let mut t = model.training.clone();
        t.global_batch = b;
        model
            .with_training(t)
            .map_err(|e| anyhow::anyhow!("--global-batch: {b}: {e}"))?;
    }
    Ok(Grid {
        model,
        cluster,
        budget,
        gpus,
        batches,
    })
}

pub(super) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let g = grid_inputs(&args)?;
    let mut space = resolve_space(&args.space)
        .with_context(|| format!("cannot load search space `{}`", args.space))?;
    if let Some(f) = &args.fix {
        space.fix(f)?;
    }
    check_recompute_entries(&space, &g.model)?;
    let options = EvalOptions {
        memory: args.workload.memory_options(&g.cluster)?,
        ..EvalOptions::default()
    };
    let target = args.target.target()?;
    super::super::print_caveats(&super::super::caveats(
        &args.model,
        &args.workload,
        &g.cluster,
        &g.model,
        target.framework,
    ));
    // As `search --top N` ranks each point, so a point's best plan is that search's row 1.
    let opts = SearchOptions {
        top_k: if args.fold > 0.0 {
            (args.top * FOLD_DEPTH).min(MAX_TOP_K)
        } else {
            args.top
        },
        exhaustive: args.exhaustive,
    };
    let points = grid(&g.gpus, &g.batches);
    let observer = Bar(progress_bar());
    let mut pool = rayon::ThreadPoolBuilder::new();
    if let Some(n) = args.threads {
        pool = pool.num_threads(n);
    }
    let pool = pool.build().context("cannot start the worker threads")?;
    let goal = Goal::from(args.scale.objective);
    let outcome = pool
        .install(|| {
            search_scale(
                &g.model, &g.cluster, options, target, &space, &opts, &points, &g.budget, goal,
                &observer,
            )
        })
        .map_err(anyhow::Error::msg)?;
    observer.0.finish_and_clear();
    for p in &outcome.points {
        let what = format!("{} GPUs, batch {}", p.point.gpus, p.point.global_batch);
        if let (Some(r), Some(t)) = (p.best(), &p.train) {
            let hbm = p.case.scorer.exact.cluster().gpu.hbm_bytes;
            super::super::ensure_finite_metrics(&what, &r.metrics, hbm)?;
            budget::ensure_finite(&what, t)?;
        }
    }
    let mut sink: Box<dyn Write> = match &args.out {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("cannot create {}", p.display()))?,
        )),
        None => Box::new(std::io::stdout().lock()),
    };
    let out = &mut sink;
    match args.format {
        Format::Table => table(out, &args, &g, &outcome)?,
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, &json(&args, &g, &outcome))?;
            writeln!(out)?;
        }
        Format::Csv => csv(out, &outcome)?,
    }
    out.flush()?;
    if outcome.ranking.is_empty() {
        let first = &outcome.points[0];
        return Err(Infeasible::new(format!(
            "no point of the grid has a plan; at {} GPUs, batch {}: {}",
            first.point.gpus,
            first.point.global_batch,
            why_nothing(&first.case.scorer, &space, &first.case.outcome)
        ))
        .into());
    }
    if args.stats && args.format != Format::Table {
        eprintln!("{}", total_stats_line(&outcome));
    }
    Ok(ExitCode::SUCCESS)
}

/// The points in output order: ranked (best first under the objective), then those with no
/// plan in grid order.
fn order(o: &ScaleOutcome) -> Vec<usize> {
    let mut v = o.ranking.clone();
    v.extend((0..o.points.len()).filter(|&i| o.points[i].best().is_none()));
    v
}

/// The points' rank under the objective (1 = best), by grid index.
fn ranks(o: &ScaleOutcome) -> Vec<Option<usize>> {
    let mut r = vec![None; o.points.len()];
    for (k, &i) in o.ranking.iter().enumerate() {
        r[i] = Some(k + 1);
    }
    r
}

/// Why a point has no plan, in one line.
fn no_plan(p: &PointOutcome) -> String {
    match p.case.outcome.no_fit {
        Some(nf) => format!(
            "no plan fits: needs at least {:.2} GiB per GPU of {:.2} GiB",
            nf.min_memory_bytes / GIB,
            nf.hbm_bytes / GIB
        ),
        None => "no valid plan".into(),
    }
}

fn tokens_per_step(g: &Grid, p: &PointOutcome) -> f64 {
    f64::from(g.model.training.seq_len) * f64::from(p.point.global_batch)
}

/// The searches' counters summed over the points.
fn total_stats_line(o: &ScaleOutcome) -> String {
    let mut s = Stats::default();
    for p in &o.points {
        let q = &p.case.outcome.stats;
        s.space_plans += q.space_plans;
        s.tasks += q.tasks;
        s.nodes += q.nodes;
        s.pruned_by_time += q.pruned_by_time;
        s.pruned_by_memory += q.pruned_by_memory;
        s.pruned_plans += q.pruned_plans;
        s.evaluated += q.evaluated;
        s.feasible += q.feasible;
        s.out_of_memory += q.out_of_memory;
        s.invalid += q.invalid;
        s.wall_s += q.wall_s;
        s.threads = q.threads;
    }
    format!("{} points; {}", o.points.len(), stats_line(&s))
}

fn table(out: &mut impl Write, args: &Args, g: &Grid, o: &ScaleOutcome) -> anyhow::Result<()> {
    let c = &g.cluster;
    let price = g.budget.usd_per_gpu_hour;
    writeln!(
        out,
        "{} on {} ({}, {} per node{}), seq {}: {} GPU count{} × {} batch{} = {} points",
        g.model.name,
        c.name,
        c.gpu.name,
        c.node.gpus_per_node,
        super::super::show_cluster::domain_note(c),
        g.model.training.seq_len,
        g.gpus.len(),
        if g.gpus.len() == 1 { "" } else { "s" },
        g.batches.len(),
        if g.batches.len() == 1 { "" } else { "es" },
        o.points.len()
    )?;
    writeln!(
        out,
        "time to train {} tokens{}; ranked by {} (--objective); * = on the Pareto front of time \
         to train against GPU-hours",
        si_count(g.budget.tokens),
        price.map_or(String::new(), |p| format!(" at ${p}/GPU-hour")),
        Goal::from(args.scale.objective).name()
    )?;
    if let Some(p) = o.points.first() {
        let s = &p.case.scorer;
        let wall: f64 = o.points.iter().map(|p| p.case.outcome.stats.wall_s).sum();
        let evaluated: u64 = o
            .points
            .iter()
            .map(|p| p.case.outcome.stats.evaluated)
            .sum();
        writeln!(
            out,
            "framework {} (--framework {}), at least {:.2} GiB of HBM kept free per GPU; space \
             `{}`: {} plans evaluated in {:.2} s",
            s.framework,
            s.framework.spec(),
            s.min_headroom_bytes / GIB,
            args.space,
            evaluated,
            wall
        )?;
    }
    writeln!(out)?;
    write!(
        out,
        "{:>4} {:>6} {:>6} {:>8} {:>10} {:>9} {:>6} {:>9} {:>9} {:>10}",
        "rank",
        "gpus",
        "batch",
        "tok/step",
        "step time",
        "tok/s/GPU",
        "MFU",
        "headroom",
        "days",
        "GPU-hours"
    )?;
    if price.is_some() {
        write!(out, " {:>10}", "USD")?;
    }
    writeln!(out, " {:>5}  best plan", "front")?;
    let rank = ranks(o);
    for i in order(o) {
        let p = &o.points[i];
        write!(
            out,
            "{:>4} {:>6} {:>6} {:>8}",
            rank[i].map_or("-".to_string(), |r| r.to_string()),
            p.point.gpus,
            p.point.global_batch,
            si_count(tokens_per_step(g, p))
        )?;
        match (p.best(), &p.train) {
            (Some(r), Some(t)) => {
                let m = &r.metrics;
                write!(
                    out,
                    " {:>8.3} s {:>9.1} {:>5.1}% {:>9.2} {:>9.2} {:>10}",
                    m.step_time_s,
                    m.tokens_per_s_per_gpu,
                    100.0 * m.mfu,
                    p.headroom_bytes().unwrap_or(0.0) / GIB,
                    t.days,
                    si_count(t.gpu_hours)
                )?;
                if let Some(d) = t.usd {
                    write!(out, " {:>10}", format!("${}", si_count(d)))?;
                }
                writeln!(
                    out,
                    " {:>5}  {}",
                    if o.on_front[i] { "*" } else { "" },
                    r.plan
                )?;
            }
            _ => writeln!(out, "  {}", no_plan(p))?,
        }
    }
    let front: Vec<String> = o
        .ranking
        .iter()
        .filter(|&&i| o.on_front[i])
        .map(|&i| {
            let p = &o.points[i];
            format!("{}×{}", p.point.gpus, p.point.global_batch)
        })
        .collect();
    writeln!(out)?;
    writeln!(
        out,
        "Pareto front ({} point{}, GPUs×batch): {}",
        front.len(),
        if front.len() == 1 { "" } else { "s" },
        front.join(", ")
    )?;
    if args.stats {
        writeln!(out)?;
        for p in &o.points {
            writeln!(
                out,
                "{} GPUs, batch {}: {}",
                p.point.gpus,
                p.point.global_batch,
                stats_line(&p.case.outcome.stats)
            )?;
        }
        writeln!(out, "total: {}", total_stats_line(o))?;
    }
    Ok(())
}

/// One point as JSON (`points[]`).
fn point_json(g: &Grid, o: &ScaleOutcome, rank: Option<usize>, i: usize) -> serde_json::Value {
    let p = &o.points[i];
    let mut v = serde_json::json!({
        "rank": rank,
        "gpus": p.point.gpus,
        "global_batch": p.point.global_batch,
        "tokens_per_step": tokens_per_step(g, p),
        "pareto": o.on_front[i],
    });
    match (p.best(), &p.train) {
        (Some(r), Some(t)) => {
            let hbm = p.case.scorer.exact.cluster().gpu.hbm_bytes;
            let mut row = row_json(1, r, hbm);
            if let Some(m) = row.as_object_mut() {
                m.remove("rank");
            }
            for (k, x) in row.as_object().into_iter().flatten() {
                v[k] = x.clone();
            }
            v["train"] = budget::json(t);
        }
        _ => v["no_plan"] = no_plan(p).into(),
    }
    v
}

fn json(args: &Args, g: &Grid, o: &ScaleOutcome) -> serde_json::Value {
    let rank = ranks(o);
    let s = o.points.first().map(|p| &p.case.scorer);
    serde_json::json!({
        "model": g.model.name,
        "cluster": g.cluster.name,
        "seq_len": g.model.training.seq_len,
        "tokens": g.budget.tokens,
        "usd_per_gpu_hour": g.budget.usd_per_gpu_hour,
        "objective": Goal::from(args.scale.objective).name(),
        "space": args.space,
        "framework": s.map(|s| s.framework.spec()),
        "min_headroom_gib": s.map(|s| s.min_headroom_bytes / GIB),
        // The stderr caveats, as `search --format json` carries them.
        "caveats": s.map_or_else(Vec::new, |s| {
            super::super::caveats(&args.model, &args.workload, &g.cluster, &g.model, s.framework)
        }),
        "gpus": g.gpus,
        "global_batches": g.batches,
        "points": order(o).into_iter().map(|i| point_json(g, o, rank[i], i)).collect::<Vec<_>>(),
    })
}

/// The CSV columns of a scale search, one row per point in the table's order.
pub(super) const CSV_COLUMNS: [&str; 17] = [
    "rank",
    "gpus",
    "global_batch",
    "tokens_per_step",
    "pareto",
    "plan",
    "step_time_s",
    "tokens_per_s",
    "tokens_per_s_per_gpu",
    "mfu",
    "memory_peak_gib",
    "headroom_gib",
    "train_steps",
    "train_days",
    "gpu_hours",
    "usd",
    "no_plan",
];

fn csv(out: &mut impl Write, o: &ScaleOutcome) -> anyhow::Result<()> {
    let rank = ranks(o);
    let mut w = ::csv::Writer::from_writer(out);
    w.write_record(CSV_COLUMNS)?;
    for i in order(o) {
        let p = &o.points[i];
        let seq = f64::from(p.case.scorer.exact.model().training.seq_len);
        let mut row = vec![
            rank[i].map_or(String::new(), |r| r.to_string()),
            p.point.gpus.to_string(),
            p.point.global_batch.to_string(),
            format!("{}", seq * f64::from(p.point.global_batch)),
            o.on_front[i].to_string(),
        ];
        match (p.best(), &p.train) {
            (Some(r), Some(t)) => {
                let m = &r.metrics;
                row.extend([
                    r.plan.to_string(),
                    format!("{}", m.step_time_s),
                    format!("{}", m.tokens_per_s),
                    format!("{}", m.tokens_per_s_per_gpu),
                    format!("{}", m.mfu),
                    format!("{}", m.memory_peak_bytes / GIB),
                    format!("{}", p.headroom_bytes().unwrap_or(0.0) / GIB),
                    format!("{}", t.steps),
                    format!("{}", t.days),
                    format!("{}", t.gpu_hours),
                    t.usd.map_or(String::new(), |d| format!("{d}")),
                    String::new(),
                ]);
            }
            _ => {
                row.extend(std::iter::repeat_n(String::new(), 11));
                row.push(no_plan(p));
            }
        }
        w.write_record(row)?;
    }
    w.flush()?;
    Ok(())
}
