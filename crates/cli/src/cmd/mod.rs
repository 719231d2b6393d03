//! One module per subcommand: each has an `Args` (clap) and a `run(Args) -> anyhow::Result<ExitCode>`.

mod axis;
mod budget;
pub mod collective;
mod collective_fit;
pub mod evaluate;
pub mod place_experts;
pub mod report;
pub mod search;
pub mod show;
pub mod show_cluster;
pub mod show_model;
pub mod sweep;
pub mod target;
pub mod validate;
mod validate_fit;
mod validate_summary;

use crate::fmt::GIB;

/// Output format shared by the commands that print results.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    #[default]
    Table,
    Json,
    Csv,
}

/// The workload flags `evaluate` and `search` share: overrides of the model file's
/// `[training]` section and a resize of the cluster.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Workload {
    /// Override the model's training sequence length.
    #[arg(long)]
    pub seq_len: Option<u32>,
    /// Override the model's global batch (sequences). `search` also takes a list
    /// (1024,2048) or a range of powers of two (512..4096): one search per batch.
    #[arg(long, value_name = "N | LO..HI | A,B,...", value_parser = axis::parse_batches,
          allow_hyphen_values = true)]
    pub global_batch: Option<axis::Sizes>,
    /// Override the model's training precision: bf16, fp16, fp8 (per-tensor delayed
    /// scaling), fp8-current, fp8-block (the FP8 recipes on GPUs with FP8 tensor cores: not A100
    /// or V100), mxfp8, nvfp4 (the last two on Blackwell GPUs). Sets
    /// the GEMMs' peak and bytes; the low-precision recipes keep the attention core and the LM
    /// head in BF16.
    #[arg(long, value_parser = parse_precision, value_name = "PRECISION")]
    pub precision: Option<autoplan_cluster::Precision>,
    /// Resize the cluster to this many GPUs (whole nodes, or part of one node). `search` also
    /// takes a list (512,1024,2048) or a range of powers of two (256..4096): one search per
    /// count, and the Pareto front of time to train against GPU-hours (docs/search.md).
    #[arg(long, value_name = "N | LO..HI | A,B,...", value_parser = axis::parse_gpus,
          allow_hyphen_values = true)]
    pub gpus: Option<axis::Sizes>,
    /// Memory per GPU held outside the model, in GiB: CUDA context, NCCL buffers, allocator
    /// fragmentation (default 3). Raise it to keep a safety margin under HBM.
    #[arg(long, value_name = "GIB")]
    pub reserve: Option<f64>,
    /// Override the MoE model's expected expert load imbalance (max/mean tokens per expert,
    /// in [1, experts]; the model file's `load_imbalance`, with its source).
    #[arg(long, value_name = "MAX/MEAN")]
    pub imbalance: Option<f64>,
}

impl Workload {
    /// The memory model's options: the default, with `--reserve` (checked: a finite,
    /// non-negative size below the GPU's HBM).
    pub(crate) fn memory_options(
        &self,
        cluster: &autoplan_cluster::Cluster,
    ) -> anyhow::Result<autoplan_evaluate::MemoryOptions> {
        let mut o = autoplan_evaluate::MemoryOptions::default();
        if let Some(r) = self.reserve {
            let hbm = cluster.gpu.hbm_bytes / GIB;
            anyhow::ensure!(
                r.is_finite() && (0.0..hbm).contains(&r),
                "--reserve {r:?}: expected GiB in [0, {hbm}) (the GPU's HBM)"
            );
            o.reserve_bytes = r * GIB;
        }
        Ok(o)
    }
}

/// `--precision`: a training precision by name (`autoplan_cluster::Precision`'s names).
fn parse_precision(s: &str) -> Result<autoplan_cluster::Precision, String> {
    let p: autoplan_cluster::Precision = s.parse()?;
    if p.is_training() {
        Ok(p)
    } else {
        Err(format!(
            "`{s}` is a GPU peak format, not a training precision (train FP4 with nvfp4)"
        ))
    }
}

/// The caveat for a GPU whose GEMM and HBM efficiency constants were fitted to no measured run
/// (`ARCH_TABLE`'s `fitted_on`), printed by `evaluate` and `search` on stderr.
pub(crate) fn calibration_note(c: &autoplan_cluster::Cluster) -> Option<String> {
    use autoplan_cost::compute::{arch_efficiency, ARCH_TABLE};
    arch_efficiency(c.gpu.arch).fitted_on.is_none().then(|| {
        let fitted: Vec<String> = ARCH_TABLE
            .iter()
            .filter(|e| e.fitted_on == Some(e.arch))
            .map(|e| format!("{:?}", e.arch))
            .collect();
        format!(
            "no published run on {} calibrates its GEMM and HBM efficiency; its compute \
             times use {} (fitted: {})",
            c.gpu.name,
            if c.gpu.arch.is_blackwell() {
                "Hopper's calibrated constants as a prior"
            } else {
                "uncalibrated defaults"
            },
            fitted.join(", ")
        )
    })
}

/// The caveat for a GPU the cluster runs capped below its rated power (`Gpu::power_capped`):
/// the compute constants are fitted on runs at the rated power and the clocks under a cap are
/// not modelled, so its times read as optimistic. Printed beside [`calibration_note`].
pub(crate) fn power_note(c: &autoplan_cluster::Cluster) -> Option<String> {
    c.gpu.power_capped().map(|(limit, rated)| {
        format!(
            "{}'s GPUs run under a {limit} W power limit, below their {rated} W rating; \
             their clocks under the cap are not modelled (the compute constants are fitted at \
             the rated power): read its times as optimistic",
            c.name
        )
    })
}

/// Every caveat `evaluate`, `search` and `report` give for a model (`--model` argument
/// `model_arg` and workload `w`, loaded as `m` by [`load_inputs`]), a cluster and a framework
/// (on stderr through [`print_caveats`], in their JSON and HTML as these texts): the precision
/// planned in where it is not the model file's ([`precision_note`]), the attention kernel the
/// GPU runs ([`attention_note`]), the GPU's calibration
/// ([`calibration_note`]), its power cap ([`power_note`]), the model's domain
/// ([`domain_note`]) and the framework's profile ([`framework_note`]).
pub(crate) fn caveats(
    model_arg: &str,
    w: &Workload,
    c: &autoplan_cluster::Cluster,
    m: &autoplan_graph::ModelSpec,
    f: autoplan_plan::Framework,
) -> Vec<String> {
    [
        precision_note(model_arg, w, c),
        attention_note(c),
        calibration_note(c),
        power_note(c),
        domain_note(m),
        framework_note(f),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Print [`caveats`] on stderr, each as a `note: ` line (the JSON outputs and the HTML report
/// carry the texts themselves).
pub(crate) fn print_caveats(caveats: &[String]) {
    for c in caveats {
        eprintln!("note: {c}");
    }
}

/// The narrowest routed experts of a published run the model predicts within 25%: Qwen3-235B-
/// A22B's 1536 (ModelZoo's H100 rows, docs/validation.md). Narrower ones are out of that domain.
const NARROWEST_VALIDATED_EXPERT: u32 = 1536;

/// The caveat for a model outside what the published runs validate, printed by `evaluate` and
/// `search` on stderr beside [`calibration_note`]: routed experts narrower than any run the
/// model predicts within 25% ([`NARROWEST_VALIDATED_EXPERT`]). The one narrower public row,
/// Megatron-Bridge 25.11's Qwen3-30B-A3B (experts of 768, FP8, 16 local experts), ran 1.7×
/// the modelled step; what the model leaves out there — the host's launches of many small
/// expert kernels and their FP8 casts — grows as experts narrow (`validate::OUT_OF_DOMAIN`).
pub(crate) fn domain_note(m: &autoplan_graph::ModelSpec) -> Option<String> {
    let moe = m.moe.as_ref()?;
    (moe.expert_ffn_hidden < NARROWEST_VALIDATED_EXPERT).then(|| {
        format!(
            "{}'s routed experts ({} wide) are narrower than any MoE autoplan predicts \
             within 25% of a published run ({NARROWEST_VALIDATED_EXPERT}); Qwen3-30B-A3B's \
             (768, FP8) ran 1.7x the modelled step, the host's launches of many small expert \
             kernels unpriced (docs/validation.md): read its times as optimistic",
            m.name, moe.expert_ffn_hidden
        )
    })
}

/// The caveat for a framework whose cost profile names what it leaves out
/// (`CostProfile::not_modelled`: torchtitan's Float8 scaling kernels and context-parallel SDPA,
/// DeepSpeed's pipeline engine), printed by `evaluate` and `search` on stderr: the profile's
/// own words, so the caveat has one home.
pub(crate) fn framework_note(f: autoplan_plan::Framework) -> Option<String> {
    let p = f.profile();
    (!p.not_modelled.is_empty()).then(|| format!("the {} cost profile: {}", p.name, p.not_modelled))
}

/// The model and cluster of `evaluate` and `search`: bundled names or paths, with the
/// workload overrides checked as a model file's `[training]` section is (a sequence longer
/// than a learned position table is an error, not a wider table) and `--gpus` resizing the
/// cluster.
pub(crate) fn load_inputs(
    model: &str,
    cluster: &str,
    w: &Workload,
) -> anyhow::Result<(autoplan_graph::ModelSpec, autoplan_cluster::Cluster)> {
    use anyhow::Context;
    let mut m = autoplan_graph::resolve_model(model)
        .with_context(|| format!("cannot load model `{model}`"))?;
    let command = "this command";
    let global_batch = match &w.global_batch {
        Some(b) => Some(b.single("--global-batch", command)?),
        None => None,
    };
    if w.seq_len.is_some() || global_batch.is_some() || w.precision.is_some() {
        let mut t = m.training.clone();
        t.seq_len = w.seq_len.unwrap_or(t.seq_len);
        t.global_batch = global_batch.unwrap_or(t.global_batch);
        if let Some(p) = w.precision {
            t.precision = p;
        }
        m = m
            .with_training(t)
            .with_context(|| format!("--seq-len/--global-batch/--precision for model `{model}`"))?;
    }
    if let Some(v) = w.imbalance {
        let Some(moe) = m.moe.as_mut() else {
            anyhow::bail!("--imbalance {v}: model `{model}` has no experts");
        };
        let e = f64::from(moe.experts);
        anyhow::ensure!(
            v.is_finite() && (1.0..=e).contains(&v),
            "--imbalance {v}: expected max/mean tokens per expert in [1, {e}] (moe.experts)"
        );
        moe.load_imbalance = v;
    }
    let mut c = autoplan_cluster::resolve_cluster(cluster)
        .with_context(|| format!("cannot load cluster `{cluster}`"))?;
    if let Some(n) = &w.gpus {
        c = c.with_gpus(n.single("--gpus", command)?)?;
    }
    if w.precision.is_some() {
        c.gpu
            .check_training_precision(m.training.precision)
            .map_err(|e| anyhow::anyhow!("model `{model}` on cluster `{cluster}`: {e}"))?;
    } else {
        // The file's precision where the GPUs run it, else their 16-bit format
        // (`precision_note` says so).
        let (p, _) = c.gpu.training_precision_for(m.training.precision);
        if p != m.training.precision {
            let mut t = m.training.clone();
            t.precision = p;
            m = m
                .with_training(t)
                .with_context(|| format!("model `{model}` in {p} on cluster `{cluster}`"))?;
        }
    }
    Ok((m, c))
}

/// The caveat for a model planned in another precision than its file's ([`load_inputs`]
/// without `--precision`, where the GPUs cannot train in the file's: `Gpu::
/// training_precision_for`): which, and why. `model` is the `--model` argument, read again
/// for its file's precision.
fn precision_note(model: &str, w: &Workload, c: &autoplan_cluster::Cluster) -> Option<String> {
    if w.precision.is_some() {
        return None;
    }
    let file = autoplan_graph::resolve_model(model)
        .ok()?
        .training
        .precision;
    let (p, why) = c.gpu.training_precision_for(file);
    why.map(|why| {
        format!(
            "planned in {p}, not {model}'s {file} (its file): {why}; --precision chooses another"
        )
    })
}

/// The caveat for GPUs no fused attention kernel runs on (`GpuArch::runs_fused_attention`):
/// the evaluator prices the attention unfused there and refuses CP (frameworks.md, "What the
/// hardware runs").
fn attention_note(c: &autoplan_cluster::Cluster) -> Option<String> {
    (!c.gpu.arch.runs_fused_attention()).then(|| {
        format!(
            "attention priced unfused (its s×s scores computed and kept) and no CP: no fused \
             attention kernel runs on {} (FlashAttention and cuDNN's need compute capability \
             8.0)",
            c.gpu.name
        )
    })
}

/// The most worker threads `--threads` takes (search, sweep): 1024. More than the hardware
/// threads of any one machine today (a two-socket server has ≤ 512), and the same bound on
/// every machine, so a command line that works on one works on another; beyond the cores,
/// threads only add spawning and merging (10,000 threads on 2 cores took over a minute).
pub(crate) const MAX_THREADS: usize = 1024;

/// `--threads N` against [1, MAX_THREADS] (`zero_means_all`: 0 = one per core is allowed).
pub(crate) fn check_threads(n: usize, zero_means_all: bool) -> anyhow::Result<()> {
    let lo = usize::from(!zero_means_all);
    anyhow::ensure!(
        (lo..=MAX_THREADS).contains(&n),
        "--threads {n}: expected [{lo}, {MAX_THREADS}]{}",
        if zero_means_all {
            " (0 = one per core)"
        } else {
            ""
        }
    );
    Ok(())
}

/// The finite-output guard: every number a command prints or exports is finite. A NaN or an
/// infinity means an input slipped past its range or a computation overflowed; it is an error
/// naming the quantity, never a printed `NaN`, `inf` or JSON `null`.
pub(crate) fn ensure_finite(what: &str, values: &[(&str, f64)]) -> anyhow::Result<()> {
    for (name, v) in values {
        anyhow::ensure!(
            v.is_finite(),
            "{what}: {name} = {v} is not a finite number (an input outside its plausible range, \
             or an overflow): nothing printed"
        );
    }
    Ok(())
}

/// [`ensure_finite`] for a plan's metrics (`search` rows, `evaluate`, `validate`).
pub(crate) fn ensure_finite_metrics(
    what: &str,
    m: &autoplan_evaluate::Metrics,
    hbm_bytes: f64,
) -> anyhow::Result<()> {
    ensure_finite(
        what,
        &[
            ("step time", m.step_time_s),
            ("tokens/s", m.tokens_per_s),
            ("tokens/s per GPU", m.tokens_per_s_per_gpu),
            ("MFU", m.mfu),
            ("HFU", m.hfu),
            ("TFLOP/s per GPU", m.tflops_per_gpu),
            ("hardware TFLOP/s per GPU", m.hw_tflops_per_gpu),
            ("memory peak", m.memory_peak_bytes),
            ("headroom", hbm_bytes - m.memory_peak_bytes),
            ("exposed communication", m.exposed_comm_s),
            ("pipeline bubble", m.bubble_s),
        ],
    )
}

/// [`ensure_finite`] for a full report: its metrics, step breakdown and communication rows.
pub(crate) fn ensure_finite_report(
    what: &str,
    r: &autoplan_evaluate::Report,
) -> anyhow::Result<()> {
    ensure_finite_metrics(what, &r.metrics, r.hbm_bytes)?;
    let b = &r.breakdown;
    ensure_finite(
        what,
        &[
            ("compute time", b.compute_s),
            ("recompute time", b.recompute_s),
            ("exposed TP time", b.tp_exposed_s),
            ("exposed CP time", b.cp_exposed_s),
            ("exposed EP time", b.ep_exposed_s),
            ("exposed PP time", b.pp_exposed_s),
            ("exposed DP time", b.dp_exposed_s),
            ("bubble", b.bubble_s),
            ("optimizer time", b.optimizer_s),
            ("offload time", b.offload_s),
            ("tokens per step", r.tokens_per_step),
        ],
    )?;
    for row in &r.comm {
        ensure_finite(
            &format!("{what}, communication `{}`", row.what),
            &[
                ("bytes", row.bytes),
                ("calls per step", row.calls_per_step),
                ("time per call", row.time_per_call),
                ("time", row.time),
                ("exposed time", row.exposed),
            ],
        )?;
    }
    Ok(())
}
