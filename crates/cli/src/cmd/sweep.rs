//! `autoplan sweep`, `merge`, `diff` (not built yet).

use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {}
#[derive(clap::Args, Debug)]
pub struct MergeArgs {}
#[derive(clap::Args, Debug)]
pub struct DiffArgs {}

pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`sweep` is not implemented yet")
}
pub fn merge(_args: MergeArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`merge` is not implemented yet")
}
pub fn diff(_args: DiffArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`diff` is not implemented yet")
}
