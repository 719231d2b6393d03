//! The search's output: the header, the ranked table, its stats, JSON and CSV.

use super::*;

pub(super) fn header(
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
        super::super::show_cluster::domain_note(c),
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
pub(super) fn knobs(p: &autoplan_plan::Plan) -> String {
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

pub(super) fn ranking(
    out: &mut impl Write,
    args: &Args,
    scorer: &Scorer,
    o: &Outcome<Metrics>,
    variants: &Variants,
) -> anyhow::Result<()> {
    let hbm = scorer.exact.cluster().gpu.hbm_bytes;
    let moe = scorer.exact.model().moe.is_some();
    let (model, cluster) = (scorer.exact.model(), scorer.exact.cluster());
    let train = |r: &autoplan_search::Ranked<Metrics>| {
        super::super::budget::train_time(model, cluster, r.step_time_s)
    };
    if let Some(t) = o.plans.first().and_then(train) {
        writeln!(
            out,
            "time to train {} tokens ({} tokens per step){}: under each row",
            crate::fmt::si_count(t.tokens),
            crate::fmt::si_count(
                f64::from(model.training.seq_len) * f64::from(model.training.global_batch)
            ),
            cluster
                .price_usd_per_gpu_hour
                .map_or(String::new(), |p| format!(" at ${p}/GPU-hour"))
        )?;
    }
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
        if let Some(t) = train(r) {
            super::super::budget::ensure_finite(&format!("plan {}", i + 1), &t)?;
            writeln!(out, "     ↳ {}", super::super::budget::line(&t))?;
        }
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

pub(super) fn stats_line(s: &Stats) -> String {
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

pub(super) fn stats(out: &mut impl Write, s: &Stats) -> anyhow::Result<()> {
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

pub(super) fn row_json(
    rank: usize,
    r: &autoplan_search::Ranked<Metrics>,
    hbm: f64,
) -> serde_json::Value {
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

pub(super) fn json(
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
            if let Some(t) = super::super::budget::train_time(
                scorer.exact.model(),
                scorer.exact.cluster(),
                r.step_time_s,
            ) {
                v["train"] = super::super::budget::json(&t);
            }
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

pub(super) fn csv(
    out: &mut impl Write,
    scorer: &Scorer,
    o: &Outcome<Metrics>,
    variants: &Variants,
) -> anyhow::Result<()> {
    let hbm = scorer.exact.cluster().gpu.hbm_bytes;
    let (model, cluster) = (scorer.exact.model(), scorer.exact.cluster());
    let train = |r: &autoplan_search::Ranked<Metrics>| {
        super::super::budget::train_time(model, cluster, r.step_time_s)
    };
    // With a token budget: its columns at the end (absent without one).
    let budget = super::super::budget::budget(model, cluster).is_some();
    let mut w = ::csv::Writer::from_writer(out);
    let mut head = vec![
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
    ];
    if budget {
        head.extend(["train_steps", "train_days", "gpu_hours", "usd"]);
    }
    w.write_record(head)?;
    for (i, r) in o.plans.iter().enumerate() {
        let m = &r.metrics;
        let p = &r.plan;
        let mut row = vec![
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
        ];
        if let Some(t) = train(r) {
            row.extend([
                format!("{}", t.steps),
                format!("{}", t.days),
                format!("{}", t.gpu_hours),
                t.usd.map_or(String::new(), |d| format!("{d}")),
            ]);
        }
        w.write_record(row)?;
    }
    w.flush()?;
    Ok(())
}

/// The per-layer communication rows of plan `rank`'s report as CSV (the second table of
/// `--format csv --explain N`): the columns of `evaluate`'s table, numbers unrounded, seconds
/// and bytes per call / per step; `layer` is empty for pipeline and step-level collectives.
pub(super) fn comm_csv(
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
