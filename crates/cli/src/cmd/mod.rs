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

/// Output format shared by the commands that print results.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    #[default]
    Table,
    Json,
    Csv,
}

/// The model and cluster of `evaluate` and `search`: bundled names or paths, with the CLI's
/// workload overrides (`--seq-len` also widens a learned position table, as Megatron does when
/// it is given a longer `--seq-length`) and `--gpus` resizing the cluster.
pub(crate) fn load_inputs(
    model: &str,
    cluster: &str,
    seq_len: Option<u32>,
    global_batch: Option<u32>,
    gpus: Option<u32>,
) -> anyhow::Result<(autoplan_graph::ModelSpec, autoplan_cluster::Cluster)> {
    use anyhow::Context;
    let mut m = autoplan_graph::resolve_model(model)
        .with_context(|| format!("cannot load model `{model}`"))?;
    if let Some(s) = seq_len {
        anyhow::ensure!(s > 0, "--seq-len must be positive");
        m.training.seq_len = s;
        m.max_positions = m.max_positions.max(s);
    }
    if let Some(b) = global_batch {
        anyhow::ensure!(b > 0, "--global-batch must be positive");
        m.training.global_batch = b;
    }
    let mut c = autoplan_cluster::resolve_cluster(cluster)
        .with_context(|| format!("cannot load cluster `{cluster}`"))?;
    if let Some(n) = gpus {
        c = c.with_gpus(n)?;
    }
    Ok((m, c))
}
