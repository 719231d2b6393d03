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
    if seq_len.is_some() || global_batch.is_some() {
        // Checked as a file's `[training]` section is: a learned position table is not
        // widened behind the user's back.
        let mut t = m.training.clone();
        t.seq_len = seq_len.unwrap_or(t.seq_len);
        t.global_batch = global_batch.unwrap_or(t.global_batch);
        m = m
            .with_training(t)
            .with_context(|| format!("--seq-len/--global-batch for model `{model}`"))?;
    }
    let mut c = autoplan_cluster::resolve_cluster(cluster)
        .with_context(|| format!("cannot load cluster `{cluster}`"))?;
    if let Some(n) = gpus {
        c = c.with_gpus(n)?;
    }
    Ok((m, c))
}
