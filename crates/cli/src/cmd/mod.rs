//! One module per subcommand: each has an `Args` (clap) and a `run(Args) -> anyhow::Result<ExitCode>`.

pub mod collective;
pub mod evaluate;
pub mod place_experts;
pub mod search;
pub mod show;
pub mod sweep;
pub mod validate;
