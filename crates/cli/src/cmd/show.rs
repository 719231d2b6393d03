//! `autoplan show`, `models`, `clusters` (not built yet).

use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`show` is not implemented yet")
}
pub fn models() -> anyhow::Result<ExitCode> {
    anyhow::bail!("`models` is not implemented yet")
}
pub fn clusters() -> anyhow::Result<ExitCode> {
    anyhow::bail!("`clusters` is not implemented yet")
}
