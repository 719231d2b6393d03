//! `autoplan place-experts`: MoE expert placement and replication for one layer (seed 004
//! chapter 4), compared with the contiguous default and DeepSeek's EPLB.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{bail, Context};
use autoplan_cluster::{resolve_cluster, Precision};
use autoplan_placement::{
    loads, solve, Candidate, ExactOptions, HeuristicOptions, Instance, InstanceOptions, Objective,
    Report, SolveOptions, Topology,
};

use super::Format;
use crate::fmt::percent_saved;

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("load-source").required(true).args(["loads", "zipf", "uniform"])))]
pub struct Args {
    /// Cluster: a bundled name (see `autoplan clusters`) or a cluster TOML file.
    #[arg(long)]
    pub cluster: String,
    /// Number of experts of the MoE layer (E).
    #[arg(long)]
    pub experts: usize,
    /// Expert-parallel group size (P): the first P GPUs of the cluster, whole nodes first.
    #[arg(long)]
    pub ep: usize,
    /// Expert slots per GPU (L); slots beyond E/P hold redundant copies.
    #[arg(long)]
    pub slots: usize,
    /// Token trace: CSV (`expert,tokens` or `source,expert,tokens`) or JSON
    /// (`{"experts": [...]}` or `{"tokens": [[...], ...]}`), by file extension.
    #[arg(long, value_name = "FILE")]
    pub loads: Option<std::path::PathBuf>,
    /// Synthetic Zipf loads with this exponent (expert ranks permuted by --seed).
    #[arg(long, value_name = "S")]
    pub zipf: Option<f64>,
    /// Synthetic uniform loads.
    #[arg(long)]
    pub uniform: bool,
    /// Seed of the synthetic loads' permutation and of the local search.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Routed (token, expert) pairs each GPU sends, for synthetic loads (4096 tokens × top-8).
    #[arg(long, default_value_t = 32768.0)]
    pub tokens_per_gpu: f64,
    /// Model hidden size: a token is hidden × 2 bytes on the wire (bf16).
    #[arg(long, default_value_t = 7168)]
    pub hidden: u64,
    /// Expert FFN hidden size: an expert holds 3·hidden·ffn bf16 weights (gated MLP) and does
    /// 6·hidden·ffn FLOPs per token forward.
    #[arg(long, default_value_t = 2048)]
    pub expert_ffn_hidden: u64,
    /// Fraction of the GPU's bf16 peak the expert GEMMs reach.
    #[arg(long, default_value_t = 0.5)]
    pub expert_mfu: f64,
    /// Ignore expert compute: minimise communication only, as the thesis does.
    #[arg(long)]
    pub comm_only: bool,
    /// All-to-all rounds (dispatch + combine) of this layer per training step, over which the
    /// replicas' once-per-step gradient all-reduce is amortised: 2 × micro-batches (forward
    /// and backward). 0 prices replicas as free, as the thesis's objective does.
    #[arg(long, value_name = "N", default_value_t = 2.0)]
    pub rounds_per_step: f64,
    /// Measured α-β matrix (CSV `src,dst,alpha_us,bw_gbps`, every ordered pair) replacing the
    /// cluster's intra/inter-node values.
    #[arg(long, value_name = "FILE")]
    pub alpha_beta: Option<std::path::PathBuf>,
    /// What to minimise: the synchronous all-to-all time or the thesis's Σ(α + V/β).
    #[arg(long, value_enum, default_value_t = ObjectiveArg::Synchronous)]
    pub objective: ObjectiveArg,
    /// Also solve the MILP exactly (small instances; proves optimality).
    #[arg(long)]
    pub exact: bool,
    /// Time limit of the exact solver, seconds (without it, it runs to proven optimality).
    #[arg(long, value_name = "S")]
    pub time_limit: Option<f64>,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum ObjectiveArg {
    Synchronous,
    Thesis,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (inst, describe) = build(&args)?;
    let opts = SolveOptions {
        heuristic: HeuristicOptions {
            seed: args.seed,
            ..HeuristicOptions::default()
        },
        exact: args.exact.then_some(ExactOptions {
            time_limit_s: args.time_limit,
            ..ExactOptions::default()
        }),
        ..SolveOptions::default()
    };
    let report = solve(&inst, &opts)?;
    for c in candidates(&report) {
        let m = &c.metrics;
        super::ensure_finite(
            &format!("placement `{}`", c.name),
            &[
                ("objective", m.objective_s),
                ("all-to-all time", m.alltoall_time_s),
                ("thesis objective", m.thesis_s),
                ("compute time", m.compute_s),
                ("replica sync time", m.replica_sync_s),
                ("cross-node bytes", m.cross_node_bytes),
                ("max/mean load", m.max_over_mean_load),
            ],
        )?;
    }
    let mut out = std::io::stdout().lock();
    match args.format {
        Format::Table => table(&mut out, &inst, &report, &describe)?,
        Format::Json => {
            serde_json::to_writer_pretty(&mut out, &json(&inst, &report))?;
            writeln!(out)?;
        }
        Format::Csv => csv_out(&mut out, &report)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Every numeric flag against its range, before anything is allocated from it (the bounds
/// are the placement crate's, see `MAX_EP` and friends for why).
fn check_flags(args: &Args) -> anyhow::Result<()> {
    use autoplan_placement::{MAX_EP, MAX_EXPERTS, MAX_SLOTS, MAX_TOTAL_SLOTS};
    for (flag, v, max) in [
        ("--experts", args.experts, MAX_EXPERTS),
        ("--ep", args.ep, MAX_EP),
        ("--slots", args.slots, MAX_SLOTS),
    ] {
        if !(1..=max).contains(&v) {
            bail!("{flag} {v}: expected [1, {max}]");
        }
    }
    if args.ep * args.slots > MAX_TOTAL_SLOTS {
        bail!(
            "--ep {} × --slots {} = {} slots: expected at most {MAX_TOTAL_SLOTS} in the group \
             (the solvers' search grows with it)",
            args.ep,
            args.slots,
            args.ep * args.slots
        );
    }
    // Model dimensions: the model files' bound (2^24, ten times anything built).
    let max_dim = autoplan_graph::MAX_DIM;
    for (flag, v) in [
        ("--hidden", args.hidden),
        ("--expert-ffn-hidden", args.expert_ffn_hidden),
    ] {
        if !(1..=max_dim).contains(&v) {
            bail!("{flag} {v}: expected [1, {max_dim}]");
        }
    }
    // Routed pairs per GPU: (0, 2^40]; a step routes ~10^5 (4096 tokens × top-8).
    let t = args.tokens_per_gpu;
    if !(t.is_finite() && t > 0.0 && t <= (1u64 << 40) as f64) {
        bail!("--tokens-per-gpu {t}: expected a number in (0, 2^40]");
    }
    if let Some(s) = args.zipf {
        // Beyond 100 every load but the hottest expert's is below 2^-100 of it: one-hot.
        if !(s.is_finite() && (0.0..=100.0).contains(&s)) {
            bail!("--zipf = {s}: expected an exponent in [0, 100]");
        }
    }
    if let Some(tl) = args.time_limit {
        let max = autoplan_placement::exact::MAX_TIME_LIMIT_S;
        if !(tl.is_finite() && tl > 0.0 && tl <= max) {
            bail!("--time-limit {tl}: expected seconds in (0, {max}] (one day)");
        }
    }
    Ok(())
}

fn build(args: &Args) -> anyhow::Result<(Instance, String)> {
    check_flags(args)?;
    let cluster = resolve_cluster(&args.cluster)?;
    let mut topo = Topology::from_cluster(&cluster, args.ep)?;
    if let Some(path) = &args.alpha_beta {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("{}: cannot read", path.display()))?;
        let (alpha, inv_beta) =
            autoplan_placement::parse_alpha_beta_csv(&path.display().to_string(), &text, args.ep)?;
        let node_of = (0..args.ep).map(|g| topo.node_of(g)).collect();
        topo = Topology::from_matrices(node_of, alpha, inv_beta)?;
    }
    let total = args.tokens_per_gpu * args.ep as f64;
    if !(args.tokens_per_gpu.is_finite() && args.tokens_per_gpu > 0.0) {
        bail!("--tokens-per-gpu = {}: must be > 0", args.tokens_per_gpu);
    }
    let (load, what) = match (&args.loads, args.zipf) {
        (Some(path), _) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("{}: cannot read", path.display()))?;
            let name = path.display().to_string();
            let l = if path.extension().is_some_and(|e| e == "json") {
                loads::parse_json(&name, &text)?
            } else {
                loads::parse_csv(&name, &text)?
            };
            (l, format!("loads from {name}"))
        }
        (None, Some(s)) => {
            if !(s.is_finite() && s >= 0.0) {
                bail!("--zipf = {s}: the exponent must be a finite number >= 0");
            }
            (
                loads::zipf(args.experts, s, total, args.seed),
                format!("Zipf({s}) loads, seed {}", args.seed),
            )
        }
        (None, None) => (
            loads::uniform(args.experts, total),
            "uniform loads".to_string(),
        ),
    };
    let demand = load.demand(args.ep, args.experts, &what)?;
    if !(args.expert_mfu > 0.0 && args.expert_mfu <= 1.0) {
        bail!("--expert-mfu = {}: must be in (0, 1]", args.expert_mfu);
    }
    let (h, f) = (args.hidden as f64, args.expert_ffn_hidden as f64);
    let compute_s_per_token = if args.comm_only {
        0.0
    } else {
        let peak = cluster.gpu.peak(Precision::Bf16).with_context(|| {
            format!(
                "cluster `{}`: GPU {} has no bf16 peak; pass --comm-only",
                cluster.name, cluster.gpu.name
            )
        })?;
        // Forward FLOPs of a gated expert MLP per token: 3 GEMMs of 2·h·f.
        6.0 * h * f / (peak * args.expert_mfu)
    };
    if !(args.rounds_per_step.is_finite() && args.rounds_per_step >= 0.0) {
        bail!(
            "--rounds-per-step must be a number ≥ 0, got {}",
            args.rounds_per_step
        );
    }
    // A replicated expert's gradients: 3·h·f parameters in fp32 main gradients (Megatron's
    // default for bf16, autoplan-memory's bytes per parameter), all-reduced once per step.
    let replica_sync_bytes = if args.rounds_per_step > 0.0 {
        3.0 * h * f * 4.0 / args.rounds_per_step
    } else {
        0.0
    };
    let opts = InstanceOptions {
        bytes_per_token: h * 2.0,
        expert_bytes: 3.0 * h * f * 2.0,
        compute_s_per_token,
        replica_sync_bytes,
        objective: match args.objective {
            ObjectiveArg::Synchronous => Objective::Synchronous,
            ObjectiveArg::Thesis => Objective::Thesis,
        },
    };
    let inst = Instance::new(topo, args.experts, args.slots, demand, opts)?;
    let describe = format!(
        "E={} experts on EP={} GPUs ({} nodes) of `{}`, L={} slots per GPU, {}, objective {}{}",
        args.experts,
        args.ep,
        inst.topology().nodes(),
        cluster.name,
        args.slots,
        what,
        match args.objective {
            ObjectiveArg::Synchronous => "synchronous all-to-all",
            ObjectiveArg::Thesis => "thesis Σ(α+V/β)",
        },
        if args.comm_only {
            ""
        } else {
            " + expert compute"
        },
    );
    Ok((inst, describe))
}

fn candidates(r: &Report) -> Vec<&Candidate> {
    let mut v = vec![&r.contiguous, &r.eplb, &r.heuristic];
    if let Some(x) = &r.exact {
        v.push(x);
    }
    v
}

fn table(out: &mut impl Write, inst: &Instance, r: &Report, describe: &str) -> anyhow::Result<()> {
    writeln!(out, "{describe}")?;
    writeln!(
        out,
        "{:<11} {:>13} {:>11} {:>11} {:>11} {:>9} {:>10} {:>9} {:>8}",
        "placement",
        "objective ms",
        "a2a ms",
        "thesis ms",
        "compute ms",
        "sync ms",
        "xnode MB",
        "max/mean",
        "copies"
    )?;
    for c in candidates(r) {
        let m = &c.metrics;
        writeln!(
            out,
            "{:<11} {:>13.4} {:>11.4} {:>11.4} {:>11.4} {:>9.4} {:>10.2} {:>9.3} {:>8}",
            c.name,
            m.objective_s * 1e3,
            m.alltoall_time_s * 1e3,
            m.thesis_s * 1e3,
            m.compute_s * 1e3,
            m.replica_sync_s * 1e3,
            m.cross_node_bytes / 1e6,
            m.max_over_mean_load,
            c.placement.copies(),
        )?;
    }
    let best = r.best();
    let base = r.contiguous.metrics.objective_s;
    writeln!(
        out,
        "best: {} — objective {:.1}% below contiguous, {:.1}% below EPLB; all-to-all {:.4} ms vs {:.4} ms contiguous",
        best.name,
        percent_saved(base, best.metrics.objective_s),
        percent_saved(r.eplb.metrics.objective_s, best.metrics.objective_s),
        best.metrics.alltoall_time_s * 1e3,
        r.contiguous.metrics.alltoall_time_s * 1e3,
    )?;
    if let Some(s) = r.exact_status {
        writeln!(
            out,
            "exact solver: {}",
            serde_json::to_value(s)?.as_str().unwrap_or("?")
        )?;
    }
    writeln!(
        out,
        "lower bound {:.4} ms ({}); heuristic within {:.1}% of it ({} evaluations, {} moves kept)",
        r.lower_bound_s * 1e3,
        serde_json::to_value(r.bound_kind)?.as_str().unwrap_or("?"),
        r.heuristic_gap * 100.0,
        r.heuristic_stats.evaluations,
        r.heuristic_stats.improvements,
    )?;
    writeln!(
        out,
        "replica memory: up to {} copies = {:.2} GiB of expert weights per GPU",
        best.metrics.max_copies_per_gpu,
        best.metrics.max_expert_bytes_per_gpu / (1u64 << 30) as f64
    )?;
    writeln!(out, "placement ({}): GPU (node): experts", best.name)?;
    for (g, hosted) in best.placement.gpus.iter().enumerate() {
        let list: Vec<String> = hosted.iter().map(|e| e.to_string()).collect();
        writeln!(
            out,
            "  {g:>4} ({:>3}): {}",
            inst.topology().node_of(g),
            list.join(" ")
        )?;
    }
    Ok(())
}

fn json(inst: &Instance, r: &Report) -> serde_json::Value {
    let best = r.best();
    let e_n = inst.experts();
    let routing: Vec<serde_json::Value> = best
        .routing
        .flows
        .iter()
        .enumerate()
        .filter(|(_, f)| !f.is_empty())
        .map(|(k, f)| {
            serde_json::json!({
                "source": k / e_n,
                "expert": k % e_n,
                "to": f.iter().map(|&(g, x)| serde_json::json!([g, x])).collect::<Vec<_>>(),
            })
        })
        .collect();
    serde_json::json!({
        "objective": r.objective,
        "best": best.name,
        "alltoall_time_s": best.metrics.alltoall_time_s,
        "baseline_alltoall_time_s": r.contiguous.metrics.alltoall_time_s,
        "eplb_alltoall_time_s": r.eplb.metrics.alltoall_time_s,
        "objective_s": best.metrics.objective_s,
        "thesis_s": best.metrics.thesis_s,
        "cross_node_bytes": best.metrics.cross_node_bytes,
        "max_over_mean_load": best.metrics.max_over_mean_load,
        "lower_bound_s": r.lower_bound_s,
        "bound_kind": r.bound_kind,
        "heuristic_gap": r.heuristic_gap,
        "exact_status": r.exact_status,
        "placement": best.placement.gpus,
        "routing": routing,
        "candidates": candidates(r),
    })
}

fn csv_out(out: &mut impl Write, r: &Report) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record([
        "placement",
        "objective_s",
        "alltoall_time_s",
        "dispatch_s",
        "combine_s",
        "thesis_s",
        "compute_s",
        "cross_node_bytes",
        "max_over_mean_load",
        "copies",
        "replica_sync_s",
    ])?;
    for c in candidates(r) {
        let m = &c.metrics;
        w.write_record([
            c.name.to_string(),
            m.objective_s.to_string(),
            m.alltoall_time_s.to_string(),
            m.dispatch_s.to_string(),
            m.combine_s.to_string(),
            m.thesis_s.to_string(),
            m.compute_s.to_string(),
            m.cross_node_bytes.to_string(),
            m.max_over_mean_load.to_string(),
            c.placement.copies().to_string(),
            m.replica_sync_s.to_string(),
        ])?;
    }
    w.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(argv: &[&str]) -> Args {
        Cli::try_parse_from(std::iter::once("place-experts").chain(argv.iter().copied()))
            .unwrap()
            .args
    }

    #[test]
    fn json_has_the_documented_keys_and_beats_contiguous() {
        let args = parse(&[
            "--cluster",
            "a100x64",
            "--experts",
            "32",
            "--ep",
            "16",
            "--slots",
            "3",
            "--zipf",
            "1.2",
            "--format",
            "json",
        ]);
        let (inst, _) = build(&args).unwrap();
        let report = solve(&inst, &SolveOptions::default()).unwrap();
        let v = json(&inst, &report);
        for key in [
            "alltoall_time_s",
            "baseline_alltoall_time_s",
            "cross_node_bytes",
            "max_over_mean_load",
            "placement",
            "routing",
        ] {
            assert!(v.get(key).is_some(), "missing {key}");
        }
        assert_eq!(v["placement"].as_array().unwrap().len(), 16);
        let best = v["objective_s"].as_f64().unwrap();
        assert!(best < report.contiguous.metrics.objective_s);
    }

    #[test]
    fn bad_inputs_are_clear_errors() {
        let e = build(&parse(&[
            "--cluster",
            "a100x64",
            "--experts",
            "256",
            "--ep",
            "128",
            "--slots",
            "4",
            "--uniform",
        ]))
        .unwrap_err();
        assert!(
            format!("{e:#}").contains("does not fit on cluster `a100x64`"),
            "{e:#}"
        );
        let e = build(&parse(&[
            "--cluster",
            "a100x64",
            "--experts",
            "256",
            "--ep",
            "8",
            "--slots",
            "4",
            "--uniform",
        ]))
        .unwrap_err();
        assert!(format!("{e:#}").contains("256 experts do not fit"), "{e:#}");
        let e = build(&parse(&[
            "--cluster",
            "a100x64",
            "--experts",
            "8",
            "--ep",
            "8",
            "--slots",
            "1",
            "--zipf=-1",
        ]))
        .unwrap_err();
        assert!(format!("{e:#}").contains("--zipf = -1"), "{e:#}");
    }
}
