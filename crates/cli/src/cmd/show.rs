//! `autoplan show --model X | --cluster Y`.

use std::process::ExitCode;

use super::Format;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A bundled model name (`autoplan models`), a model TOML, or a Hugging Face config.json.
    #[arg(long, conflicts_with = "cluster", required_unless_present = "cluster")]
    pub model: Option<String>,
    /// A bundled cluster name (`autoplan clusters`) or a cluster TOML.
    #[arg(long)]
    pub cluster: Option<String>,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match (args.model, args.cluster) {
        (Some(m), _) => super::show_model::run(&m, args.format),
        (None, Some(c)) => super::show_cluster::run(&c, args.format),
        (None, None) => anyhow::bail!("give --model or --cluster"),
    }
}

pub fn models() -> anyhow::Result<ExitCode> {
    super::show_model::list()
}

pub fn clusters() -> anyhow::Result<ExitCode> {
    super::show_cluster::list()
}
