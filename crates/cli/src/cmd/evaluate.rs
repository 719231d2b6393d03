//! `autoplan evaluate --model M --cluster C --plan "..."`: one plan's full report (summary,
//! step-time breakdown, per-layer communication table, memory), or why it cannot run (exit 2).

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use autoplan_evaluate::{AttentionKernel, EvalOptions, Evaluator, Infeasible, Report};
use autoplan_plan::Plan;

use super::Format;
use crate::fmt::{bytes_short, duration, percent_of, serde_name, GIB};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A bundled model name (`autoplan models`), a model TOML, or a Hugging Face config.json.
    #[arg(long)]
    pub model: String,
    /// A bundled cluster name (`autoplan clusters`) or a cluster TOML.
    #[arg(long)]
    pub cluster: String,
    /// The plan, e.g. "tp=8,sp=on,pp=8,vpp=3,mbs=1,recompute=selective,zero=1"; `dp` defaults to
    /// the GPUs left over. Selective recompute takes Megatron-Core's --recompute-modules as
    /// `recompute=selective:layernorm+mla_up_proj+moe_act` (core_attn, layernorm, mla_up_proj,
    /// moe_act, mlp, moe, shared_experts; default core_attn).
    #[arg(long)]
    pub plan: String,
    #[command(flatten)]
    pub workload: super::Workload,
    #[command(flatten)]
    pub budget: super::budget::BudgetArgs,
    #[command(flatten)]
    pub target: super::target::TargetArgs,
    /// Attention kernel: flash (the framework's fused kernel: cuDNN's on Hopper and Blackwell),
    /// flash2 (FlashAttention-2's sm80 kernels on any GPU: PyTorch SDPA's flash backend, which
    /// torch 2.5.1-2.8 picks first, or the flash-attn 2.x package; on Hopper about half cuDNN's
    /// forward rate) or unfused (full s×s scores, pre-2023 Megatron). Unfused on GPUs no fused
    /// kernel runs on (V100, Pascal), whatever this says.
    #[arg(long, value_enum, default_value_t = Attn::Flash)]
    pub attention: Attn,
    /// Do not overlap the DP gradient reduction with the backward pass.
    #[arg(long)]
    pub no_dp_overlap: bool,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Print the plan as a framework's launch configuration (megatron flags, torchtitan TOML,
    /// deepspeed JSON and Megatron-DeepSpeed arguments), or the algorithm and protocol it
    /// assumed for every collective as an NCCL tuner config (nccl), instead of the report. A
    /// plan the framework cannot run is refused with the rule and its source.
    #[arg(long, value_enum)]
    pub emit: Option<Emit>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attn {
    Flash,
    Flash2,
    Unfused,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Emit {
    /// Megatron-LM `pretrain_gpt.py` flags (the Megatron-Core version of --framework).
    Megatron,
    /// torchtitan v0.2.2's TOML job config.
    Torchtitan,
    /// DeepSpeed 0.19.5's JSON config with the Megatron-DeepSpeed arguments, as a shell
    /// script.
    Deepspeed,
    /// NCCL's example tuner plugin CSV (`NCCL_TUNER_CONFIG_FILE`), with NCCL ≥ 2.24's
    /// per-function `NCCL_ALGO` / `NCCL_PROTO` in its comments where one choice per function
    /// is enough (docs/cli.md "evaluate --emit nccl").
    Nccl,
}

impl Emit {
    /// The framework export of `plan`; `None` for `nccl`, which needs the evaluated report.
    /// The Megatron-Core version is `framework`'s where it names one.
    pub fn framework_export(
        self,
        plan: &Plan,
        model: &autoplan_graph::ModelSpec,
        cluster: &autoplan_cluster::Cluster,
        framework: autoplan_plan::Framework,
    ) -> Option<Result<String, crate::emit::ExportError>> {
        // An NVLink domain of several nodes (NVL72): the EP dispatch inside it is priced over
        // NVLink, which only Megatron's flex dispatcher runs, with its HybridEP backend
        // (`Framework::check_on`).
        let mnnvl = cluster.multi_node_nvlink();
        Some(match self {
            Emit::Megatron => crate::emit::megatron::emit_on(plan, model, framework, cluster),
            Emit::Torchtitan => crate::emit::torchtitan::emit(plan, model, mnnvl),
            Emit::Deepspeed => crate::emit::deepspeed::emit(plan, model),
            Emit::Nccl => return None,
        })
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // The report is several tables of different shapes (summary, breakdown, communication,
    // memory): no one CSV. Refuse rather than print the human table under a CSV flag.
    if args.format == Format::Csv && args.emit.is_none() {
        anyhow::bail!(
            "--format csv: evaluate prints a report of several tables, not one CSV; use \
             --format json (every number), or `autoplan search --fix <the plan> --explain 1 \
             --format csv` for the per-layer communication rows"
        );
    }
    let (model, cluster) = args.budget.apply(super::load_inputs(
        &args.model,
        &args.cluster,
        &args.workload,
    )?)?;
    let plan = Plan::parse_for_gpus(&args.plan, cluster.gpus() as u64)
        .with_context(|| format!("--plan {:?}", args.plan))?;
    let mut out = std::io::stdout().lock();
    let target = args.target.target()?;

    if let Some(export) = args
        .emit
        .and_then(|e| e.framework_export(&plan, &model, &cluster, target.framework))
    {
        // Only a plan the format's framework runs is exported, with the table's reason
        // otherwise; no flag for a knob the model has no use for.
        let text = export.with_context(|| format!("--plan {:?}: not exported", args.plan))?;
        write!(out, "{text}")?;
        return Ok(ExitCode::SUCCESS);
    }

    // The framework's cost profile (what it overlaps and fuses), then the explicit flags.
    let mut opts = EvalOptions {
        memory: args.workload.memory_options(&cluster)?,
        ..EvalOptions::default()
    }
    .with_profile(&target.framework.profile(), model.training.precision);
    match args.attention {
        Attn::Flash => {}
        Attn::Flash2 => opts.attention = AttentionKernel::FlashAttention2,
        Attn::Unfused => opts.attention = AttentionKernel::Unfused,
    }
    if args.no_dp_overlap {
        opts.dp_overlap = false;
    }
    let ev = Evaluator::new(&model, &cluster, opts);
    let note = super::calibration_note(&cluster);
    let caveats = super::caveats(
        &args.model,
        &args.workload,
        &cluster,
        &model,
        target.framework,
    );
    if args.format != Format::Json {
        super::print_caveats(&caveats);
    }
    // A valid plan the framework cannot run: refused with the rule and its source (exit 3,
    // infeasible). Invalid plans keep their own error below.
    if let (Ok(()), Err(refusal)) = (
        plan.check(&model, cluster.gpus()),
        target
            .framework
            .check_on(&plan, &model, cluster.multi_node_nvlink()),
    ) {
        let hint = if target.framework == autoplan_plan::Framework::Any {
            "no framework runs it and autoplan cannot price it"
        } else {
            "evaluate it anyway with --framework any"
        };
        if args.format == Format::Json {
            serde_json::to_writer_pretty(
                &mut out,
                &serde_json::json!({
                    "valid": true,
                    "runnable": false,
                    "framework": target.framework.spec(),
                    "reason": refusal.message(),
                    "setting": refusal.setting(),
                    "source": refusal.source,
                }),
            )?;
            writeln!(out)?;
        } else {
            eprintln!("error: {refusal}; {hint}");
        }
        return Err(crate::exit::Infeasible::reported().into());
    }
    match ev.report(&plan) {
        Ok(r) if args.emit == Some(Emit::Nccl) => {
            nccl_config(&mut out, &args.plan, &ev, &r)?;
            Ok(ExitCode::SUCCESS)
        }
        Ok(r) => {
            super::ensure_finite_report(&format!("plan {:?}", args.plan), &r)?;
            let free = r.hbm_bytes - r.metrics.memory_peak_bytes;
            if free < target.min_headroom_bytes && args.format != Format::Json {
                eprintln!(
                    "warning: {:.2} GiB of HBM left free per GPU, less than --min-headroom \
                     {:.2} GiB: `search` would not rank this plan",
                    free / GIB,
                    target.min_headroom_bytes / GIB
                );
            }
            match args.format {
                Format::Json => {
                    let mut v = json(&r);
                    v["calibrated"] = note.is_none().into();
                    // The stderr caveats, for a program reading the JSON.
                    v["caveats"] = caveats.clone().into();
                    v["min_headroom_gib"] = (target.min_headroom_bytes / GIB).into();
                    v["below_min_headroom"] = (free < target.min_headroom_bytes).into();
                    if let Some(t) = train_time(&ev, &r)? {
                        v["train"] = super::budget::json(&t);
                    }
                    serde_json::to_writer_pretty(&mut out, &v)?;
                    writeln!(out)?;
                }
                Format::Table | Format::Csv => table(&mut out, &args.plan, &ev, &plan, &r)?,
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            // Out of memory: the breakdown says what to cut.
            let memory = match e {
                Infeasible::OutOfMemory { .. } | Infeasible::OutOfHostMemory { .. } => {
                    ev.memory_breakdown(&plan).ok()
                }
                Infeasible::Invalid(_) => None,
            };
            if args.format == Format::Json {
                let (valid, excess) = match &e {
                    Infeasible::Invalid(_) => (false, None),
                    Infeasible::OutOfMemory {
                        peak_bytes,
                        hbm_bytes,
                    } => (true, Some((peak_bytes - hbm_bytes) / GIB)),
                    Infeasible::OutOfHostMemory { .. } => (true, None),
                };
                serde_json::to_writer_pretty(
                    &mut out,
                    &serde_json::json!({
                        "valid": valid,
                        "fits": false,
                        "reason": e.to_string(),
                        "excess_gib": excess,
                        "memory": memory,
                    }),
                )?;
                writeln!(out)?;
            } else {
                eprintln!("error: {e}");
                if let Some(mm) = &memory {
                    let mut err = std::io::stderr().lock();
                    memory_table(&mut err, mm)?;
                }
            }
            // Reported above; an invalid plan is bad input (2), a valid one that does not fit
            // is infeasible (3).
            match e {
                Infeasible::OutOfMemory { .. } | Infeasible::OutOfHostMemory { .. } => {
                    Err(crate::exit::Infeasible::reported().into())
                }
                Infeasible::Invalid(_) => Ok(ExitCode::from(crate::exit::BAD_INPUT)),
            }
        }
    }
}

/// `--emit nccl`: the tuner config of the collectives the report booked (every distinct
/// collective, size range and group shape; frameworks.md §4.3), the per-function env values
/// where they suffice (§4.2), and the point-to-point calls NCCL's tuner does not see.
pub(crate) fn nccl_config(
    out: &mut impl Write,
    plan_str: &str,
    ev: &Evaluator,
    r: &Report,
) -> anyhow::Result<()> {
    use autoplan_cost::nccl;
    let calls: Vec<nccl::Booked> = r
        .comm
        .iter()
        .filter(|row| row.calls_per_step > 0.0 && row.bytes > 0.0 && row.group.size > 1)
        .map(|row| nccl::Booked {
            collective: row.collective,
            bytes: row.bytes,
            nodes: row.group.nodes,
            ranks: row.group.size,
            algorithm: row.algorithm,
            protocol: row.protocol,
        })
        .collect();
    let (lines, other) = nccl::tuner_lines(&calls);
    // A collective NCCL tunes, booked with an algorithm NCCL lacks (`algo=any`, library
    // `any`): NCCL cannot run what the plan assumed, so there is nothing faithful to export.
    if let Some(b) = other
        .iter()
        .find(|b| nccl::tuner_collective(b.collective).is_some())
    {
        anyhow::bail!(
            "--emit nccl: plan {plan_str:?} assumes {} for the {} on {} ranks, which NCCL does \
             not have (the seeds' menu: algo=any or library any); price it under the NCCL \
             library (algo=cheapest on a cluster with library nccl) to export it",
            b.algorithm,
            b.collective,
            b.ranks
        );
    }
    let c = ev.cluster();
    writeln!(
        out,
        "# NCCL tuner config (example plugin, NCCL >= 2.27.5): {} on {}, plan {plan_str}",
        ev.model().name,
        c.name
    )?;
    writeln!(
        out,
        "# load: NCCL_TUNER_PLUGIN=example NCCL_TUNER_CONFIG_FILE=<this file>; nNodes counts \
         NVLink domains ({} GPUs each)",
        c.domain_gpus()
    )?;
    writeln!(
        out,
        "# channels -1 = NCCL's count only with a plugin returning 0 channels (ROCm/rccl PR \
         #1985); the stock example sets 1 (plugin.c L360-361): patch it or fill the column"
    )?;
    let (algo, proto) = nccl::per_function_env(&lines);
    match (&algo, &proto) {
        (Some(a), Some(p)) => writeln!(
            out,
            "# one choice per function (NCCL >= 2.24): NCCL_ALGO=\"{a}\" NCCL_PROTO=\"{p}\""
        )?,
        (Some(a), None) => writeln!(
            out,
            "# one algorithm per function (NCCL >= 2.24): NCCL_ALGO=\"{a}\"; protocols vary \
             by size: use this file"
        )?,
        _ if lines.is_empty() => {}
        _ => writeln!(
            out,
            "# algorithms vary by size within a function: NCCL_ALGO cannot express it, use \
             this file"
        )?,
    }
    let mut seen: Vec<(autoplan_cost::Collective, u32, u32)> = Vec::new();
    for b in &other {
        let key = (b.collective, b.nodes, b.ranks);
        if !seen.contains(&key) {
            seen.push(key);
            writeln!(
                out,
                "# not tuned (NCCL runs it as point-to-point send/recv): {} on {} ranks over {} \
                 node(s), {}",
                b.collective, b.ranks, b.nodes, b.algorithm
            )?;
        }
    }
    writeln!(
        out,
        "# collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,\
         numPipeOps,regBuff"
    )?;
    for l in &lines {
        writeln!(out, "{l}")?;
    }
    Ok(())
}

/// The report as JSON (also `autoplan search --explain N --format json`).
pub(crate) fn json(r: &Report) -> serde_json::Value {
    let m = &r.metrics;
    serde_json::json!({
        "step_time_s": m.step_time_s,
        "tokens_per_s": m.tokens_per_s,
        "tokens_per_s_per_gpu": m.tokens_per_s_per_gpu,
        "mfu": m.mfu,
        "hfu": m.hfu,
        "tflops_per_gpu": m.tflops_per_gpu,
        "hw_tflops_per_gpu": m.hw_tflops_per_gpu,
        "memory_peak_gib": m.memory_peak_bytes / GIB,
        "hbm_gib": r.hbm_bytes / GIB,
        "fits": m.memory_peak_bytes <= r.hbm_bytes,
        "dominant_comm": m.dominant_comm,
        "microbatches": r.microbatches,
        "report": r,
    })
}

/// The time to train of a report's plan, when the model states a token budget (checked finite).
fn train_time(
    ev: &Evaluator,
    r: &Report,
) -> anyhow::Result<Option<autoplan_search::train::TrainTime>> {
    let t = super::budget::train_time(ev.model(), ev.cluster(), r.metrics.step_time_s);
    if let Some(t) = &t {
        super::budget::ensure_finite("time to train", t)?;
    }
    Ok(t)
}

/// The full report of one plan as text (also `autoplan search --explain`).
pub(crate) fn table(
    out: &mut impl Write,
    plan_str: &str,
    ev: &Evaluator,
    plan: &Plan,
    r: &Report,
) -> anyhow::Result<()> {
    summary(out, plan_str, ev, plan, r)?;
    writeln!(out)?;
    breakdown_table(out, r)?;
    writeln!(out)?;
    comm_table(out, r)?;
    writeln!(out)?;
    memory_table(out, &r.memory)
}

/// The header: model, cluster, plan, degrees, and the headline metrics.
fn summary(
    out: &mut impl Write,
    plan_str: &str,
    ev: &Evaluator,
    plan: &Plan,
    r: &Report,
) -> anyhow::Result<()> {
    let m = &r.metrics;
    let model = ev.model();
    let c = ev.cluster();
    writeln!(
        out,
        "{} on {} ({} GPUs: {} nodes × {} {}{})",
        model.name,
        c.name,
        c.gpus(),
        c.nodes,
        c.node.gpus_per_node,
        c.gpu.name,
        super::show_cluster::domain_note(c)
    )?;
    writeln!(out, "plan {plan_str}")?;
    writeln!(
        out,
        "  degrees tp={} cp={} dp={} pp={} (vpp {}){}, {} micro-batches of {} × {} tokens",
        plan.tp,
        plan.cp,
        plan.dp,
        plan.pp,
        plan.vpp,
        if model.moe.is_some() {
            format!(" ep={} moe_tp={} edp={}", plan.ep, plan.moe_tp, plan.edp())
        } else {
            String::new()
        },
        r.microbatches,
        plan.mbs,
        model.training.seq_len
    )?;
    writeln!(out)?;
    writeln!(out, "  step time       {}", duration(m.step_time_s))?;
    writeln!(
        out,
        "  throughput      {:.0} tokens/s, {:.1} tokens/s/GPU",
        m.tokens_per_s, m.tokens_per_s_per_gpu
    )?;
    if let Some(t) = train_time(ev, r)? {
        writeln!(out, "  time to train   {}", super::budget::line(&t))?;
    }
    writeln!(
        out,
        "  model TFLOP/s   {:.1} per GPU, MFU {:.1}%   ({} FLOPs/token)",
        m.tflops_per_gpu,
        100.0 * m.mfu,
        match r.attention_flops {
            autoplan_evaluate::AttentionFlops::Causal => "3·(GEMM + causal attention)",
            autoplan_evaluate::AttentionFlops::Full => "3·(GEMM + full s×s attention)",
            autoplan_evaluate::AttentionFlops::Excluded =>
                "3·GEMM (6N: attention core not counted)",
        }
    )?;
    writeln!(
        out,
        "  hw TFLOP/s      {:.1} per GPU, HFU {:.1}%   (with recomputed FLOPs)",
        m.hw_tflops_per_gpu,
        100.0 * m.hfu
    )?;
    writeln!(
        out,
        "  memory peak     {:.2} GiB of {:.2} GiB ({})",
        m.memory_peak_bytes / GIB,
        r.hbm_bytes / GIB,
        if m.memory_peak_bytes <= r.hbm_bytes {
            "fits"
        } else {
            "does not fit"
        }
    )?;
    Ok(())
}

/// The step-time breakdown of the bottleneck stage.
fn breakdown_table(out: &mut impl Write, r: &Report) -> anyhow::Result<()> {
    let m = &r.metrics;
    let b = &r.breakdown;
    writeln!(
        out,
        "step-time breakdown (bottleneck stage {}):",
        r.bottleneck_stage
    )?;
    for (name, v) in [
        ("compute", b.compute_s),
        ("recompute", b.recompute_s),
        ("exposed TP/SP comm", b.tp_exposed_s),
        ("exposed CP comm", b.cp_exposed_s),
        ("exposed EP comm", b.ep_exposed_s),
        ("exposed PP comm", b.pp_exposed_s),
        ("exposed DP comm", b.dp_exposed_s),
        ("pipeline bubble", b.bubble_s),
        ("optimizer step", b.optimizer_s),
        // Only for a plan that offloads (`offload_optimizer`).
        ("offload (host)", b.offload_s),
    ] {
        if name == "offload (host)" && v == 0.0 {
            continue;
        }
        writeln!(
            out,
            "  {name:<20} {:>12} {:>6.1}%",
            duration(v),
            percent_of(v, m.step_time_s)
        )?;
    }
    Ok(())
}

/// The communication rows, one per collective.
fn comm_table(out: &mut impl Write, r: &Report) -> anyhow::Result<()> {
    writeln!(
        out,
        "communication per step (per-layer rows: the bottleneck stage's layers):"
    )?;
    writeln!(
        out,
        "  {:<13} {:<48} {:<9} {:<14} {:<17} {:>5} {:<11} {:>11} {:>8} {:>11} {:>11} {:>11}",
        "layer",
        "collective",
        "pass",
        "primitive",
        "algorithm",
        "group",
        "placement",
        "bytes",
        "calls",
        "time/call",
        "time",
        "exposed"
    )?;
    for row in &r.comm {
        let place = if row.group.intra_node() {
            "intra-node".to_string()
        } else {
            format!("{}×{} nodes", row.group.ranks_per_node, row.group.nodes)
        };
        writeln!(
            out,
            "  {:<13} {:<48} {:<9} {:<14} {:<17} {:>5} {:<11} {:>11} {:>8.0} {:>11} {:>11} {:>11}",
            row.layer.map_or("-", |l| l.name()),
            row.what,
            serde_name(&row.pass),
            serde_name(&row.collective),
            serde_name(&row.algorithm),
            row.group.size,
            place,
            bytes_short(row.bytes),
            row.calls_per_step,
            duration(row.time_per_call),
            duration(row.time),
            duration(row.exposed)
        )?;
    }
    if r.comm.is_empty() {
        writeln!(out, "  (none: a single GPU)")?;
    }
    moe_table(out, r)
}

/// A MoE model's per-layer work beside its GEMMs and collectives (in the compute time).
fn moe_table(out: &mut impl Write, r: &Report) -> anyhow::Result<()> {
    if r.moe.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(
        out,
        "MoE work per step (per-layer rows, the bottleneck stage's layers; part of compute):"
    )?;
    writeln!(
        out,
        "  {:<13} {:<48} {:<9} {:>11} {:>8} {:>11} {:>11}",
        "layer", "work", "pass", "bytes", "calls", "time/call", "time"
    )?;
    for row in &r.moe {
        writeln!(
            out,
            "  {:<13} {:<48} {:<9} {:>11} {:>8.0} {:>11} {:>11}",
            row.layer.name(),
            row.what,
            serde_name(&row.pass),
            if row.bytes > 0.0 {
                bytes_short(row.bytes)
            } else {
                "-".to_string()
            },
            row.calls_per_step,
            duration(row.time_per_call),
            duration(row.time)
        )?;
    }
    Ok(())
}

/// The memory breakdown of the most loaded GPU.
pub(crate) fn memory_table(
    out: &mut impl Write,
    mm: &autoplan_evaluate::MemoryBreakdown,
) -> anyhow::Result<()> {
    writeln!(
        out,
        "memory per GPU (stage {}, {:.1} micro-batches in flight):",
        mm.stage, mm.in_flight
    )?;
    for (name, v) in [
        ("weights", mm.weights),
        ("gradients", mm.grads),
        ("optimizer state", mm.optimizer),
        ("activations", mm.activations),
        ("fp32 logits", mm.logits),
        ("replicated out_linear", mm.extra),
        ("transient buffers", mm.transient),
        ("framework reserve", mm.reserve),
        ("total", mm.total),
    ] {
        writeln!(out, "  {name:<22} {:>10.2} GiB", v / GIB)?;
    }
    if mm.host > 0.0 {
        // Offloaded optimizer state and its gradient copy, in host memory (not in `total`).
        writeln!(
            out,
            "  {:<22} {:>10.2} GiB",
            "host (offloaded)",
            mm.host / GIB
        )?;
    }
    Ok(())
}
