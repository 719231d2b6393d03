//! One module per subcommand: each has an `Args` (clap) and a `run(Args) -> anyhow::Result<ExitCode>`.

pub mod collective;
pub mod evaluate;
pub mod place_experts;
pub mod search;
pub mod show;
pub mod show_cluster;
pub mod show_model;
pub mod sweep;
pub mod validate;

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
    /// Override the model's global batch (sequences).
    #[arg(long)]
    pub global_batch: Option<u32>,
    /// Override the model's training precision (the GEMMs' peak and bytes; FP8 keeps the
    /// attention core and the LM head in BF16).
    #[arg(long, value_enum)]
    pub precision: Option<TrainPrecision>,
    /// Resize the cluster to this many GPUs (whole nodes, or part of one node).
    #[arg(long)]
    pub gpus: Option<u32>,
    /// Memory per GPU held outside the model, in GiB: CUDA context, NCCL buffers, allocator
    /// fragmentation (default 3). Raise it to keep a safety margin under HBM.
    #[arg(long, value_name = "GIB")]
    pub reserve: Option<f64>,
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

/// Training precisions a model can declare.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrainPrecision {
    Bf16,
    Fp16,
    Fp8,
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
            "note: no published run on {} calibrates its GEMM and HBM efficiency; its compute \
             times use uncalibrated defaults (fitted: {})",
            c.gpu.name,
            fitted.join(", ")
        )
    })
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
    use autoplan_cluster::Precision;
    let mut m = autoplan_graph::resolve_model(model)
        .with_context(|| format!("cannot load model `{model}`"))?;
    if w.seq_len.is_some() || w.global_batch.is_some() || w.precision.is_some() {
        let mut t = m.training.clone();
        t.seq_len = w.seq_len.unwrap_or(t.seq_len);
        t.global_batch = w.global_batch.unwrap_or(t.global_batch);
        if let Some(p) = w.precision {
            t.precision = match p {
                TrainPrecision::Bf16 => Precision::Bf16,
                TrainPrecision::Fp16 => Precision::Fp16,
                TrainPrecision::Fp8 => Precision::Fp8,
            };
        }
        m = m
            .with_training(t)
            .with_context(|| format!("--seq-len/--global-batch/--precision for model `{model}`"))?;
    }
    let mut c = autoplan_cluster::resolve_cluster(cluster)
        .with_context(|| format!("cannot load cluster `{cluster}`"))?;
    if let Some(n) = w.gpus {
        c = c.with_gpus(n)?;
    }
    Ok((m, c))
}
