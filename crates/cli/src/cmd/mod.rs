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
